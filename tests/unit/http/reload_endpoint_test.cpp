// POST /-/reload and /-/release (as Prometheus' --web.enable-lifecycle) and
// HttpServer::set_web_config: a web
// config swapped in while serving turns basic auth and headers on for the next requests, and a
// certificate that does not load is refused with the configuration in force kept.

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "http/http_server.h"
#include "raw_http.h"
#include "test_certs.h"

namespace gpumeter {
namespace {

class ReloadEndpointTest : public ::testing::Test {
 protected:
  void start(bool lifecycle) {
    HttpServerOptions o;
    o.listen_address = "127.0.0.1:0";
    o.keep_alive_timeout = std::chrono::seconds(1);
    o.enable_lifecycle = lifecycle;
    o.reload = [this]() -> Result<void> {
      ++reloads_;
      if (fail_) return Error{0, "gpumeter.yaml:3:5: project.rules[0].match: invalid regular expression"};
      return {};
    };
    o.release = [this](std::string_view query) -> Result<std::string> {
      released_.push_back(std::string(query));
      if (query == "for=2h") return Error{400, "for: at most 1h"};
      if (query == "for=1s") return Error{0, "nvml: a driver call is still in progress"};
      return std::string("nvml: released\n");
    };
    server_ = std::make_unique<HttpServer>(store_, std::move(o));
    ASSERT_TRUE(server_->start().ok());
  }
  void TearDown() override {
    if (server_) server_->stop();
  }
  std::string raw(const std::string& method, const std::string& path, const std::string& extra = "") {
    testing::RawConnection conn(server_->port());
    EXPECT_TRUE(conn.connected());
    conn.send(method + " " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + extra + "\r\n");
    return conn.read_until_close();
  }

  ExpositionStore store_;
  std::unique_ptr<HttpServer> server_;
  std::atomic<int> reloads_{0};
  std::atomic<bool> fail_{false};
  std::vector<std::string> released_;  // the queries, in order (one request at a time)
};

TEST_F(ReloadEndpointTest, ForbiddenWithoutTheLifecycleFlag) {
  start(false);
  std::string r = raw("POST", "/-/reload", "Content-Length: 0\r\n");
  EXPECT_EQ(testing::first_status(r), 403) << r;
  EXPECT_TRUE(r.ends_with("\r\n\r\nLifecycle API is not enabled.\n")) << r;
  EXPECT_EQ(reloads_.load(), 0);
}

TEST_F(ReloadEndpointTest, PostAndPutReloadOtherMethodsAre405) {
  start(true);
  for (const char* method : {"POST", "PUT"}) {
    std::string r = raw(method, "/-/reload", "Content-Length: 0\r\n");
    EXPECT_EQ(testing::first_status(r), 200) << method << "\n" << r;
  }
  EXPECT_EQ(reloads_.load(), 2);
  for (const char* method : {"GET", "HEAD", "DELETE"}) {
    std::string r = raw(method, "/-/reload");
    EXPECT_EQ(testing::first_status(r), 405) << method << "\n" << r;
    EXPECT_NE(r.find("Allow: POST, PUT\r\n"), std::string::npos) << r;
  }
  EXPECT_EQ(reloads_.load(), 2);
}

TEST_F(ReloadEndpointTest, AFailedReloadIs500WithTheReason) {
  start(true);
  fail_ = true;
  std::string r = raw("POST", "/-/reload", "Content-Length: 0\r\n");
  EXPECT_EQ(testing::first_status(r), 500) << r;
  EXPECT_NE(r.find("failed to reload config: gpumeter.yaml:3:5: project.rules[0].match"), std::string::npos) << r;
}

TEST_F(ReloadEndpointTest, ReleaseTakesItsQueryAndAnswersWithItsText) {
  start(false);
  EXPECT_EQ(testing::first_status(raw("POST", "/-/release", "Content-Length: 0\r\n")), 403);
  EXPECT_TRUE(released_.empty());
  server_->stop();
  start(true);
  std::string ok = raw("POST", "/-/release?for=30s", "Content-Length: 0\r\n");
  EXPECT_EQ(testing::first_status(ok), 200) << ok;
  EXPECT_TRUE(ok.ends_with("\r\n\r\nnvml: released\n")) << ok;
  std::string bad = raw("PUT", "/-/release?for=2h", "Content-Length: 0\r\n");
  EXPECT_EQ(testing::first_status(bad), 400) << bad;
  EXPECT_TRUE(bad.ends_with("for: at most 1h\n")) << bad;
  EXPECT_EQ(testing::first_status(raw("POST", "/-/release?for=1s", "Content-Length: 0\r\n")), 500);
  std::string get = raw("GET", "/-/release");
  EXPECT_EQ(testing::first_status(get), 405) << get;
  EXPECT_NE(get.find("Allow: POST, PUT\r\n"), std::string::npos) << get;
  EXPECT_EQ(released_, (std::vector<std::string>{"for=30s", "for=2h", "for=1s"}));
  EXPECT_EQ(reloads_.load(), 0);
}

TEST_F(ReloadEndpointTest, ReloadPathCannotBeTheTelemetryPath) {
  HttpServerOptions o;
  o.telemetry_path = "/-/reload";
  EXPECT_FALSE(validate_options(o).ok());
  o.telemetry_path = "/-/release";
  EXPECT_FALSE(validate_options(o).ok());
}

TEST_F(ReloadEndpointTest, SwappedWebConfigAppliesToTheNextRequests) {
  start(true);
  EXPECT_EQ(testing::first_status(raw("GET", "/-/healthy")), 200);
  auto web = std::make_shared<WebConfig>();
  web->path = "web.yml";
  web->basic_auth_users["ops"] = testing::bcrypt_hash("s3cret");
  web->headers.emplace_back("X-Config", "two");
  ASSERT_TRUE(server_->set_web_config(web).ok());
  std::string denied = raw("GET", "/-/healthy");
  EXPECT_EQ(testing::first_status(denied), 401) << denied;
  EXPECT_NE(denied.find("X-Config: two\r\n"), std::string::npos) << denied;
  // The reload endpoint sits behind the same auth.
  EXPECT_EQ(testing::first_status(raw("POST", "/-/reload", "Content-Length: 0\r\n")), 401);
  EXPECT_EQ(reloads_.load(), 0);
  const std::string auth = "Authorization: Basic b3BzOnMzY3JldA==\r\n";  // ops:s3cret
  EXPECT_EQ(testing::first_status(raw("GET", "/-/healthy", auth)), 200);
  EXPECT_EQ(testing::first_status(raw("POST", "/-/reload", auth + "Content-Length: 0\r\n")), 200);

  // A certificate that does not load: refused, and the config in force stays.
  auto bad = std::make_shared<WebConfig>();
  bad->path = "bad.yml";
  bad->tls.emplace();
  bad->tls->cert_file = "/nonexistent/cert.pem";
  bad->tls->key_file = "/nonexistent/key.pem";
  auto refused = server_->set_web_config(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("bad.yml"), std::string::npos) << refused.error().message;
  EXPECT_FALSE(check_web_config(*bad).ok());
  EXPECT_EQ(testing::first_status(raw("GET", "/-/healthy")), 401);

  // Back to none: plain and open again.
  ASSERT_TRUE(server_->set_web_config(nullptr).ok());
  EXPECT_EQ(testing::first_status(raw("GET", "/-/healthy")), 200);
}

}  // namespace
}  // namespace gpumeter
