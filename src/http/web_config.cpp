#include "http/web_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>
#include <vector>

#include "util/file_read.h"
#include "util/yaml_reader.h"

#include <cstdio>

namespace gpumeter {

namespace {

// A certificate chain or CA bundle: the system bundle is a few hundred KiB.
constexpr std::size_t kMaxTlsFileBytes = 16 << 20;

// Only these headers, and for two of them only these values, as exporter-toolkit allows.
const std::map<std::string, std::vector<std::string>>& allowed_headers() {
  static const std::map<std::string, std::vector<std::string>> kAllowed = {
      {"Strict-Transport-Security", {}},
      {"X-Content-Type-Options", {"nosniff"}},
      {"X-Frame-Options", {"deny", "sameorigin"}},
      {"X-XSS-Protection", {}},
      {"Content-Security-Policy", {}},
  };
  return kAllowed;
}

class Parser {
 public:
  explicit Parser(const std::string& path) : path_(path) {}

  Error error_at(const YAML::Node& node, const std::string& what) const {
    const YAML::Mark m = node.Mark();
    std::string where = path_;
    if (!m.is_null()) where += ":" + std::to_string(m.line + 1);
    return Error{0, where + ": " + what};
  }

  // With the column of the byte at `offset` inside a plain or quoted scalar: for values whose fault
  // is one character among many. Escapes in quoted scalars make the column approximate.
  Error error_at_char(const YAML::Node& node, size_t offset, const std::string& what) const {
    const YAML::Mark m = node.Mark();
    if (m.is_null()) return Error{0, path_ + ": " + what};
    const size_t quote = node.Tag() == "!" ? 1 : 0;  // yaml-cpp tags quoted scalars "!"
    return Error{0, path_ + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1 + quote + offset) +
                        ": " + what};
  }

  // Calls fn(key, value) for each entry; rejects non-maps, duplicate keys and keys not in `known`.
  template <typename Fn>
  Result<void> each_field(const YAML::Node& map, const std::string& where, const std::set<std::string>& known,
                          Fn fn) const {
    if (map.IsNull()) return {};
    if (!map.IsMap()) return error_at(map, where + " must be a mapping");
    std::set<std::string> seen;
    for (const auto& kv : map) {
      const std::string key = kv.first.Scalar();
      if (!seen.insert(key).second) return error_at(kv.first, "field " + key + " already set in " + where);
      if (!known.empty() && !known.count(key)) return error_at(kv.first, "field " + key + " not found in " + where);
      if (auto r = fn(kv.first, key, kv.second); !r) return r;
    }
    return {};
  }

  Result<std::string> scalar(const YAML::Node& n, const std::string& field) const {
    if (n.IsNull()) return std::string();
    if (!n.IsScalar()) return error_at(n, field + " must be a string");
    return n.Scalar();
  }

  Result<bool> boolean(const YAML::Node& n, const std::string& field) const {
    bool v = false;
    if (!n.IsScalar() || !YAML::convert<bool>::decode(n, v)) return error_at(n, field + " must be true or false");
    return v;
  }

  Result<std::vector<std::string>> string_list(const YAML::Node& n, const std::string& field) const {
    std::vector<std::string> out;
    if (n.IsNull()) return out;
    if (!n.IsSequence()) return error_at(n, field + " must be a list");
    for (const auto& item : n) {
      auto s = scalar(item, field + " entry");
      if (!s) return s.error();
      out.push_back(*s);
    }
    return out;
  }

  std::string resolve(const std::string& file) const {
    if (file.empty() || std::filesystem::path(file).is_absolute()) return file;
    return (std::filesystem::path(path_).parent_path() / file).lexically_normal().string();
  }

