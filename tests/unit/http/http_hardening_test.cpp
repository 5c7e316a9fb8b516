// What one unauthenticated client must not be able to do to the server: grow it without bound, hold
// its threads, or keep other clients waiting. Each test failed on the cpp-httplib server.

#include <gtest/gtest.h>

#include <poll.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "../render/fixture_snapshot.h"
#include "fake_clock.h"
#include "http/http_server.h"
#include "raw_http.h"
#include "test_certs.h"

namespace gpumeter {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr const char* kScrape = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

class HttpHardeningTest : public ::testing::Test {
 protected:
  HttpServerOptions options() {
    HttpServerOptions o;
    o.listen_address = "127.0.0.1:0";
    clock_.set_wall_us(std::llround(testing::kFixtureNowUnix * 1e6));
    o.clock = &clock_;
    return o;
  }
  void start(HttpServerOptions o) {
    ASSERT_TRUE(store_.publish(std::make_shared<const Snapshot>(testing::fixture_snapshot())).ok());
    server_ = std::make_unique<HttpServer>(store_, std::move(o));
    auto r = server_->start();
    ASSERT_TRUE(r.ok()) << r.error().message;
  }
  void TearDown() override {
    if (server_) server_->stop();
  }
  std::string raw(std::string_view bytes) {
    testing::RawConnection c(server_->port());
    EXPECT_TRUE(c.connected());
    c.send(bytes);
    return c.read_response();
  }
  // The status of a scrape on a fresh connection, and how long it took.
  std::pair<int, Clock::duration> timed_scrape(std::string_view request = kScrape) {
    const auto t0 = Clock::now();
    const int status = testing::first_status(raw(request));
    return {status, Clock::now() - t0};
  }

  ExpositionStore store_;
  std::unique_ptr<HttpServer> server_;
  testing::FakeClock clock_;
};

// True when the server closed `fd`'s connection within `within`.
bool closed_within(int fd, std::chrono::milliseconds within) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(within.count())) <= 0) return false;
  char c;
  return ::recv(fd, &c, 1, MSG_DONTWAIT) <= 0;
}

int connect_to(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

TEST_F(HttpHardeningTest, EndlessHeaderLinesGet431) {
  start(options());
  testing::RawConnection c(server_->port());
  ASSERT_TRUE(c.connected());
  // Lines far under any per-line limit, never ending: the old server read them all into memory.
  c.send("GET /metrics HTTP/1.1\r\nHost: x\r\n");
  const std::string line = "X-Filler: " + std::string(90, 'a') + "\r\n";
  std::string block;
  for (int i = 0; i < 100; ++i) block += line;
  for (int i = 0; i < 100 && c.send(block); ++i) {
  }
  const std::string resp = c.read_response();
  EXPECT_EQ(testing::first_status(resp), 431) << resp.substr(0, 200);
  EXPECT_EQ(timed_scrape().first, 200);
}

TEST_F(HttpHardeningTest, WholeRequestDeadlineIsNotRenewedByEachByte) {
  auto o = options();
  o.read_timeout = 1s;
  start(o);
  const int fd = connect_to(server_->port());
  ASSERT_GE(fd, 0);
  const std::string request = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " + std::string(100, 'a');
  const auto t0 = Clock::now();
  bool closed = false;
  // One byte every 100 ms would keep a per-read timeout alive for 10 s.
  for (char ch : request) {
    if (::send(fd, &ch, 1, MSG_NOSIGNAL) != 1 || closed_within(fd, 100ms)) {
      closed = true;
      break;
    }
  }
  const auto took = Clock::now() - t0;
  ::close(fd);
  EXPECT_TRUE(closed) << "a slow request must be cut off at its deadline";
  EXPECT_LT(took, 5s) << "the deadline is 1 s for the whole request";
}

TEST_F(HttpHardeningTest, IdleConnectionsHoldNoWorker) {
  auto o = options();
  o.max_threads = 2;
  o.keep_alive_timeout = 30s;
  o.read_timeout = 30s;
  start(o);
  std::vector<int> idle;
  for (int i = 0; i < 200; ++i) idle.push_back(connect_to(server_->port()));
  // Half of them idle after a request, half before their first.
  for (size_t i = 0; i < idle.size(); i += 2) {
    const std::string req = "GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n";
    ::send(idle[i], req.data(), req.size(), MSG_NOSIGNAL);
  }
  std::this_thread::sleep_for(200ms);
  auto [status, took] = timed_scrape();
  EXPECT_EQ(status, 200);
  EXPECT_LT(took, 2s) << "200 idle connections must not keep a scrape waiting";
  for (int fd : idle) ::close(fd);
}

TEST_F(HttpHardeningTest, ConnectionLimitClosesTheOldestIdleFirst) {
  auto o = options();
  o.max_connections = 4;
  o.keep_alive_timeout = 30s;
  start(o);
  std::vector<int> fds;
  for (int i = 0; i < 4; ++i) {
    fds.push_back(connect_to(server_->port()));
    std::this_thread::sleep_for(20ms);  // a definite order of arrival
  }
  EXPECT_EQ(timed_scrape().first, 200);
  EXPECT_TRUE(closed_within(fds[0], 2000ms)) << "the oldest idle connection makes room";
  EXPECT_FALSE(closed_within(fds[3], 200ms)) << "the newest stays open";
  for (int fd : fds) ::close(fd);
}

// A burst of clients larger than the limit: connections accepted a moment ago, whose requests are
// on their way, are not closed to make room for the next; the newcomer waits in the backlog.
TEST_F(HttpHardeningTest, AtTheLimitNewConnectionsAreNotClosedForNewerOnes) {
  auto o = options();
  o.max_connections = 4;
  start(o);
  std::vector<int> fds;
  for (int i = 0; i < 4; ++i) fds.push_back(connect_to(server_->port()));
  std::atomic<int> late_status{0};
  std::thread late([&] { late_status = timed_scrape().first; });
  std::this_thread::sleep_for(20ms);  // the newcomer has arrived, within the others' grace (100 ms)
  for (int fd : fds) {
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::send(fd, kScrape, std::strlen(kScrape), MSG_NOSIGNAL), static_cast<ssize_t>(std::strlen(kScrape)));
  }
  for (int fd : fds) {
    std::string got;
    char buf[4096];
    for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) got.append(buf, static_cast<size_t>(n));
    EXPECT_EQ(testing::first_status(got), 200) << "an early client was closed for a later one";
    ::close(fd);
  }
  late.join();
  EXPECT_EQ(late_status.load(), 200) << "the newcomer is served once a place is free";
}

