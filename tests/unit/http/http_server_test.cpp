// A real HttpServer on loopback, driven by cpp-httplib's client and by raw sockets.

#include "http/http_server.h"

#include <gtest/gtest.h>

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>

#include "../render/fixture_snapshot.h"
#include "../render/inflate.h"
#include "fake_clock.h"
#include "raw_http.h"
#include "render/families.h"

namespace gpumeter {
namespace {

using namespace std::chrono_literals;

constexpr const char* kPrometheusAccept =
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
    "text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
constexpr const char* kTextType = "text/plain; version=0.0.4; charset=utf-8";
constexpr const char* kOmType = "application/openmetrics-text; version=1.0.0; charset=utf-8";

std::string golden(const char* name) {
  std::ifstream in(std::string(GPUMETER_SOURCE_DIR) + "/tests/golden/" + name, std::ios::binary);
  EXPECT_TRUE(in) << name;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class HttpServerTest : public ::testing::Test {
 protected:
  HttpServerOptions options() {
    HttpServerOptions o;
    o.listen_address = "127.0.0.1:0";
    clock_.set_wall_us(std::llround(testing::kFixtureNowUnix * 1e6));
    o.clock = &clock_;
    o.keep_alive_timeout = 1s;  // lets stop() finish quickly after keep-alive clients
    o.readiness = [this] {
      return ready_.load() ? Readiness{true, ""} : Readiness{false, "backend nvml is down: NVML library not found"};
    };
    return o;
  }

  void start(HttpServerOptions o) {
    server_ = std::make_unique<HttpServer>(store_, std::move(o));
    auto r = server_->start();
    ASSERT_TRUE(r.ok()) << r.error().message;
    ASSERT_GT(server_->port(), 0);
  }
  void SetUp() override { start(options()); }
  void TearDown() override { server_->stop(); }

  void publish_fixture() {
    ASSERT_TRUE(store_.publish(std::make_shared<const Snapshot>(testing::fixture_snapshot())).ok());
  }

  httplib::Client client() {
    httplib::Client c("127.0.0.1", server_->port());
    c.set_decompress(false);  // the tests look at the bytes on the wire
    c.set_read_timeout(5, 0);
    return c;
  }

  httplib::Result get(const std::string& path, httplib::Headers headers = {}) {
    return client().Get(path.c_str(), headers);
  }

  // Sends raw bytes on a fresh connection and returns the first response.
  std::string raw(std::string_view request, bool head = false) {
    testing::RawConnection conn(server_->port());
    EXPECT_TRUE(conn.connected());
    conn.send(request);
    return conn.read_response(head);
  }

  void expect_still_serving() {
    auto r = get("/-/healthy");
    ASSERT_TRUE(r) << httplib::to_string(r.error());
    EXPECT_EQ(r->status, 200);
  }

  ExpositionStore store_;
  std::atomic<bool> ready_{true};
  std::unique_ptr<HttpServer> server_;
  testing::FakeClock clock_;
};

TEST_F(HttpServerTest, MetricsIs503BeforeTheFirstSnapshot) {
  auto r = get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_NE(r->body.find("no metrics snapshot has been collected yet"), std::string::npos) << r->body;
}

TEST_F(HttpServerTest, TextByDefaultMatchesGolden) {
  publish_fixture();
  auto r = get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), kTextType);
  EXPECT_FALSE(r->has_header("Content-Encoding"));
  EXPECT_EQ(r->get_header_value("Content-Length"), std::to_string(r->body.size()));
  EXPECT_EQ(r->body, golden("metrics.txt"));
}

TEST_F(HttpServerTest, OpenMetricsForPrometheusAcceptMatchesGolden) {
  publish_fixture();
  auto r = get("/metrics", {{"Accept", kPrometheusAccept}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), kOmType);
  EXPECT_EQ(r->body, golden("metrics.om.txt"));
  EXPECT_TRUE(r->body.ends_with("# EOF\n"));
}

TEST_F(HttpServerTest, TextWhenOpenMetricsIsNotPreferred) {
  publish_fixture();
  auto r = get("/metrics", {{"Accept", "application/openmetrics-text;q=0.2,text/plain;q=0.9"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->get_header_value("Content-Type"), kTextType);
}

TEST_F(HttpServerTest, GzipOnceForBothFormats) {
  publish_fixture();
  for (auto [accept, file, type] :
       {std::tuple{"", "metrics.txt", kTextType}, std::tuple{kPrometheusAccept, "metrics.om.txt", kOmType}}) {
    httplib::Headers h = {{"Accept-Encoding", "gzip, deflate, br"}};
    if (*accept) h.emplace("Accept", accept);
    auto r = get("/metrics", h);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->get_header_value("Content-Type"), type);
    EXPECT_EQ(r->get_header_value("Content-Encoding"), "gzip");
    EXPECT_NE(r->get_header_value("Vary").find("Accept-Encoding"), std::string::npos);
    EXPECT_EQ(r->get_header_value("Content-Length"), std::to_string(r->body.size()));
    // One inflate must give the exposition itself; a doubly compressed body would give gzip again.
    auto text = testing::gunzip(r->body);
    ASSERT_TRUE(text.ok) << text.error;
    EXPECT_EQ(text.data, golden(file));
  }
}

TEST_F(HttpServerTest, GzipRefusedByQZero) {
  publish_fixture();
  for (const char* enc : {"gzip;q=0", "gzip;q=0, identity", "identity", "br"}) {
    auto r = get("/metrics", {{"Accept-Encoding", enc}});
    ASSERT_TRUE(r);
    EXPECT_FALSE(r->has_header("Content-Encoding")) << enc;
    EXPECT_EQ(r->body, golden("metrics.txt")) << enc;
  }
  // The same rule holds on the other endpoints: httplib's own compression would ignore q=0.
  auto page = get("/", {{"Accept-Encoding", "gzip;q=0"}});
  ASSERT_TRUE(page);
  EXPECT_FALSE(page->has_header("Content-Encoding"));
}

TEST_F(HttpServerTest, SnapshotAgeComesFromTheClockAtScrapeTime) {
  server_->stop();
  start(options());
  publish_fixture();
  clock_.set_wall_us(std::llround((testing::kFixtureTakenUnix + 7.5) * 1e6));
  auto r = get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->body.ends_with("\ngpumeter_snapshot_age_seconds 7.5\n")) << r->body.substr(r->body.size() - 80);
}

TEST_F(HttpServerTest, HeadHasHeadersButNoBody) {
  publish_fixture();
  auto full = get("/metrics", {{"Accept-Encoding", "gzip"}});
  ASSERT_TRUE(full);
  std::string resp =
      raw("HEAD /metrics HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n", true);
  EXPECT_EQ(testing::first_status(resp), 200) << resp;
  EXPECT_NE(resp.find("Content-Length: " + std::to_string(full->body.size()) + "\r\n"), std::string::npos) << resp;
  EXPECT_NE(resp.find("Content-Encoding: gzip\r\n"), std::string::npos);
  EXPECT_TRUE(resp.ends_with("\r\n\r\n")) << "no body after the headers";
  testing::RawConnection conn(server_->port());
  conn.send("HEAD /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_TRUE(conn.read_until_close().ends_with("\r\n\r\n")) << "nothing follows the headers";

  for (const char* path : {"/", "/-/healthy", "/-/ready"}) {
    std::string h = raw(std::string("HEAD ") + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", true);
    EXPECT_EQ(testing::first_status(h), 200) << path;
    EXPECT_TRUE(h.ends_with("\r\n\r\n")) << path;
  }
}

TEST_F(HttpServerTest, LandingPage) {
  auto before = get("/");
  ASSERT_TRUE(before);
  EXPECT_EQ(before->status, 200);
  EXPECT_NE(before->body.find("No snapshot has been collected yet."), std::string::npos);

  publish_fixture();
  auto r = get("/");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_NE(r->body.find("<title>gpumeter</title>"), std::string::npos);
  EXPECT_NE(r->body.find("NVIDIA H100 80GB HBM3"), std::string::npos);
  EXPECT_NE(r->body.find("href=\"/metrics\""), std::string::npos);
  EXPECT_NE(r->body.find("1.2 s ago"), std::string::npos);

  ready_ = false;
  auto not_ready = get("/");
  ASSERT_TRUE(not_ready);
  EXPECT_NE(not_ready->body.find("Not ready: backend nvml is down: NVML library not found"), std::string::npos);
}

TEST_F(HttpServerTest, HealthyAndReady) {
  auto healthy = get("/-/healthy");
  ASSERT_TRUE(healthy);
  EXPECT_EQ(healthy->status, 200);
  EXPECT_EQ(healthy->body, "Healthy\n");

  auto ready = get("/-/ready");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
  EXPECT_EQ(ready->body, "Ready\n");

  ready_ = false;
  auto not_ready = get("/-/ready");
  ASSERT_TRUE(not_ready);
  EXPECT_EQ(not_ready->status, 503);
  EXPECT_EQ(not_ready->body, "Not ready: backend nvml is down: NVML library not found\n");
}

TEST_F(HttpServerTest, DefaultReadinessWaitsForTheFirstSnapshot) {
  server_->stop();
  auto o = options();
  o.readiness = nullptr;
  start(o);
  auto r = get("/-/ready");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_NE(r->body.find("no snapshot"), std::string::npos);
  publish_fixture();
  r = get("/-/ready");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST_F(HttpServerTest, UnknownPathIs404) {
  publish_fixture();
  for (const char* path : {"/nope", "/metrics/", "/Metrics", "/-/", "/metrics.txt", "//metrics"}) {
    auto r = get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 404) << path;
    EXPECT_EQ(r->body, "404 Not Found\n") << path;
  }
  auto with_query = get("/metrics?collect[]=gpu");
  ASSERT_TRUE(with_query);
  EXPECT_EQ(with_query->status, 200) << "the query string does not change the path";
}

TEST_F(HttpServerTest, OtherMethodsAre405OnKnownPaths) {
  publish_fixture();
  for (const char* method : {"POST", "PUT", "PATCH", "DELETE", "OPTIONS"}) {
    for (const char* path : {"/metrics", "/", "/-/ready"}) {
      std::string resp = raw(std::string(method) + " " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
      EXPECT_EQ(testing::first_status(resp), 405) << method << " " << path << "\n" << resp;
      EXPECT_NE(resp.find("Allow: GET, HEAD\r\n"), std::string::npos) << method;
    }
    std::string unknown = raw(std::string(method) + " /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    EXPECT_EQ(testing::first_status(unknown), 404) << method;
  }
}

TEST_F(HttpServerTest, RequestBodyIsConsumedBefore405SoTheConnectionStaysUsable) {
  testing::RawConnection conn(server_->port());
  conn.send("POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello");
  std::string first = conn.read_response();
  EXPECT_EQ(testing::first_status(first), 405) << first;
  // Had the body been left unread, this request line would arrive as "helloGET ..." and fail.
  conn.send("GET /-/healthy HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  std::string second = conn.read_until_close();
  EXPECT_EQ(testing::first_status(second), 200) << second;
  EXPECT_TRUE(second.ends_with("Healthy\n"));
}

TEST_F(HttpServerTest, MalformedRequestsGet4xxAndTheServerKeepsServing) {
  publish_fixture();
  struct Case {
    const char* name;
    std::string bytes;
    int status;
  };
  const std::vector<Case> cases = {
      {"garbage bytes", std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\xff\xfe\r\n\r\n", 17), 400},
      {"binary line", std::string("\x00\x01\x02\x03\xff\r\n\r\n", 9), 400},
      {"request line without target", "GET\r\n\r\n", 400},
      {"request line with extra field", "GET /metrics HTTP/1.1 extra\r\nHost: x\r\n\r\n", 400},
      {"unsupported version", "GET /metrics HTTP/2.0\r\nHost: x\r\n\r\n", 400},
      {"lowercase method", "get /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 400},
      {"unknown method", "BREW /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 400},
      {"CONNECT", "CONNECT example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n", 400},
      {"invalid percent-encoding", "GET /metrics%zz HTTP/1.1\r\nHost: x\r\n\r\n", 400},
      {"truncated percent-encoding", "GET /metrics% HTTP/1.1\r\nHost: x\r\n\r\n", 400},
      {"encoded NUL", "GET /metrics%00 HTTP/1.1\r\nHost: x\r\n\r\n", 400},
      {"absolute-form target", "GET http://x/metrics HTTP/1.1\r\nHost: x\r\n\r\n", 400},
      {"raw control byte in target", "GET /met\x01rics HTTP/1.1\r\nHost: x\r\n\r\n", 400},
      {"oversized header", "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(17000, 'a') + "\r\n\r\n", 431},
      {"too many header lines",
       "GET /metrics HTTP/1.1\r\nHost: x\r\n" +
           [] {
             std::string lines;
             for (int i = 0; i < 2000; ++i) lines += "X-" + std::to_string(i) + ": a\r\n";
             return lines;
           }() +
           "\r\n",
       431},
      {"HTTP/1.0 with an unknown minor", "GET /metrics HTTP/1.2\r\nHost: x\r\n\r\n", 400},
      {"oversized request target", "GET /" + std::string(9000, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n", 414},
      {"chunked body", "POST /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
       400},
      {"body over the payload limit",
       "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n" + std::string(100000, 'b'), 413},
  };
  for (const Case& c : cases) {
    std::string resp = raw(c.bytes);
    EXPECT_EQ(testing::first_status(resp), c.status) << c.name << "\n" << resp.substr(0, 200);
    expect_still_serving();
  }
}

TEST_F(HttpServerTest, HeaderJustUnderTheLimitIsServed) {
  publish_fixture();
  // The 16384-byte limit applies to the request line and every header line together.
  std::string resp = raw("GET /-/healthy HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(8000, 'a') +
                         "\r\nX-Big2: " + std::string(8000, 'b') + "\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(testing::first_status(resp), 200) << resp.substr(0, 200);
  EXPECT_EQ(testing::first_status(
                raw("GET /-/healthy HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(16384, 'a') + "\r\n\r\n")),
            431);
}

TEST_F(HttpServerTest, RangeIsIgnored) {
  publish_fixture();
  std::string resp = raw("GET /metrics HTTP/1.1\r\nHost: x\r\nRange: bytes=0-3\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(testing::first_status(resp), 200) << resp.substr(0, 200);
}

TEST_F(HttpServerTest, KeepAliveServesSeveralScrapesOnOneConnectionWithoutNagleDelay) {
  publish_fixture();
  httplib::Client c("127.0.0.1", server_->port());
  c.set_keep_alive(true);
  c.set_decompress(false);
  std::vector<double> ms;
  for (int i = 0; i < 21; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    auto r = c.Get("/metrics", {{"Accept-Encoding", "gzip"}});
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200);
  }
  // With Nagle's algorithm the trailer write waits for the delayed ACK: about 40 ms on every request.
  // The fastest of 21 is compared, not a percentile: machine noise only adds time, so this fails only
  // when every request paid the delay, not when a busy machine slows some of them.
  EXPECT_LT(*std::min_element(ms.begin(), ms.end()), 20.0) << "fastest scrape latency in ms";
}

TEST_F(HttpServerTest, CustomTelemetryPath) {
  server_->stop();
  auto o = options();
  o.telemetry_path = "/gpu/metrics";
  start(o);
  publish_fixture();
  auto r = get("/gpu/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, golden("metrics.txt"));
  auto old = get("/metrics");
  ASSERT_TRUE(old);
  EXPECT_EQ(old->status, 404);
  auto page = get("/");
  ASSERT_TRUE(page);
  EXPECT_NE(page->body.find("href=\"/gpu/metrics\""), std::string::npos);
}

TEST_F(HttpServerTest, ScrapesStayConsistentWhileSnapshotsArePublished) {
  // Each snapshot carries its number in the build version; every scrape must be exactly the
  // rendering of one of them, whichever was current when the scrape started.
  auto snapshot = [](int n) {
    Snapshot s = testing::fixture_snapshot();
    s.build.version = "v" + std::to_string(n);
    auto r = std::make_shared<DeviceReading>(*s.gpus[0].reading);
    r->device.power_watts = 100 + n;
    s.gpus[0].reading = r;
    return std::make_shared<const Snapshot>(std::move(s));
  };
  auto expected = [&](int n, ExpositionFormat f) {
    auto p = prepare_exposition(build_families(*snapshot(n)), testing::kFixtureTakenUnix);
    return make_scrape_body(*p, f, false, testing::kFixtureNowUnix).flatten();
  };
  ASSERT_TRUE(store_.publish(snapshot(0)).ok());

  std::atomic<bool> stop{false};
  std::atomic<int> published{0};
  std::thread publisher([&] {
    for (int n = 1; !stop.load() && n < 100000; ++n) {
      ASSERT_TRUE(store_.publish(snapshot(n)).ok());
      published = n;
      std::this_thread::sleep_for(200us);
    }
  });
  std::atomic<int> checked{0};
  std::vector<std::thread> scrapers;
  for (int t = 0; t < 6; ++t) {
    scrapers.emplace_back([&, t] {
      httplib::Client c("127.0.0.1", server_->port());
      c.set_decompress(false);
      c.set_keep_alive(t % 2 == 0);
      for (int i = 0; i < 40; ++i) {
        const bool om = (i + t) % 2 == 0, gz = (i + t) % 3 == 0;
        httplib::Headers h;
        if (om) h.emplace("Accept", kPrometheusAccept);
        if (gz) h.emplace("Accept-Encoding", "gzip");
        auto r = c.Get("/metrics", h);
        ASSERT_TRUE(r) << httplib::to_string(r.error());
        ASSERT_EQ(r->status, 200);
        std::string body = r->body;
        if (gz) {
          auto inflated = testing::gunzip(body);
          ASSERT_TRUE(inflated.ok) << inflated.error;
          body = inflated.data;
        }
        constexpr std::string_view kMarker = "gpumeter_build_info{version=\"v";
        const size_t at = body.find(kMarker);
        ASSERT_NE(at, std::string::npos);
        int n = -1;
        std::from_chars(body.data() + at + kMarker.size(), body.data() + body.size(), n);
        ASSERT_EQ(body, expected(n, om ? ExpositionFormat::kOpenMetrics100 : ExpositionFormat::kText004));
        ++checked;
      }
    });
  }
  for (auto& s : scrapers) s.join();
  stop = true;
  publisher.join();
  EXPECT_EQ(checked.load(), 240);
  EXPECT_GT(published.load(), 1) << "snapshots must actually change during the scrapes";
}

TEST_F(HttpServerTest, MoreClientsThanConnectionsAreAllServed) {
  server_->stop();
  auto o = options();
  o.max_threads = 2;
  o.max_connections = 4;
  start(o);
  publish_fixture();
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 12; ++t) {
    clients.emplace_back([&] {
      auto r = get("/metrics");
      if (r && r->status == 200 && r->body == golden("metrics.txt")) ++ok;
    });
  }
  for (auto& c : clients) c.join();
  EXPECT_EQ(ok.load(), 12);
}

TEST(HttpServerLifecycle, StopRightAfterStartAndTwice) {
  ExpositionStore store;
  for (int i = 0; i < 20; ++i) {
    HttpServerOptions o;
    o.listen_address = "127.0.0.1:0";
    HttpServer s(store, o);
    ASSERT_TRUE(s.start().ok());
    s.stop();
    s.stop();
  }
}

TEST(HttpServerLifecycle, StopFromAnotherThread) {
  ExpositionStore store;
  HttpServerOptions o;
  o.listen_address = "127.0.0.1:0";
  HttpServer s(store, o);
  ASSERT_TRUE(s.start().ok());
  std::thread([&] { s.stop(); }).join();
  testing::RawConnection conn(s.port());
  EXPECT_FALSE(conn.connected()) << "nothing listens after stop()";
}

TEST(HttpServerLifecycle, StartTwiceFails) {
  ExpositionStore store;
  HttpServerOptions o;
  o.listen_address = "127.0.0.1:0";
  HttpServer s(store, o);
  ASSERT_TRUE(s.start().ok());
  auto again = s.start();
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.error().message.find("already started"), std::string::npos);
}

TEST(HttpServerLifecycle, PortInUseIsReportedAtStart) {
  ExpositionStore store;
  HttpServerOptions o;
  o.listen_address = "127.0.0.1:0";
  HttpServer first(store, o);
  ASSERT_TRUE(first.start().ok());
  o.listen_address = "127.0.0.1:" + std::to_string(first.port());
  HttpServer second(store, o);
  auto r = second.start();
  ASSERT_FALSE(r.ok()) << "SO_REUSEPORT would let two agents share the port";
  EXPECT_NE(r.error().message.find("cannot listen on 127.0.0.1:" + std::to_string(first.port())), std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find("in use"), std::string::npos) << r.error().message;
}

TEST(HttpServerLifecycle, InvalidOptionsAreRejected) {
  ExpositionStore store;
  struct Case {
    std::string listen, path, reason;
  };
  for (const Case& c : {Case{"127.0.0.1", "/metrics", "missing port"}, Case{"127.0.0.1:0", "metrics", "start with '/'"},
                        Case{"127.0.0.1:0", "/me trics", "not allowed"}, Case{"127.0.0.1:0", "/-/ready", "collides"},
                        Case{"127.0.0.1:0", "/", "collides"}, Case{"999.0.0.1:0", "/metrics", "cannot listen"}}) {
    HttpServerOptions o;
    o.listen_address = c.listen;
    o.telemetry_path = c.path;
    HttpServer s(store, o);
    auto r = s.start();
    ASSERT_FALSE(r.ok()) << c.listen << " " << c.path;
    EXPECT_NE(r.error().message.find(c.reason), std::string::npos) << r.error().message;
  }
}

TEST(HttpServerLifecycle, AllInterfacesServesIpv4AndIpv6Loopback) {
  ExpositionStore store;
  HttpServerOptions o;
  o.listen_address = ":0";
  HttpServer s(store, o);
  ASSERT_TRUE(s.start().ok());
  for (const char* host : {"127.0.0.1", "::1"}) {
    httplib::Client c(host, s.port());
    auto r = c.Get("/-/healthy");
    ASSERT_TRUE(r) << host << ": " << httplib::to_string(r.error());
    EXPECT_EQ(r->status, 200) << host;
  }
}

TEST(HttpServerLifecycle, Ipv6Address) {
  ExpositionStore store;
  HttpServerOptions o;
  o.listen_address = "[::1]:0";
  HttpServer s(store, o);
  ASSERT_TRUE(s.start().ok());
  httplib::Client c("::1", s.port());
  auto r = c.Get("/-/healthy");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);
  testing::RawConnection v4(s.port());
  EXPECT_FALSE(v4.connected()) << "[::1] must not listen on IPv4";
}

}  // namespace
}  // namespace gpumeter