 private:
  const std::string& path_;
};

Result<TlsVersion> tls_version(const Parser& p, const YAML::Node& n) {
  static const std::map<std::string, TlsVersion> kVersions = {{"TLS10", TlsVersion::kTls10},
                                                              {"TLS11", TlsVersion::kTls11},
                                                              {"TLS12", TlsVersion::kTls12},
                                                              {"TLS13", TlsVersion::kTls13}};
  auto it = kVersions.find(n.IsScalar() ? n.Scalar() : "");
  if (it == kVersions.end()) return p.error_at(n, "unknown TLS version: " + (n.IsScalar() ? n.Scalar() : "?"));
  return it->second;
}

Result<ClientAuth> client_auth(const Parser& p, const YAML::Node& n) {
  static const std::map<std::string, ClientAuth> kModes = {
      {"", ClientAuth::kNoClientCert},
      {"NoClientCert", ClientAuth::kNoClientCert},
      {"RequestClientCert", ClientAuth::kRequestClientCert},
      {"RequireAnyClientCert", ClientAuth::kRequireAnyClientCert},
      {"RequireClientCert", ClientAuth::kRequireAnyClientCert},  // old name, still accepted upstream
      {"VerifyClientCertIfGiven", ClientAuth::kVerifyClientCertIfGiven},
      {"RequireAndVerifyClientCert", ClientAuth::kRequireAndVerifyClientCert}};
  auto s = p.scalar(n, "client_auth_type");
  if (!s) return s.error();
  auto it = kModes.find(*s);
  if (it == kModes.end()) return p.error_at(n, "Invalid ClientAuth: " + *s);
  return it->second;
}

Result<std::string> curve(const Parser& p, const YAML::Node& n) {
  static const std::map<std::string, std::string> kCurves = {
      {"CurveP256", "P-256"}, {"CurveP384", "P-384"}, {"CurveP521", "P-521"}, {"X25519", "X25519"}};
  auto it = kCurves.find(n.IsScalar() ? n.Scalar() : "");
  if (it == kCurves.end()) return p.error_at(n, "unknown curve: " + (n.IsScalar() ? n.Scalar() : "?"));
  return it->second;
}

// Go's tls.CipherSuites(): the suites exporter-toolkit accepts by name.
bool known_cipher(const std::string& name) {
  static const std::set<std::string> kCiphers = {
      "TLS_RSA_WITH_AES_128_CBC_SHA",
      "TLS_RSA_WITH_AES_256_CBC_SHA",
      "TLS_RSA_WITH_AES_128_GCM_SHA256",
      "TLS_RSA_WITH_AES_256_GCM_SHA384",
      "TLS_AES_128_GCM_SHA256",
      "TLS_AES_256_GCM_SHA384",
      "TLS_CHACHA20_POLY1305_SHA256",
      "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
      "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
      "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
      "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
      "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
      "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
      "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
      "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
      "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
      "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
  };
  return kCiphers.count(name) > 0;
}

Result<void> parse_tls(const Parser& p, const YAML::Node& node, WebConfig& out) {
  TlsServerConfig tls;
  bool client_auth_set = false;
  auto r = p.each_field(
      node, "tls_server_config",
      {"cert_file", "key_file", "client_auth_type", "client_ca_file", "min_version", "max_version", "cipher_suites",
       "prefer_server_cipher_suites", "curve_preferences"},
      [&](const YAML::Node&, const std::string& key, const YAML::Node& v) -> Result<void> {
        if (key == "cert_file" || key == "key_file" || key == "client_ca_file") {
          auto s = p.scalar(v, key);
          if (!s) return s.error();
          (key == "cert_file" ? tls.cert_file : key == "key_file" ? tls.key_file : tls.client_ca_file) = p.resolve(*s);
        } else if (key == "client_auth_type") {
          auto a = client_auth(p, v);
          if (!a) return a.error();
          tls.client_auth = *a;
          client_auth_set = !v.IsNull() && !v.Scalar().empty();
        } else if (key == "min_version" || key == "max_version") {
          auto ver = tls_version(p, v);
          if (!ver) return ver.error();
          (key == "min_version" ? tls.min_version : tls.max_version) = *ver;
        } else if (key == "prefer_server_cipher_suites") {
          auto b = p.boolean(v, key);
          if (!b) return b.error();
          tls.prefer_server_cipher_suites = *b;
        } else if (key == "cipher_suites") {
          auto list = p.string_list(v, key);
          if (!list) return list.error();
          for (size_t i = 0; i < list->size(); ++i) {
            if (!known_cipher((*list)[i])) return p.error_at(v[i], "unknown cipher: " + (*list)[i]);
          }
          tls.cipher_suites = *list;
        } else if (key == "curve_preferences") {
          if (!v.IsNull() && !v.IsSequence()) return p.error_at(v, "curve_preferences must be a list");
          for (const auto& item : v) {
            auto c = curve(p, item);
            if (!c) return c.error();
            tls.curve_preferences.push_back(*c);
          }
        }
        return {};
      });
  if (!r) return r;
  // As exporter-toolkit: a section without any of these four leaves TLS off.
  if (tls.cert_file.empty() && tls.key_file.empty() && !client_auth_set && tls.client_ca_file.empty()) return {};
  if (tls.cert_file.empty()) return p.error_at(node, "missing cert_file");
  if (tls.key_file.empty()) return p.error_at(node, "missing key_file");
  if (!tls.client_ca_file.empty() && tls.client_auth == ClientAuth::kNoClientCert) {
    return p.error_at(node, "Client CA's have been configured without a Client Auth Policy");
  }
  if (tls.min_version > tls.max_version) {
    return p.error_at(node, "min_version is above max_version: no TLS handshake could succeed");
  }
  // Checked here as the config itself is: a FIFO in a certificate's place would otherwise hang
  // the TLS library's read, at start or in a reload.
  for (const std::string* f : {&tls.cert_file, &tls.key_file, &tls.client_ca_file}) {
    if (f->empty()) continue;
    if (auto probe = read_regular_file(*f, {.max_bytes = kMaxTlsFileBytes}); !probe) {
      return p.error_at(node, "cannot read " + *f + ": " + probe.error().message);
    }
  }
  out.tls = std::move(tls);
  return {};
}

Result<void> parse_http(const Parser& p, const YAML::Node& node, WebConfig& out) {
  return p.each_field(node, "http_server_config", {"http2", "headers"},
                      [&](const YAML::Node&, const std::string& key, const YAML::Node& v) -> Result<void> {
                        if (key == "http2") {
                          auto b = p.boolean(v, key);
                          if (!b) return b.error();
                          out.http2 = *b;
                          return {};
                        }
                        return p.each_field(
                            v, "headers", {},
                            [&](const YAML::Node& k, const std::string& name, const YAML::Node& value) -> Result<void> {
                              auto s = p.scalar(value, name);
                              if (!s) return s.error();
                              // A NUL or control byte would split or truncate the response header on the wire.
                              for (size_t i = 0; i < s->size(); ++i) {
                                const unsigned char c = static_cast<unsigned char>((*s)[i]);
                                if ((c < 0x20 && c != '\t') || c == 0x7f) {
                                  char hex[8];
                                  std::snprintf(hex, sizeof hex, "0x%02x", c);
                                  return p.error_at_char(
                                      value, i,
                                      "control character " + std::string(hex) + " in the value of header " + name);
                                }
                              }
                              auto it = allowed_headers().find(name);
                              if (it == allowed_headers().end()) {
                                return p.error_at(k, "HTTP header \"" + name + "\" can not be configured");
                              }
                              const auto& values = it->second;
                              if (!values.empty() && std::find(values.begin(), values.end(), *s) == values.end()) {
                                return p.error_at(value, "invalid value \"" + *s + "\" for " + name);
                              }
                              out.headers.emplace_back(name, *s);
                              return {};
                            });
                      });
}

Result<void> parse_users(const Parser& p, const YAML::Node& node, WebConfig& out) {
  return p.each_field(node, "basic_auth_users", {},
                      [&](const YAML::Node&, const std::string& user, const YAML::Node& v) -> Result<void> {
                        auto hash = p.scalar(v, user);
                        if (!hash) return hash.error();
                        if (!is_bcrypt_hash(*hash)) {
                          return p.error_at(v, "password of user " + user + " is not a bcrypt hash");
                        }
                        out.basic_auth_users.emplace(user, *hash);
                        return {};
                      });
}

}  // namespace

