// The DRM files `gpumeter sim procfs` writes for processes on AMD GPUs, read back by the agent's
// own scanner (attribution/drm_fdinfo.h), against `gpumeter sim truth`.

#include <filesystem>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "attribution/drm_fdinfo.h"
#include "sim/amd/sysfs_writer.h"
#include "sim/host/procfs_writer.h"
#include "sim/truth/truth.h"
#include "test_support.h"

namespace gpumeter::sim {
namespace {

namespace fs = std::filesystem;
using testing::entries;
using testing::fresh_dir;
using testing::parse_ok;
constexpr Micros S = kMicrosPerSecond;

// Two AMD GPUs; a graphics client shares GPU 1 with a ROCm job.
const std::string kScenario = "\nduration: 100" + sim::testing::kAmdModel + R"(gpus: {count: 2, model: mi}
jobs:
  - name: rocm
    start: 10
    end: 60
    gpus: [1]
    pid: 500
    memory: 8GiB
    utilization: 0.5
  - name: viz
    client: graphics
    start: 20
    end: 80
    gpus: [1]
    pid: 600
    memory: 2GiB
    utilization: {pattern: square, high: 0.9, low: 0.3, period: 10, duty: 0.5}
)";

std::string pdev(const Scenario& s, unsigned gpu) {
  const PciAddress& a = s.gpus[gpu].pci;
  return fmt::format("{:04x}:{:02x}:{:02x}.0", a.domain, a.bus, a.device);
}

TEST(DrmFiles, GraphicsEngineTimeIsTheTruthsBusyTime) {
  const Scenario s = parse_ok(kScenario);
  ASSERT_TRUE(s.jobs[1].graphics);
  const fs::path dir = fresh_dir("drm-files");
  auto tree = ProcfsTree::open(dir, s, 5 * S);
  ASSERT_TRUE(tree) << tree.error().message;
  DrmClientScanner scanner({.procfs = (dir / "proc").string(), .max_age = std::chrono::milliseconds(0)});
  for (Micros t : {15 * S, 33 * S + 250'000, 59 * S, 79 * S + 900'000}) {
    ASSERT_TRUE((*tree)->sync(t));
    auto clients = scanner.clients(pdev(s, 1));
    ASSERT_TRUE(clients) << clients.error().message;
    const Truth truth = compute_truth(s, 0, t);
    for (const JobTruth& j : truth.jobs) {
      auto c = std::find_if(clients->begin(), clients->end(), [&](const DrmClient& x) { return x.pid == j.pid; });
      const bool running = t < s.jobs[j.job].end;
      ASSERT_EQ(c != clients->end(), running) << "pid " << j.pid << " at " << t;
      if (!running) continue;
      if (s.jobs[j.job].graphics) {
        EXPECT_NEAR(static_cast<double>(c->busy_ns) / 1e9, j.busy_seconds, 1e-9) << "at " << t;
        EXPECT_EQ(c->vram_bytes, 2ull << 30);
      } else {
        EXPECT_EQ(c->busy_ns, 0u);  // ROCm compute records no engine time
      }
    }
    EXPECT_TRUE(scanner.clients(pdev(s, 0))->empty());
  }
  // Two fds of one client (a dup), and the render node of card 1.
  ASSERT_TRUE((*tree)->sync(30 * S));
  const fs::path fd = dir / "proc" / "600" / "fd";
  EXPECT_EQ(entries(fd), (std::set<std::string>{"0", "1", "2", "5", "6"}));
  EXPECT_EQ(fs::read_symlink(fd / "5"), "/dev/dri/renderD129");
  EXPECT_EQ(testing::read_file(dir / "proc/600/fdinfo/5"), testing::read_file(dir / "proc/600/fdinfo/6"));
  EXPECT_EQ(entries(dir / "proc" / "500" / "fd"), (std::set<std::string>{"0", "1", "2", "5"}));
  // Before its job starts (within the lead) and after it ends, the process has no DRM file.
  ASSERT_TRUE((*tree)->sync(17 * S));
  EXPECT_EQ(entries(fd), (std::set<std::string>{"0", "1", "2"}));
  ASSERT_TRUE((*tree)->sync(82 * S));
  EXPECT_EQ(entries(fd), (std::set<std::string>{"0", "1", "2"}));
  EXPECT_TRUE(entries(dir / "proc/600/fdinfo").count("5") == 0);
}

TEST(DrmFiles, CountersAreRewrittenEveryPeriodWhileAGraphicsClientRuns) {
  const Scenario s = parse_ok(kScenario);
  const fs::path dir = fresh_dir("drm-files-follow");
  auto tree = ProcfsTree::open(dir, s, 5 * S, {}, SlurmCgroupLayout::kNone, 250'000);
  ASSERT_TRUE(tree);
  EXPECT_EQ((*tree)->next_change_after(12 * S), 15 * S);  // pid 600's entry appears (lead 5 s)
  EXPECT_EQ((*tree)->next_change_after(16 * S), 20 * S);  // its render node opens
  EXPECT_EQ((*tree)->next_change_after(20 * S), 20 * S + 250'000);
  EXPECT_EQ((*tree)->next_change_after(79 * S + 900'000), 80 * S);
  EXPECT_EQ((*tree)->next_change_after(80 * S), 85 * S);
}

TEST(DrmFiles, AGraphicsClientIsNoKfdProcess) {
  const Scenario s = parse_ok(kScenario);
  auto tree = amd::SysfsTree::open(fresh_dir("drm-files-sysfs"), s);
  ASSERT_TRUE(tree) << tree.error().message;
  ASSERT_TRUE((*tree)->sync(30 * S));
  EXPECT_EQ((*tree)->processes(), std::vector<unsigned>{500});
}

TEST(DrmFiles, AGraphicsClientOnAnNvidiaGpuIsRefused) {
  auto s = parse_scenario(std::string(testing::kModel) +
                              "gpus: {count: 1, model: m}\n"
                              "jobs:\n  - {name: g, client: graphics, gpus: [0], pid: 5, utilization: 0.5}\n",
                          "test.yaml");
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("client"), std::string::npos) << s.error().message;
  auto bad = parse_scenario(
      std::string(kScenario) + "  - {name: x, client: vulkan, gpus: [0], pid: 7, utilization: 0.1}\n", "test.yaml");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("compute or graphics"), std::string::npos) << bad.error().message;
}

}  // namespace
}  // namespace gpumeter::sim
