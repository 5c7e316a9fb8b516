// HttpServer with a web config: TLS (server and client certificates, protocol versions), basic auth
// and extra headers, exercised with cpp-httplib's TLS client against a throwaway CA.

#include <gtest/gtest.h>

#include <httplib.h>
#include <openssl/ssl.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>
#include <vector>

#include "../render/fixture_snapshot.h"
#include "fake_clock.h"
#include "http/http_server.h"
#include "raw_http.h"
#include "test_certs.h"

namespace gpumeter {
namespace {

std::string golden_text() {
  std::ifstream in(std::string(GPUMETER_SOURCE_DIR) + "/tests/golden/metrics.txt", std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class WebServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certs_ = new testing::TestCerts();
    hash_ = testing::bcrypt_hash("secret", "$2y$");
  }
  static void TearDownTestSuite() {
    delete certs_;
    certs_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(certs_->ok()) << "openssl could not make the test certificates";
    ASSERT_TRUE(store_.publish(std::make_shared<const Snapshot>(testing::fixture_snapshot())).ok());
  }
  void TearDown() override {
    if (server_) server_->stop();
  }

  Result<void> start(const std::string& yaml) {
    certs_->write("web.yml", yaml);
    auto config = load_web_config(certs_->path("web.yml"));
    if (!config) return config.error();
    HttpServerOptions o;
    o.listen_address = "127.0.0.1:0";
    clock_.set_wall_us(std::llround(testing::kFixtureNowUnix * 1e6));
    o.clock = &clock_;
    o.keep_alive_timeout = std::chrono::seconds(1);
    o.web_config = std::make_shared<const WebConfig>(std::move(config).value());
    server_ = std::make_unique<HttpServer>(store_, o);
    return server_->start();
  }

  // A TLS client that trusts the test CA, optionally presenting a client certificate.
  std::unique_ptr<httplib::SSLClient> tls_client(const std::string& cert = "", const std::string& key = "") {
    auto c = cert.empty() ? std::make_unique<httplib::SSLClient>("127.0.0.1", server_->port())
                          : std::make_unique<httplib::SSLClient>("127.0.0.1", server_->port(), certs_->path(cert),
                                                                 certs_->path(key));
    c->set_ca_cert_path(certs_->path("ca.crt").c_str());
    c->enable_server_certificate_verification(true);
    c->set_decompress(false);
    c->set_read_timeout(5, 0);
    c->set_connection_timeout(5, 0);
    return c;
  }

  std::string tls_yaml(const std::string& extra = "") {
    return "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n" + extra;
  }

  static testing::TestCerts* certs_;
  static std::string hash_;
  ExpositionStore store_;
  std::unique_ptr<HttpServer> server_;
  testing::FakeClock clock_;
};

testing::TestCerts* WebServerTest::certs_ = nullptr;
std::string WebServerTest::hash_;

TEST_F(WebServerTest, ServesMetricsOverTls) {
  auto started = start(tls_yaml());
  ASSERT_TRUE(started.ok()) << started.error().message;
  auto r = tls_client()->Get("/metrics");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, golden_text());
}

TEST_F(WebServerTest, PlainHttpToTheTlsPortIsRefusedAndTheServerKeepsServing) {
  ASSERT_TRUE(start(tls_yaml()).ok());
  testing::RawConnection plain(server_->port());
  ASSERT_TRUE(plain.connected());
  plain.send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(plain.read_until_close().find("gpu_up"), std::string::npos) << "no metrics over plain HTTP";
  auto r = tls_client()->Get("/-/healthy");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);
}

// A TLS handshake that never completes holds no thread: the handshake runs on the event loop, under
// the request deadline.
TEST_F(WebServerTest, StalledHandshakesDoNotBlockTlsScrapes) {
  ASSERT_TRUE(start(tls_yaml()).ok());
  std::vector<std::unique_ptr<testing::RawConnection>> stalled;
  for (int i = 0; i < 40; ++i) {
    stalled.push_back(std::make_unique<testing::RawConnection>(server_->port()));
    ASSERT_TRUE(stalled.back()->connected());
    if (i % 2 == 0) stalled.back()->send(std::string("\x16\x03\x01", 3));  // a ClientHello's first bytes
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto r = tls_client()->Get("/metrics");
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);
  EXPECT_LT(took, std::chrono::seconds(2));
}

TEST_F(WebServerTest, ClientThatDoesNotTrustTheServerFails) {
  ASSERT_TRUE(start(tls_yaml()).ok());
  httplib::SSLClient c("127.0.0.1", server_->port());
  c.set_ca_cert_path(certs_->path("rogue.crt").c_str());
  c.enable_server_certificate_verification(true);
  EXPECT_FALSE(c.Get("/-/healthy"));
}

