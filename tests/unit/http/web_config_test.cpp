#include "http/web_config.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "test_certs.h"

namespace gpumeter {
namespace {

class WebConfigTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certs_ = new testing::TestCerts();
    hash_ = testing::bcrypt_hash("secret");
  }
  static void TearDownTestSuite() {
    delete certs_;
    certs_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(certs_->ok()) << "openssl could not make the test certificates"; }

  // Writes `yaml` next to the certificates, so relative paths resolve to them.
  std::string write(const std::string& yaml) {
    certs_->write("web.yml", yaml);
    return certs_->path("web.yml");
  }
  Result<WebConfig> load(const std::string& yaml) { return load_web_config(write(yaml)); }

  // Runs the peer: Prometheus' own validator for the same file.
  bool promtool_accepts(const std::string& yaml) {
    const std::string cmd = "promtool check web-config '" + write(yaml) + "' >/dev/null 2>&1";
    const int status = std::system(cmd.c_str());
    EXPECT_NE(status, -1);
    EXPECT_NE(WEXITSTATUS(status), 127) << "promtool not found";
    return status == 0;
  }

  void expect_error(const std::string& yaml, const std::string& where, const std::string& what) {
    auto r = load(yaml);
    ASSERT_FALSE(r.ok()) << yaml;
    EXPECT_NE(r.error().message.find(certs_->path("web.yml") + where), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find(what), std::string::npos) << r.error().message;
  }

  static testing::TestCerts* certs_;
  static std::string hash_;
};

testing::TestCerts* WebConfigTest::certs_ = nullptr;
std::string WebConfigTest::hash_;

