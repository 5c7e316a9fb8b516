#include "http/bounded_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>

namespace gpumeter {
namespace {

using namespace std::chrono_literals;

TEST(BoundedPool, RunsEveryJobOnAtMostNThreads) {
  std::atomic<int> running{0}, peak{0}, done{0};
  {
    BoundedPool pool(3, 100);
    for (int i = 0; i < 50; ++i) {
      pool.enqueue([&] {
        int now = ++running;
        int p = peak.load();
        while (now > p && !peak.compare_exchange_weak(p, now)) {
        }
        std::this_thread::sleep_for(1ms);
        --running;
        ++done;
      });
    }
    pool.shutdown();
  }
  EXPECT_EQ(done.load(), 50);
  EXPECT_LE(peak.load(), 3);
  EXPECT_GE(peak.load(), 2);
}

TEST(BoundedPool, EnqueueBlocksWhenPendingQueueIsFull) {
  BoundedPool pool(1, 1);
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::atomic<int> started{0};
  pool.enqueue([&, gate] {  // occupies the only worker
    ++started;
    gate.wait();
  });
  while (started.load() == 0) std::this_thread::sleep_for(1ms);
  pool.enqueue([] {});  // fills the one pending slot
  auto third = std::async(std::launch::async, [&] { pool.enqueue([] {}); });
  EXPECT_EQ(third.wait_for(100ms), std::future_status::timeout) << "enqueue must wait for room";
  release.set_value();
  EXPECT_EQ(third.wait_for(5s), std::future_status::ready);
  pool.shutdown();
}

TEST(BoundedPool, ShutdownIsIdempotentAndLaterJobsStillRun) {
  BoundedPool pool(2, 4);
  pool.shutdown();
  pool.shutdown();
  bool ran = false;
  pool.enqueue([&] { ran = true; });  // must not be dropped: it owns a socket that needs closing
  EXPECT_TRUE(ran);
}

}  // namespace
}  // namespace gpumeter
