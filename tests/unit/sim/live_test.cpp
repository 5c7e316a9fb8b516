// Live processes (sim/physics/live.h): the simulated CUDA driver's log lines, and a GPU's
// timeline and counters with a live process beside the scenario's jobs.

#include "sim/physics/live.h"

#include <gtest/gtest.h>

#include "sim/scenario/env_config.h"
#include "sim/physics/gpu_sim.h"
#include "test_support.h"

namespace gpumeter::sim {
namespace {

constexpr Micros S = kMicrosPerSecond;

TEST(LiveLog, ParsesTheFourEvents) {
  LiveLog log;
  EXPECT_TRUE(parse_live_line("ctx 1 1000", log));
  EXPECT_TRUE(parse_live_line("mem 1 1100 4096", log));
  EXPECT_TRUE(parse_live_line("run 1 1200 1300", log));
  EXPECT_TRUE(parse_live_line("end 1 2000", log));
  const LiveLog::Gpu& g = log.gpus.at(1);
  EXPECT_EQ(g.start_us, 1000);
  EXPECT_EQ(g.end_us, 2000);
  ASSERT_EQ(g.memory.size(), 1u);
  EXPECT_EQ(g.memory[0], (std::pair<std::int64_t, std::uint64_t>{1100, 4096}));
  ASSERT_EQ(g.busy.size(), 1u);
  EXPECT_EQ(g.busy[0], (std::pair<std::int64_t, std::int64_t>{1200, 1300}));
}

TEST(LiveLog, RejectsWhatIsNotAnEvent) {
  LiveLog log;
  for (const char* bad :
       {"", "ctx", "ctx x 1", "ctx 0 -5", "mem 0 10", "run 0 20 10", "ctx 0 1 extra", "hello 0 1", "end 3 100"}) {
    EXPECT_FALSE(parse_live_line(bad, log)) << bad;
  }
}

TEST(LiveLog, KernelsOfOneContextRunOneAfterAnother) {
  LiveLog log;
  ASSERT_TRUE(parse_live_line("ctx 0 0", log));
  ASSERT_TRUE(parse_live_line("run 0 100 200", log));
  ASSERT_TRUE(parse_live_line("run 0 150 250", log));  // launched while the first ran
  const auto& busy = log.gpus.at(0).busy;
  ASSERT_EQ(busy.size(), 2u);
  EXPECT_EQ(busy[1], (std::pair<std::int64_t, std::int64_t>{200, 300}));
}

TEST(LiveLog, ADeadProcessLeavesAtTheTimeGiven) {
  LiveLog log;
  ASSERT_TRUE(parse_live_line("ctx 0 10", log));
  ASSERT_TRUE(parse_live_line("ctx 1 20", log));
  ASSERT_TRUE(parse_live_line("end 1 30", log));
  close_live_log(log, 500);
  EXPECT_EQ(log.gpus.at(0).end_us, 500);
  EXPECT_EQ(log.gpus.at(1).end_us, 30);
}

TEST(LiveState, ShareAndMemoryAndTheNextChange) {
  LiveProcess p;
  p.memory = {{10, 100}, {50, 0}};
  p.busy = {{20, 30}, {40, 45}};
  EXPECT_EQ(live_state_at(p, 5).memory_bytes, 0u);
  EXPECT_EQ(live_state_at(p, 5).next_change, 10);
  const LiveState a = live_state_at(p, 12);
  EXPECT_EQ(a.percent, 0);
  EXPECT_EQ(a.memory_bytes, 100u);
  EXPECT_EQ(a.next_change, 20);
  const LiveState b = live_state_at(p, 20);
  EXPECT_EQ(b.percent, 100);
  EXPECT_EQ(b.next_change, 30);
  EXPECT_EQ(live_state_at(p, 30).percent, 0);
  EXPECT_EQ(live_state_at(p, 30).next_change, 40);
  EXPECT_EQ(live_state_at(p, 46).next_change, 50);
  EXPECT_EQ(live_state_at(p, 60).next_change, kForever);
}

// A GPU with no jobs and one live process: busy exactly while its kernels ran, counted
// correctly even though the counters had already passed the instant the process appeared.
TEST(LiveTimeline, CountersSeeAProcessThatAppearsLater) {
  Scenario s = testing::parse_ok(std::string(testing::kModel) + "gpus: {count: 1, model: m}\n");
  LiveTable table;
  SimGpu gpu(s, 0, &table);
  EXPECT_DOUBLE_EQ(gpu.busy_seconds(10 * S), 0.0);
  EXPECT_TRUE(gpu.processes(10 * S).empty());
  LiveProcess p;
  p.pid = 4242;
  p.start = 10 * S;
  p.memory = {{10 * S, 1 << 20}};
  for (Micros t = 11 * S; t < 21 * S; t += S) p.busy.emplace_back(t, t + 3 * S / 10);  // 30% of each second
  table.set(std::make_shared<const LiveTable::Set>(LiveTable::Set{p}));
  const auto& procs = gpu.processes(12 * S);
  ASSERT_EQ(procs.size(), 1u);
  EXPECT_EQ(procs[0].pid, 4242u);
  EXPECT_EQ(procs[0].job, kLiveJob);
  EXPECT_EQ(procs[0].memory_bytes, 1u << 20);
  EXPECT_NEAR(gpu.busy_seconds(21 * S), 3.0, 1e-9);
  // The process ends: it is gone from the list from its end on.
  p.end = 22 * S;
  table.set(std::make_shared<const LiveTable::Set>(LiveTable::Set{p}));
  EXPECT_EQ(gpu.processes(21 * S + 1).size(), 1u);
  EXPECT_TRUE(gpu.processes(22 * S).empty());
}

TEST(SimEnv, LieAndCudaDirectory) {
  auto env = read_sim_env([](const char* name) -> const char* {
    if (std::string_view(name) == "GPUMETER_SIM_SCENARIO") return "/nonexistent/s.yaml";
    if (std::string_view(name) == "GPUMETER_SIM_LIE") return "temperature:+7";
    if (std::string_view(name) == "TMPDIR") return "/scratch";
    return nullptr;
  });
  ASSERT_TRUE(env) << env.error().message;
  EXPECT_EQ(env->lie.metric, "temperature");
  EXPECT_DOUBLE_EQ(env->lie.offset, 7.0);
  EXPECT_EQ(env->cuda_dir.rfind("/scratch/gpumeter-sim-cuda-", 0), 0u) << env->cuda_dir;
  auto bad = read_sim_env([](const char* name) -> const char* {
    if (std::string_view(name) == "GPUMETER_SIM_SCENARIO") return "s.yaml";
    if (std::string_view(name) == "GPUMETER_SIM_LIE") return "power:+7";
    return nullptr;
  });
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("GPUMETER_SIM_LIE"), std::string::npos);
}

}  // namespace
}  // namespace gpumeter::sim