TEST_F(WebConfigTest, FullConfig) {
  auto r = load(
      "tls_server_config:\n"
      "  cert_file: server.crt\n"
      "  key_file: " +
      certs_->path("server.key") +
      "\n"
      "  client_auth_type: RequireAndVerifyClientCert\n"
      "  client_ca_file: ca.crt\n"
      "  min_version: TLS13\n"
      "  max_version: TLS13\n"
      "  cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_AES_128_GCM_SHA256]\n"
      "  prefer_server_cipher_suites: false\n"
      "  curve_preferences: [X25519, CurveP256]\n"
      "http_server_config:\n"
      "  http2: false\n"
      "  headers:\n"
      "    X-Frame-Options: deny\n"
      "    Strict-Transport-Security: max-age=31536000\n"
      "basic_auth_users:\n"
      "  alice: '" +
      hash_ + "'\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE(r->tls.has_value());
  EXPECT_EQ(r->tls->cert_file, certs_->path("server.crt")) << "relative to the config file's directory";
  EXPECT_EQ(r->tls->key_file, certs_->path("server.key"));
  EXPECT_EQ(r->tls->client_ca_file, certs_->path("ca.crt"));
  EXPECT_EQ(r->tls->client_auth, ClientAuth::kRequireAndVerifyClientCert);
  EXPECT_EQ(r->tls->min_version, TlsVersion::kTls13);
  EXPECT_EQ(r->tls->cipher_suites.size(), 2u);
  EXPECT_FALSE(r->tls->prefer_server_cipher_suites);
  EXPECT_EQ(r->tls->curve_preferences, (std::vector<std::string>{"X25519", "P-256"}));
  EXPECT_FALSE(r->http2);
  EXPECT_EQ(r->headers.size(), 2u);
  EXPECT_EQ(r->basic_auth_users.at("alice"), hash_);
}

TEST_F(WebConfigTest, EmptyFileAndEmptySectionsMeanPlainHttp) {
  for (const char* yaml :
       {"", "tls_server_config: {}\n", "tls_server_config:\n  min_version: TLS12\n", "basic_auth_users: {}\n"}) {
    auto r = load(yaml);
    ASSERT_TRUE(r.ok()) << yaml << ": " << r.error().message;
    EXPECT_FALSE(r->tls.has_value()) << yaml;
    EXPECT_TRUE(r->basic_auth_users.empty());
  }
}

TEST_F(WebConfigTest, ErrorsNameFileAndLine) {
  expect_error("foo: 1\n", ":1:", "field foo not found");
  expect_error("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  rate_limit: 1\n",
               ":4:", "field rate_limit not found in tls_server_config");
  expect_error("basic_auth_users:\n  alice: '" + hash_ + "'\n  alice: '" + hash_ + "'\n", ":3:", "already set");
  expect_error("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  min_version: TLS14\n",
               ":4:", "unknown TLS version: TLS14");
  expect_error("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  cipher_suites: [TLS_FOO]\n",
               ":4:", "unknown cipher: TLS_FOO");
  expect_error("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  curve_preferences: [P999]\n",
               ":4:", "unknown curve: P999");
  expect_error("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_auth_type: Bogus\n",
               ":4:", "Invalid ClientAuth: Bogus");
  expect_error("tls_server_config:\n  cert_file: server.crt\n", ":2:", "missing key_file");
  expect_error("tls_server_config:\n  key_file: server.key\n", ":2:", "missing cert_file");
  expect_error("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_ca_file: ca.crt\n",
               ":2:", "without a Client Auth Policy");
  expect_error(
      "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  min_version: TLS13\n"
      "  max_version: TLS12\n",
      ":2:", "min_version is above max_version");
  expect_error("tls_server_config:\n  cert_file: missing.crt\n  key_file: server.key\n",
               ":2:", "cannot read " + certs_->path("missing.crt"));
  expect_error("http_server_config:\n  headers:\n    Foo: bar\n", ":3:", "HTTP header \"Foo\" can not be configured");
  expect_error("http_server_config:\n  headers:\n    X-Frame-Options: allow\n", ":3:", "invalid value \"allow\"");
  expect_error("http_server_config:\n  http2: maybe\n", ":2:", "http2 must be true or false");
  expect_error("basic_auth_users:\n  alice: notahash\n", ":2:", "not a bcrypt hash");
  expect_error("tls_server_config: [a, b]\n", ":1:", "tls_server_config must be a mapping");
  expect_error("basic_auth_users: {alice: [x]}\n", ":1:", "alice must be a string");
  expect_error("tls_server_config:\n  cert_file: 'unterminated\n", ":", "");
}

// yaml-cpp's Load returns an empty document for text that starts with a ',' and ignores the
// rest: the file below was accepted as plain HTTP without authentication.
TEST(WebConfigParse, StrayCommaIsAnErrorNotAnEmptyConfig) {
  const std::string users =
      "basic_auth_users:\n  alice: '$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi'\n";
  auto good = parse_web_config(users, "web.yml");
  ASSERT_TRUE(good.ok()) << good.error().message;
  EXPECT_EQ(good->basic_auth_users.size(), 1u);
  for (const std::string& yaml : {",\n" + users, users + "---\n,\n"}) {
    auto r = parse_web_config(yaml, "web.yml");
    ASSERT_FALSE(r.ok()) << yaml;
    EXPECT_NE(r.error().message.find("web.yml:"), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("unexpected ','"), std::string::npos) << r.error().message;
  }
}

TEST_F(WebConfigTest, MissingFile) {
  auto r = load_web_config(certs_->path("does-not-exist.yml"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("does-not-exist.yml"), std::string::npos);
}

// A mis-mounted ConfigMap or a wrong path must stop the agent, never leave it serving without TLS and auth.
TEST_F(WebConfigTest, FailsClosedOnAnythingButABoundedRegularFile) {
  const std::filesystem::path dir = certs_->dir() / "web.d";
  std::filesystem::create_directories(dir);
  auto as_dir = load_web_config(dir.string());
  ASSERT_FALSE(as_dir.ok());
  EXPECT_NE(as_dir.error().message.find("is a directory"), std::string::npos) << as_dir.error().message;

  // Reading /dev/zero to the end grew the agent to gigabytes; it must be refused without reading.
  for (const char* device : {"/dev/zero", "/dev/null"}) {
    auto r = load_web_config(device);
    ASSERT_FALSE(r.ok()) << device;
    EXPECT_NE(r.error().message.find("not a regular file"), std::string::npos) << r.error().message;
  }

  certs_->write("huge.yml", "# " + std::string(kMaxWebConfigBytes, 'x') + "\n");
  auto huge = load_web_config(certs_->path("huge.yml"));
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.error().message.find("larger than 1048576 bytes"), std::string::npos) << huge.error().message;

  // A symlink to a regular file is how Kubernetes mounts a ConfigMap key: still accepted.
  certs_->write("real.yml", "http_server_config:\n  http2: false\n");
  std::filesystem::remove(certs_->dir() / "link.yml");
  std::filesystem::create_symlink(certs_->path("real.yml"), certs_->dir() / "link.yml");
  EXPECT_TRUE(load_web_config(certs_->path("link.yml")).ok());

  // A FIFO would block the start until someone writes to it.
  const std::string fifo = certs_->path("web.fifo");
  std::filesystem::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto as_fifo = load_web_config(fifo);
  ASSERT_FALSE(as_fifo.ok());
  EXPECT_NE(as_fifo.error().message.find("not a regular file"), std::string::npos) << as_fifo.error().message;

  // Unreadable even for root: a path through a regular file.
  auto through_file = load_web_config(certs_->path("real.yml") + "/web.yml");
  ASSERT_FALSE(through_file.ok());
  EXPECT_NE(through_file.error().message.find("Not a directory"), std::string::npos) << through_file.error().message;
}

TEST_F(WebConfigTest, ControlCharactersInHeaderValuesAreRejectedWithLineAndColumn) {
  // Column 29 is the escaped byte: the quote is at column 23, the value starts at 24.
  expect_error("http_server_config:\n  headers:\n    X-XSS-Protection: \"1; mo\\x01de=block\"\n",
               ":3:29:", "control character 0x01 in the value of header X-XSS-Protection");
  expect_error("http_server_config:\n  headers:\n    Content-Security-Policy: \"a\\0b\"\n",
               ":3:", "control character 0x00");
  expect_error("http_server_config:\n  headers:\n    Content-Security-Policy: \"a\\r\\nSet-Cookie: x\"\n",
               ":3:", "control character 0x0d");
  expect_error("http_server_config:\n  headers:\n    Content-Security-Policy: \"a\\x7f\"\n",
               ":3:", "control character 0x7f");
  auto tab = load("http_server_config:\n  headers:\n    Content-Security-Policy: \"default-src\\t'self'\"\n");
  EXPECT_TRUE(tab.ok()) << tab.error().message;
}

TEST_F(WebConfigTest, BcryptHashShape) {
  EXPECT_TRUE(is_bcrypt_hash(hash_));
  EXPECT_TRUE(is_bcrypt_hash("$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi"));
  EXPECT_FALSE(is_bcrypt_hash("$2y$03$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi"));  // cost 3
  EXPECT_FALSE(is_bcrypt_hash("$2c$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi"));
  EXPECT_FALSE(is_bcrypt_hash("$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeS"));  // short
  EXPECT_FALSE(is_bcrypt_hash("$6$salt$hash"));
}

TEST_F(WebConfigTest, VerdictsMatchPromtool) {
  const std::string tls = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n";
  const std::vector<std::string> configs = {
      "",
      tls,
      tls + "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n",
      tls + "  client_auth_type: RequireAnyClientCert\n",
      tls + "  client_auth_type: RequireClientCert\n",
      tls + "  client_auth_type: VerifyClientCertIfGiven\n",
      tls + "  client_auth_type: Bogus\n",
      tls + "  client_ca_file: ca.crt\n",
      tls + "  min_version: TLS10\n  max_version: TLS11\n",
      tls + "  min_version: TLS14\n",
      tls + "  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, TLS_RSA_WITH_AES_128_CBC_SHA]\n",
      tls + "  cipher_suites: [TLS_FOO]\n",
      tls + "  curve_preferences: [CurveP384, CurveP521]\n",
      tls + "  curve_preferences: [CurveP999]\n",
      tls + "  prefer_server_cipher_suites: false\n",
      tls + "  rate_limit: 1\n",
      "tls_server_config:\n  cert_file: server.crt\n",
      "tls_server_config:\n  key_file: server.key\n",
      "tls_server_config:\n  cert_file: nope.crt\n  key_file: server.key\n",
      "http_server_config:\n  http2: false\n  headers:\n    X-Content-Type-Options: nosniff\n",
      "http_server_config:\n  headers:\n    X-Content-Type-Options: sniff\n",
      "http_server_config:\n  headers:\n    Server: gpumeter\n",
      "basic_auth_users:\n  alice: '" + hash_ + "'\n",
      "basic_auth_users:\n  alice: '$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi'\n",
      "basic_auth_users:\n  alice: secret\n",
      "unknown: 1\n",
  };
  for (const auto& yaml : configs) {
    const bool ours = load(yaml).ok();
    EXPECT_EQ(ours, promtool_accepts(yaml)) << "gpumeter and promtool disagree on:\n" << yaml;
  }
}

}  // namespace
}  // namespace gpumeter
