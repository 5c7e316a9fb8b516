#pragma once
// --web.config.file: the Prometheus exporter-toolkit web configuration (the 0.8.2 schema that
// Debian's Prometheus 2.42 accepts), so operators reuse the file they already give node_exporter.
//
//   tls_server_config: {cert_file, key_file, client_auth_type, client_ca_file, min_version,
//                       max_version, cipher_suites, prefer_server_cipher_suites, curve_preferences}
//   http_server_config: {http2, headers}
//   basic_auth_users: {user: bcrypt hash}
//
// Validation follows exporter-toolkit (promtool check web-config gives the same verdicts), except
// that min_version above max_version is refused here instead of failing every handshake later.
// The file is read once at start; a changed file takes effect on restart.

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/result.h"

namespace gpumeter {

enum class ClientAuth {
  kNoClientCert,
  kRequestClientCert,
  kRequireAnyClientCert,
  kVerifyClientCertIfGiven,
  kRequireAndVerifyClientCert,
};

enum class TlsVersion { kTls10, kTls11, kTls12, kTls13 };

struct TlsServerConfig {
  std::string cert_file;  // paths are resolved against the config file's directory
  std::string key_file;
  ClientAuth client_auth = ClientAuth::kNoClientCert;
  std::string client_ca_file;
  TlsVersion min_version = TlsVersion::kTls12;
  TlsVersion max_version = TlsVersion::kTls13;
  std::vector<std::string> cipher_suites;  // IANA names as Go spells them; TLS 1.2 and below only
  bool prefer_server_cipher_suites = true;
  std::vector<std::string> curve_preferences;  // OpenSSL group names ("X25519", "P-256", ...)
};

struct WebConfig {
  std::string path;                                          // the file it was read from
  std::optional<TlsServerConfig> tls;                        // absent: plain HTTP
  std::map<std::string, std::string> basic_auth_users;       // user -> bcrypt hash; empty: no auth
  std::vector<std::pair<std::string, std::string>> headers;  // added to every response
  bool http2 = true;  // accepted for compatibility; the server speaks HTTP/1.1 only
};

// Far above any real config (a few hundred users); anything larger is a mistake.
inline constexpr size_t kMaxWebConfigBytes = 1 << 20;

// `path` names the file in messages ("web.yml:7: ...") and anchors relative paths.
Result<WebConfig> parse_web_config(std::string_view yaml, const std::string& path);
// Fails on anything but a readable regular file (after symlinks) of at most kMaxWebConfigBytes.
Result<WebConfig> load_web_config(const std::string& path);
// The file load_web_config parses, read with the same checks; a reload reads it the same way.
Result<std::string> read_web_config_file(const std::string& path);

// A bcrypt hash that crypt_r can verify: $2a$, $2b$, $2x$ or $2y$, cost 04..31, 53 more characters.
bool is_bcrypt_hash(std::string_view hash);

}  // namespace gpumeter