TEST_F(WebServerTest, RequireAndVerifyClientCert) {
  ASSERT_TRUE(start(tls_yaml("  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n")).ok());
  auto without = tls_client()->Get("/-/healthy");
  EXPECT_FALSE(without) << "no client certificate must fail the handshake";
  auto rogue = tls_client("rogue.crt", "rogue.key")->Get("/-/healthy");
  EXPECT_FALSE(rogue) << "a certificate the CA did not sign must fail";
  auto good = tls_client("client.crt", "client.key")->Get("/metrics");
  ASSERT_TRUE(good) << httplib::to_string(good.error());
  EXPECT_EQ(good->status, 200);
}

TEST_F(WebServerTest, RequireAnyClientCertAcceptsUnverifiedCertificates) {
  ASSERT_TRUE(start(tls_yaml("  client_auth_type: RequireAnyClientCert\n")).ok());
  EXPECT_FALSE(tls_client()->Get("/-/healthy"));
  auto rogue = tls_client("rogue.crt", "rogue.key")->Get("/-/healthy");
  ASSERT_TRUE(rogue) << httplib::to_string(rogue.error());
  EXPECT_EQ(rogue->status, 200);
}

TEST_F(WebServerTest, MinVersionIsEnforced) {
  ASSERT_TRUE(start(tls_yaml("  min_version: TLS13\n")).ok());
  auto old = tls_client();
  SSL_CTX_set_max_proto_version(old->ssl_context(), TLS1_2_VERSION);
  EXPECT_FALSE(old->Get("/-/healthy")) << "a TLS 1.2 client must be refused";
  auto current = tls_client()->Get("/-/healthy");
  ASSERT_TRUE(current) << httplib::to_string(current.error());
  EXPECT_EQ(current->status, 200);
}

TEST_F(WebServerTest, BasicAuthOnEveryEndpointWithHeaders) {
  ASSERT_TRUE(start("basic_auth_users:\n  alice: '" + hash_ +
                    "'\nhttp_server_config:\n  headers:\n"
                    "    X-Frame-Options: deny\n    X-Content-Type-Options: nosniff\n")
                  .ok());
  httplib::Client c("127.0.0.1", server_->port());
  c.set_decompress(false);
  for (const char* path : {"/metrics", "/", "/-/healthy", "/-/ready", "/nope"}) {
    auto anonymous = c.Get(path);
    ASSERT_TRUE(anonymous);
    EXPECT_EQ(anonymous->status, 401) << path;
    EXPECT_EQ(anonymous->get_header_value("WWW-Authenticate"), "Basic") << path;
    EXPECT_EQ(anonymous->get_header_value("X-Frame-Options"), "deny") << path;
  }
  c.set_basic_auth("alice", "wrong");
  auto wrong = c.Get("/metrics");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);

  c.set_basic_auth("alice", "secret");
  auto ok = c.Get("/metrics");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(ok->body, golden_text());
  EXPECT_EQ(ok->get_header_value("X-Content-Type-Options"), "nosniff");
  auto unknown = c.Get("/nope");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404) << "authenticated requests reach the normal routing";
}

TEST_F(WebServerTest, TlsAndBasicAuthTogether) {
  ASSERT_TRUE(start(tls_yaml() + "basic_auth_users:\n  alice: '" + hash_ + "'\n").ok());
  auto c = tls_client();
  auto anonymous = c->Get("/metrics");
  ASSERT_TRUE(anonymous) << httplib::to_string(anonymous.error());
  EXPECT_EQ(anonymous->status, 401);
  c->set_basic_auth("alice", "secret");
  auto ok = c->Get("/metrics");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

TEST_F(WebServerTest, MismatchedKeyIsReportedAtStart) {
  auto r = start("tls_server_config:\n  cert_file: server.crt\n  key_file: rogue.key\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("web.yml"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("rogue.key"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("mismatch"), std::string::npos) << r.error().message;
}

// A reload's web config: TLS turned on applies to the connections accepted after it, and off again.
TEST_F(WebServerTest, TlsTurnedOnAndOffWhileServing) {
  ASSERT_TRUE(start("").ok());
  httplib::Client plain("127.0.0.1", server_->port());
  auto before = plain.Get("/-/healthy");
  ASSERT_TRUE(before);
  EXPECT_EQ(before->status, 200);

  certs_->write("web.yml", tls_yaml());
  auto tls = load_web_config(certs_->path("web.yml"));
  ASSERT_TRUE(tls.ok()) << tls.error().message;
  ASSERT_TRUE(server_->set_web_config(std::make_shared<const WebConfig>(std::move(tls).value())).ok());
  auto over_tls = tls_client()->Get("/-/healthy");
  ASSERT_TRUE(over_tls) << httplib::to_string(over_tls.error());
  EXPECT_EQ(over_tls->status, 200);
  testing::RawConnection refused(server_->port());
  ASSERT_TRUE(refused.connected());
  refused.send("GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(refused.read_until_close().find("Healthy"), std::string::npos) << "no plain HTTP once TLS is on";

  ASSERT_TRUE(server_->set_web_config(nullptr).ok());
  httplib::Client again("127.0.0.1", server_->port());
  auto after = again.Get("/-/healthy");
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, 200);
}
}  // namespace
}  // namespace gpumeter
