// The scenario's faults on the amdgpu sysfs tree: a lost GPU's files vanish and come back, a hung
// GPU's files block their readers until the hang ends; AMD GPUs take no Xid or error window.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "sim/amd/sysfs_writer.h"
#include "test_support.h"

namespace gpumeter::sim::amd {
namespace {

using sim::testing::parse_ok;
using sim::testing::temp_dir;
namespace fs = std::filesystem;

const std::string kTwoAmdGpus = sim::testing::kAmdModel + R"(gpus: {count: 2, model: mi}
jobs:
  - {name: a, gpus: [0, 1], pids: [700, 701], utilization: 0.5}
)";

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool is_a_fifo(const fs::path& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0 && S_ISFIFO(st.st_mode);
}

std::string parse_error(const std::string& yaml) {
  auto s = parse_scenario(yaml, "test.yaml");
  return s ? std::string() : s.error().message;
}

TEST(AmdFaults, LostGpuFilesVanishAndComeBack) {
  Scenario s = parse_ok(std::string(kTwoAmdGpus) + "faults:\n  - {kind: lost, gpu: 1, at: 10s, duration: 5s}\n");
  s.source = "test.yaml";
  const fs::path dir = temp_dir() / "amd-lost";
  auto tree = SysfsTree::open(dir, s, true);
  ASSERT_TRUE(tree.ok()) << tree.error().message;
  const fs::path card1 = dir / "class/drm/card1";
  const fs::path device1 = fs::read_symlink(card1);
  ASSERT_TRUE((*tree)->sync(11 * kMicrosPerSecond).ok());
  EXPECT_FALSE(fs::exists(fs::symlink_status(card1)));
  EXPECT_FALSE(fs::exists(device1));
  EXPECT_EQ(read(dir / "class/drm/card0/device/gpu_busy_percent"), "50\n");  // the other GPU is untouched
  ASSERT_TRUE((*tree)->sync(15 * kMicrosPerSecond).ok());
  EXPECT_EQ(fs::read_symlink(card1), device1);
  EXPECT_EQ(read(card1 / "device/gpu_busy_percent"), "50\n");
  EXPECT_EQ(read(card1 / "device/hwmon/hwmon1/name"), "amdgpu\n");
}

TEST(AmdFaults, HungGpuBlocksItsReadersUntilTheHangEnds) {
  Scenario s = parse_ok(std::string(kTwoAmdGpus) + "faults:\n  - {kind: hang, gpu: 0, at: 10s, seconds: 5}\n");
  s.source = "test.yaml";
  const fs::path dir = temp_dir() / "amd-hang";
  auto tree = SysfsTree::open(dir, s, true);
  ASSERT_TRUE(tree.ok()) << tree.error().message;
  const fs::path device = dir / "class/drm/card0/device";
  const fs::path metrics = device / "gpu_metrics";
  const fs::path power = device / "hwmon/hwmon0/power1_input";  // an MI300X's one power file
  ASSERT_TRUE((*tree)->sync(10 * kMicrosPerSecond).ok());
  EXPECT_TRUE(is_a_fifo(metrics));
  EXPECT_TRUE(is_a_fifo(power));
  EXPECT_FALSE(is_a_fifo(dir / "class/drm/card1/device/gpu_metrics"));  // the other GPU is untouched
  EXPECT_EQ(read(device / "gpu_busy_percent"), "50\n");                 // a file ROCm SMI stat()s first stays a file

  // A reader blocks in open() until the hang ends; it then reads the value of that moment.
  std::atomic<bool> done{false};
  std::string got;
  std::thread reader([&] {
    got = read(power);
    done = true;
  });
  ASSERT_TRUE((*tree)->sync(12 * kMicrosPerSecond).ok());  // still hung: the values are held back
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(done.load());
  EXPECT_TRUE(is_a_fifo(power));
  ASSERT_TRUE((*tree)->sync(15 * kMicrosPerSecond).ok());
  reader.join();
  EXPECT_FALSE(is_a_fifo(metrics));
  EXPECT_FALSE(is_a_fifo(power));
  EXPECT_EQ(got, read(power));  // the load is steady: the value held back is the current one
  EXPECT_NE(got, "");
  EXPECT_EQ(read(metrics).size(), 120u);
}

TEST(AmdFaults, OneShotTreeAndStopLeaveNoReaderBlocked) {
  Scenario s = parse_ok(std::string(kTwoAmdGpus) + "faults:\n  - {kind: hang, gpu: 0, at: 10s, seconds: 5}\n");
  s.source = "test.yaml";
  const fs::path dir = temp_dir() / "amd-hang-once";
  auto once = SysfsTree::open(dir, s);
  ASSERT_TRUE(once.ok());
  ASSERT_TRUE((*once)->sync(12 * kMicrosPerSecond).ok());
  EXPECT_FALSE(is_a_fifo(dir / "class/drm/card0/device/gpu_metrics"));
  auto follow = SysfsTree::open(dir, s, true);
  ASSERT_TRUE(follow.ok());
  ASSERT_TRUE((*follow)->sync(12 * kMicrosPerSecond).ok());
  EXPECT_TRUE(is_a_fifo(dir / "class/drm/card0/device/gpu_metrics"));
  ASSERT_TRUE((*follow)->release_hangs().ok());
  EXPECT_FALSE(is_a_fifo(dir / "class/drm/card0/device/gpu_metrics"));
}

TEST(AmdFaults, NoXidOrErrorWindowOnAnAmdGpu) {
  const std::string amd = kTwoAmdGpus;
  EXPECT_NE(parse_error(amd + "faults:\n  - {kind: xid, gpu: 1, at: 1s, code: 79}\n").find("Xid"), std::string::npos);
  EXPECT_NE(parse_error(amd + "faults:\n  - {kind: unknown_errors, gpu: 0, at: 1s, duration: 2s}\n").find("AMD GPU"),
            std::string::npos);
  EXPECT_NE(parse_error(amd + "faults:\n  - {kind: hang, gpu: 0, at: 1s, seconds: 2, call: nvmlDeviceGetPowerUsage}\n")
                .find("can only be rsmi_compute_process_info_by_pid_get"),
            std::string::npos);
  EXPECT_EQ(parse_error(amd + "faults:\n  - {kind: hang, gpu: 0, at: 1s, seconds: 2}\n"
                              "  - {kind: lost, gpu: 1, at: 1s, duration: 2s}\n"),
            "");
}

}  // namespace
}  // namespace gpumeter::sim::amd