bool is_bcrypt_hash(std::string_view h) {
  if (h.size() != 60 || h[0] != '$' || h[1] != '2' || h[3] != '$' || h[6] != '$') return false;
  if (h[2] != 'a' && h[2] != 'b' && h[2] != 'x' && h[2] != 'y') return false;
  if (!std::isdigit(static_cast<unsigned char>(h[4])) || !std::isdigit(static_cast<unsigned char>(h[5]))) return false;
  const int cost = (h[4] - '0') * 10 + (h[5] - '0');
  if (cost < 4 || cost > 31) return false;
  for (char c : h.substr(7)) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '/') return false;
  }
  return true;
}

Result<WebConfig> parse_web_config(std::string_view yaml, const std::string& path) {
  WebConfig out;
  out.path = path;
  Parser p(path);
  YAML::Node root;
  try {
    // Not YAML::Load: after a ',' outside [...] or {...} it returns an empty document and
    // ignores the rest, which would turn off the TLS and the basic auth the file asks for.
    const std::vector<YAML::Node> docs = load_documents(yaml);
    if (!docs.empty()) root = docs[0];
  } catch (const YAML::Exception& e) {
    return Error{0, path + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg};
  }
  auto r = p.each_field(root, "the web config", {"tls_server_config", "http_server_config", "basic_auth_users"},
                        [&](const YAML::Node&, const std::string& key, const YAML::Node& v) -> Result<void> {
                          if (key == "tls_server_config") return parse_tls(p, v, out);
                          if (key == "http_server_config") return parse_http(p, v, out);
                          return parse_users(p, v, out);
                        });
  if (!r) return r.error();
  return out;
}

Result<std::string> read_web_config_file(const std::string& path) {
  // Fails closed: a directory (a ConfigMap mounted at the wrong level), a device or a FIFO must stop
  // the agent rather than leave it serving plain HTTP without auth, or reading /dev/zero forever.
  auto text = read_regular_file(path, {.max_bytes = kMaxWebConfigBytes});
  if (!text) return Error{text.error().code, "cannot read web config " + path + ": " + text.error().message};
  return text;
}

Result<WebConfig> load_web_config(const std::string& path) {
  auto text = read_web_config_file(path);
  if (!text) return text.error();
  return parse_web_config(*text, path);
}

}  // namespace gpumeter
