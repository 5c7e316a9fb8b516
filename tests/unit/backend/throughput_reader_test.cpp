// The throughput reader both backends read their blocking PCIe throughput calls with: one round
// over the GPUs served per min_round on the fake clock, the last rates served, a GPU that cannot
// measure not asked again, a paused GPU neither read nor served, and serve() never waiting for a
// read in progress.
#include "backend/throughput_reader.h"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "fake_clock.h"

namespace gpumeter {
namespace {

using namespace std::chrono_literals;

class ThroughputReaderTest : public ::testing::Test {
 protected:
  // GPU i's n-th read answers (n × 100, n × 200) B/s; GPU 2 cannot measure.
  std::unique_ptr<ThroughputReader> make() {
    return std::make_unique<ThroughputReader>(ThroughputReaderOptions{.devices = 3, .min_round = 1s, .clock = &clock_},
                                              [this](unsigned d) {
                                                const int n = ++reads_[d];
                                                ThroughputRead r;
                                                if (d == 2) {
                                                  r.unsupported = true;
                                                } else {
                                                  r.rates = {n * 100.0, n * 200.0};
                                                }
                                                return r;
                                              });
  }
  // The reader's thread has read what was due and waits for the next round.
  void settle() { ASSERT_TRUE(clock_.settle(1)); }
  int reads(unsigned d) const { return reads_[d].load(); }
  // Waits (in real time, a generous limit only against a hang) until GPU `d` was read `n` times.
  bool read_times(unsigned d, int n) const {
    const auto limit = std::chrono::steady_clock::now() + 10s;
    while (reads(d) < n && std::chrono::steady_clock::now() < limit) std::this_thread::sleep_for(1ms);
    return reads(d) == n;
  }

  testing::FakeClock clock_;
  std::array<std::atomic<int>, 3> reads_{};
};

TEST_F(ThroughputReaderTest, ReadsTheServedGpusOnceARoundAndServesTheLastRates) {
  auto reader = make();
  EXPECT_EQ(reader->serve(0), ThroughputRates{});  // nothing read yet: the thread starts now
  settle();
  EXPECT_EQ(reads(0), 1);
  EXPECT_EQ(reads(1), 0);  // never served, never read
  EXPECT_EQ(reader->serve(0), (ThroughputRates{100.0, 200.0}));
  EXPECT_EQ(reader->serve(0), (ThroughputRates{100.0, 200.0}));  // serving reads nothing
  EXPECT_EQ(reads(0), 1);

  reader->serve(1);  // joins from the next round
  clock_.advance(999ms);
  EXPECT_EQ(reads(1), 0);
  clock_.advance(1ms);
  settle();
  EXPECT_EQ(reads(0), 2);
  EXPECT_EQ(reads(1), 1);
  EXPECT_EQ(reader->serve(0), (ThroughputRates{200.0, 400.0}));
  EXPECT_EQ(reader->serve(1), (ThroughputRates{100.0, 200.0}));
}

TEST_F(ThroughputReaderTest, AGpuThatCannotMeasureIsAskedOnce) {
  auto reader = make();
  reader->serve(2);
  settle();
  for (int round = 0; round < 3; ++round) {
    clock_.advance(1s);
    settle();
  }
  EXPECT_EQ(reads(2), 1);
  EXPECT_EQ(reader->serve(2), ThroughputRates{});
}

TEST_F(ThroughputReaderTest, APausedGpuIsNeitherReadNorServedUntilServedAgain) {
  auto reader = make();
  reader->serve(0);
  settle();
  ASSERT_EQ(reads(0), 1);
  reader->pause(0);
  clock_.advance(1s);
  settle();
  clock_.advance(1s);
  settle();
  EXPECT_EQ(reads(0), 1);
  // Served again: its old rates are gone, and it is read without the clock moving (the thread
  // was idle, waiting for a GPU to read).
  EXPECT_EQ(reader->serve(0), ThroughputRates{});
  ASSERT_TRUE(read_times(0, 2));
  settle();
  EXPECT_EQ(reader->serve(0), (ThroughputRates{200.0, 400.0}));
}

TEST_F(ThroughputReaderTest, ServeDoesNotWaitForAReadInProgress) {
  std::promise<void> entered, release;
  auto released = release.get_future().share();
  std::atomic<bool> first{true};
  ThroughputReader reader(ThroughputReaderOptions{.devices = 1, .min_round = 1s, .clock = &clock_}, [&](unsigned) {
    if (first.exchange(false)) entered.set_value();
    released.wait();  // a driver call that measures for as long as the test likes
    return ThroughputRead{.rates = {1.0, 2.0}};
  });
  reader.serve(0);
  entered.get_future().wait();
  // A collection serving the GPU while its read blocks gets the last rates (none yet) at once.
  auto served = std::async(std::launch::async, [&] { return reader.serve(0); });
  ASSERT_EQ(served.wait_for(10s), std::future_status::ready) << "serve() waited for the blocked read";
  EXPECT_EQ(served.get(), ThroughputRates{});
  release.set_value();
  settle();
  EXPECT_EQ(reader.serve(0), (ThroughputRates{1.0, 2.0}));
}

}  // namespace
}  // namespace gpumeter