TEST_F(HttpHardeningTest, SaturatedHandlersAnswer503AtOnce) {
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::atomic<int> entered{0};
  auto o = options();
  o.max_threads = 1;
  o.readiness = [&] {
    ++entered;
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return release; });
    return Readiness{true, ""};
  };
  start(o);
  std::string first;
  std::thread blocked([&] { first = raw("GET /-/ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); });
  while (entered.load() == 0) std::this_thread::sleep_for(5ms);
  auto [status, took] = timed_scrape("GET /-/ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(status, 503);
  EXPECT_LT(took, 2s);
  EXPECT_EQ(timed_scrape().first, 200) << "scrapes do not wait for the busy handler";
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  blocked.join();
  EXPECT_EQ(testing::first_status(first), 200);
}

TEST_F(HttpHardeningTest, PipelinedRequestsAreAnsweredInOrder) {
  start(options());
  testing::RawConnection c(server_->port());
  ASSERT_TRUE(c.connected());
  c.send(
      "GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n"
      "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n"
      "HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
      "GET /-/ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  const std::string all = c.read_until_close();
  std::vector<int> statuses;
  for (size_t at = all.find("HTTP/1.1 "); at != std::string::npos; at = all.find("HTTP/1.1 ", at + 1)) {
    statuses.push_back(testing::first_status(std::string_view(all).substr(at)));
  }
  EXPECT_EQ(statuses, (std::vector<int>{200, 404, 200, 200})) << all.substr(0, 400);
  EXPECT_NE(all.find("Healthy\n"), std::string::npos);
  EXPECT_TRUE(all.ends_with("Ready\n"));
}

TEST_F(HttpHardeningTest, TheLastResponseOnAConnectionAnnouncesTheClose) {
  auto o = options();
  o.keep_alive_max_count = 3;
  start(o);
  testing::RawConnection c(server_->port());
  ASSERT_TRUE(c.connected());
  const std::string req = "GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n";
  c.send(req + req + req + req);
  const std::string all = c.read_until_close();
  size_t responses = 0;
  for (size_t at = all.find("HTTP/1.1 200"); at != std::string::npos; at = all.find("HTTP/1.1 200", at + 1)) {
    ++responses;
  }
  EXPECT_EQ(responses, 3u) << all;
  const size_t close = all.find("Connection: close");
  EXPECT_NE(close, std::string::npos);
  EXPECT_GT(close, all.rfind("HTTP/1.1 200")) << "only the third response says close";
}

TEST_F(HttpHardeningTest, WrongPasswordsDoNotQueueScrapes) {
  auto web = std::make_shared<WebConfig>();
  web->basic_auth_users = {{"alice", testing::bcrypt_hash("secret", "$2b$", 12)}};
  auto o = options();
  o.web_config = web;
  o.max_concurrent_bcrypt = 1;
  start(o);
  const std::string good =
      "GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Basic YWxpY2U6c2VjcmV0\r\n"
      "Connection: close\r\n\r\n";
  ASSERT_EQ(timed_scrape(good).first, 200);  // the first success pays bcrypt once, then is cached
  std::atomic<bool> stop{false};
  std::atomic<int> refused{0}, denied{0};
  std::vector<std::thread> guessers;
  for (int i = 0; i < 8; ++i) {
    guessers.emplace_back([&] {
      while (!stop) {
        const int s = timed_scrape(
                          "GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Basic YWxpY2U6d3Jvbmc=\r\n"
                          "Connection: close\r\n\r\n")
                          .first;
        if (s == 429) ++refused;
        if (s == 401) ++denied;
      }
    });
  }
  std::this_thread::sleep_for(300ms);
  for (int i = 0; i < 5; ++i) {
    auto [status, took] = timed_scrape(good);
    EXPECT_EQ(status, 200);
    EXPECT_LT(took, 2s);
  }
  stop = true;
  for (auto& t : guessers) t.join();
  EXPECT_GT(denied.load(), 0);
  EXPECT_GT(refused.load(), 0) << "guesses beyond the bcrypt limit are refused, not queued";
}

}  // namespace
}  // namespace gpumeter
