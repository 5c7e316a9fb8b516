// Per-process utilization through the built library: nvmlDeviceGetProcessUtilization and
// nvmlDeviceGetProcessesUtilizationInfo, their size-query protocols, the per-process sample
// grid, and how closely a caller that pages with lastSeenTimeStamp recovers each job's busy
// seconds.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <vector>

#include "nvml_sim_fixture.h"
#include "sim/physics/process_utilization.h"
#include "sim/truth/truth.h"
#include "test_support.h"

namespace gpumeter::sim {
namespace {

// GPU 0: "a" at 50%. GPU 1: "b" 30% and "c" 20%, time-sliced. GPU 2: "idle" present at 0%.
// GPU 3: "gone" ran at 40% on [0, 2 s).
const std::string kScenario = std::string(testing::kModel) + R"(
gpus: {count: 4, model: m}
jobs:
  - {name: a, gpus: [0], pid: 4242, utilization: 0.5}
  - {name: b, gpus: [1], pid: 5001, utilization: 0.3}
  - {name: c, gpus: [1], pid: 5002, utilization: 0.2}
  - {name: idle, gpus: [2], pid: 6001, utilization: 0}
  - {name: gone, gpus: [3], pid: 7001, end: 2, utilization: 0.4}
)";

constexpr Micros kPeriod = 200'000;

class ProcessUtil : public NvmlSim {};

TEST_F(ProcessUtil, OneRecordPerProcessOnItsOwnGrid) {
  // 100x slower than real time: the clock barely moves while the test runs.
  ASSERT_EQ(start(kScenario, 10.1, 0.01), NVML_SUCCESS);
  const std::int64_t epoch_us = epoch_ns_ / 1000;
  nvmlDevice_t h1 = handle(1);

  // The size query answers the driver's fixed capacity, whatever is running.
  unsigned n = 0;
  ASSERT_EQ(api().process_util(h1, nullptr, &n, 0), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(n, 100u);
  n = 0;
  ASSERT_EQ(api().process_util(handle(2), nullptr, &n, 0), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(n, 100u);

  std::vector<nvmlProcessUtilizationSample_t> ps(100);
  n = 1;
  ASSERT_EQ(api().process_util(h1, ps.data(), &n, 0), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(n, 2u);
  n = 100;
  ASSERT_EQ(api().process_util(h1, ps.data(), &n, 0), NVML_SUCCESS);
  ASSERT_EQ(n, 2u);
  const Micros now = scenario_now();
  EXPECT_EQ(ps[0].pid, 5001u);
  EXPECT_EQ(ps[0].smUtil, 30u);
  EXPECT_EQ(ps[0].memUtil, 18u);  // memory utilization 30% split 30:20
  EXPECT_EQ(ps[1].pid, 5002u);
  EXPECT_EQ(ps[1].smUtil, 20u);
  EXPECT_EQ(ps[1].memUtil, 12u);
  for (unsigned i = 0; i < 2; ++i) {
    const Micros t = static_cast<Micros>(ps[i].timeStamp) - epoch_us;
    EXPECT_LE(t, now);
    EXPECT_GT(t, now - kPeriod - 1000);
    EXPECT_EQ((t - process_phase(ps[i].pid, kPeriod)) % kPeriod, 0) << "on the process's own grid";
    EXPECT_EQ(ps[i].encUtil + ps[i].decUtil, 0u);
  }
  EXPECT_NE(ps[0].timeStamp % kPeriod, ps[1].timeStamp % kPeriod);

  // Passing the newest timestamp seen: nothing newer until a process's next sample.
  const unsigned long long newest = std::max(ps[0].timeStamp, ps[1].timeStamp);
  n = 100;
  EXPECT_EQ(api().process_util(h1, ps.data(), &n, newest), NVML_ERROR_NOT_FOUND);
  EXPECT_EQ(n, 0u);
  // A timestamp ahead of the clock finds nothing either.
  n = 100;
  EXPECT_EQ(api().process_util(h1, ps.data(), &n, newest + 3'600'000'000ULL), NVML_ERROR_NOT_FOUND);

  // A process present at 0% never ran: no record.
  n = 100;
  EXPECT_EQ(api().process_util(handle(2), ps.data(), &n, 0), NVML_ERROR_NOT_FOUND);
  EXPECT_EQ(n, 0u);
  // A process that ended 8 s ago is still in the 20 s history. It was sampled only while it ran:
  // its record is stamped with its last sample before its end, and averages over the window.
  n = 100;
  ASSERT_EQ(api().process_util(handle(3), ps.data(), &n, 0), NVML_SUCCESS);
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(ps[0].pid, 7001u);
  const auto gone_at = static_cast<Micros>(ps[0].timeStamp) - epoch_us;
  EXPECT_LT(gone_at, 2 * kMicrosPerSecond);
  EXPECT_GE(gone_at, 2 * kMicrosPerSecond - kPeriod);
  EXPECT_EQ(ps[0].smUtil, 40u);
  EXPECT_EQ(api().process_util(h1, ps.data(), nullptr, 0), NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(ProcessUtil, HistoryIsBoundedByTheUtilizationBuffer) {
  ASSERT_EQ(start(kScenario, 30, 0.01), NVML_SUCCESS);
  std::vector<nvmlProcessUtilizationSample_t> ps(100);
  unsigned n = 100;
  // "gone" ended at 2 s, before the 20 s the buffer covers.
  EXPECT_EQ(api().process_util(handle(3), ps.data(), &n, 0), NVML_ERROR_NOT_FOUND);
  n = 100;
  ASSERT_EQ(api().process_util(handle(0), ps.data(), &n, 0), NVML_SUCCESS);
  EXPECT_EQ(n, 1u);
  EXPECT_EQ(ps[0].smUtil, 50u);
}

TEST_F(ProcessUtil, ProcessesUtilizationInfoReportsTheSameRecords) {
  ASSERT_EQ(start(kScenario, 10.1, 0.01), NVML_SUCCESS);
  nvmlDevice_t h1 = handle(1);
  nvmlProcessesUtilizationInfo_t info{};
  info.version = 1;  // the bare number: refused
  EXPECT_EQ(api().processes_util_info(h1, &info), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
  info.version = nvmlProcessesUtilizationInfo_v1;
  ASSERT_EQ(api().processes_util_info(h1, &info), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(info.processSamplesCount, 2u);
  std::vector<nvmlProcessUtilizationInfo_v1_t> arr(2);
  for (auto& a : arr) a.encUtil = a.decUtil = a.jpgUtil = a.ofaUtil = 77;
  info.procUtilArray = arr.data();
  info.processSamplesCount = 1;
  ASSERT_EQ(api().processes_util_info(h1, &info), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(info.processSamplesCount, 2u);
  ASSERT_EQ(api().processes_util_info(h1, &info), NVML_SUCCESS);
  ASSERT_EQ(info.processSamplesCount, 2u);

  std::vector<nvmlProcessUtilizationSample_t> ps(100);
  unsigned n = 100;
  ASSERT_EQ(api().process_util(h1, ps.data(), &n, 0), NVML_SUCCESS);
  ASSERT_EQ(n, 2u);
  for (unsigned i = 0; i < 2; ++i) {
    EXPECT_EQ(arr[i].pid, ps[i].pid);
    EXPECT_EQ(arr[i].timeStamp, ps[i].timeStamp);
    EXPECT_EQ(arr[i].smUtil, ps[i].smUtil);
    EXPECT_EQ(arr[i].memUtil, ps[i].memUtil);
    EXPECT_EQ(arr[i].encUtil + arr[i].decUtil + arr[i].jpgUtil + arr[i].ofaUtil, 0u);
  }
  info.lastSeenTimeStamp = std::max(arr[0].timeStamp, arr[1].timeStamp);
  info.processSamplesCount = 2;
  EXPECT_EQ(api().processes_util_info(h1, &info), NVML_ERROR_NOT_FOUND);
  EXPECT_EQ(info.processSamplesCount, 0u);
  EXPECT_EQ(api().processes_util_info(h1, nullptr), NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(ProcessUtil, ProcessesUtilizationInfoNeedsR550) {
  std::string yaml = kScenario;
  yaml.insert(0, "driver_version: \"535.183.01\"\n");
  ASSERT_EQ(start(yaml, 10.1, 0.01), NVML_SUCCESS);
  nvmlProcessesUtilizationInfo_t info{};
  info.version = nvmlProcessesUtilizationInfo_v1;
  EXPECT_EQ(api().processes_util_info(handle(1), &info), NVML_ERROR_FUNCTION_NOT_FOUND);
  unsigned n = 0;
  EXPECT_EQ(api().process_util(handle(1), nullptr, &n, 0),
            NVML_ERROR_INSUFFICIENT_SIZE);  // the old call works
}

// A caller that pages with the newest timestamp it saw and counts each record as smUtil/100
// over its window recovers each job's busy seconds. The window starts at the process's own
// previous record when that is less than one period before lastSeen (the first new sample
// measured the period since it), else at lastSeen or, for its first record, at its start (as
// the agent learns from /proc). Each process's windows then tile its life, on a shared GPU too,
// so only the rounding to whole percents remains.
TEST_F(ProcessUtil, PagingRecoversEachJobsBusySeconds) {
  const std::string yaml = std::string(testing::kModel) + R"(
gpus: {count: 2, model: m}
jobs:
  - {name: d1, gpus: [0], pid: 701, end: 190,
     utilization: {pattern: square, high: 0.9, low: 0.1, period: 7, duty: 0.3}}
  - {name: d2, gpus: [0], pid: 702, start: 200, end: 380,
     utilization: {pattern: ramp, from: 0.05, to: 0.95, over: 150, step: 0.3}}
  - {name: s1, gpus: [1], pid: 801, start: 3, end: 390, utilization: 0.3}
  - {name: s2, gpus: [1], pid: 802, start: 50, end: 300,
     utilization: {pattern: square, high: 0.6, low: 0.2, period: 11, duty: 0.4}}
)";
  auto scenario = parse_scenario(yaml, "paging.yaml");
  ASSERT_TRUE(scenario.ok()) << scenario.error().message;
  constexpr double kScale = 100;  // 400 scenario seconds in 4 s; the 20 s buffer is 200 ms of wall time
  ASSERT_EQ(start(yaml, 0, kScale), NVML_SUCCESS);
  const auto epoch_us = static_cast<unsigned long long>(epoch_ns_ / 1000);

  std::map<unsigned, double> busy;  // pid -> seconds
  std::vector<nvmlProcessUtilizationSample_t> ps(100);
  std::vector<unsigned long long> last_seen(2, 0);
  std::map<unsigned, unsigned long long> previous;  // pid -> its last record's timeStamp
  for (int k = 1; k <= 80; ++k) {
    sleep_until_scenario(5.0 * k);
    for (unsigned g = 0; g < 2; ++g) {
      unsigned n = 100;
      nvmlReturn_t r = api().process_util(handle(g), ps.data(), &n, last_seen[g]);
      if (r == NVML_ERROR_NOT_FOUND) continue;
      ASSERT_EQ(r, NVML_SUCCESS);
      const unsigned long long from = last_seen[g] == 0 ? epoch_us : last_seen[g];
      unsigned long long newest = last_seen[g];
      for (unsigned i = 0; i < n; ++i) {
        ASSERT_LE(ps[i].smUtil, 100u);
        auto own = previous.find(ps[i].pid);
        unsigned long long window_start = own != previous.end() && own->second + kPeriod >= from ? own->second : from;
        if (own == previous.end()) {
          for (const Job& job : scenario->jobs) {
            if (job.pids[0] == ps[i].pid) {
              window_start = std::max(window_start, epoch_us + static_cast<unsigned long long>(job.start));
            }
          }
        }
        busy[ps[i].pid] += ps[i].smUtil / 100.0 * static_cast<double>(ps[i].timeStamp - window_start) / 1e6;
        previous[ps[i].pid] = ps[i].timeStamp;
        newest = std::max(newest, ps[i].timeStamp);
      }
      last_seen[g] = newest;
    }
  }
  // The records reach each GPU's last job's last sample, which is within one period of its end.
  ASSERT_GE(static_cast<Micros>(last_seen[0] - epoch_us), 380 * kMicrosPerSecond - kPeriod);
  ASSERT_GE(static_cast<Micros>(last_seen[1] - epoch_us), 390 * kMicrosPerSecond - kPeriod);

  const Truth truth = compute_truth(*scenario, 0, 400 * kMicrosPerSecond);
  for (const JobTruth& j : truth.jobs) {
    const double got = busy[j.pid];
    const double rel = std::abs(got - j.busy_seconds) / j.busy_seconds;
    std::printf("job %s (pid %u, GPU %u): truth %.3f s, from records %.3f s, error %.2f%%\n", j.name.c_str(), j.pid,
                j.gpu, j.busy_seconds, got, 100 * rel);
    // The windows tile the job's life and one query more; each record is off by at most half a
    // percentage point of its window.
    const Job& job = scenario->jobs[j.job];
    EXPECT_LE(std::abs(got - j.busy_seconds), 0.005 * (to_seconds(job.end - job.start) + 10)) << j.name;
  }
}

}  // namespace
}  // namespace gpumeter::sim
