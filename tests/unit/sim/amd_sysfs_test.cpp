// AMD models in scenarios and the amdgpu sysfs tree `gpumeter sim sysfs` writes.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "sim/amd/amdgpu_files.h"
#include "sim/amd/sysfs_writer.h"
#include "test_support.h"

namespace gpumeter::sim::amd {
namespace {

using sim::testing::parse_ok;
using sim::testing::temp_dir;
namespace fs = std::filesystem;

using sim::testing::kAmdModel;

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string parse_error(const std::string& yaml) {
  auto s = parse_scenario(yaml, "test.yaml");
  return s ? std::string() : s.error().message;
}

TEST(AmdScenario, ModelTakesVendorArchitectureFromNameAndOwnClocks) {
  Scenario s = parse_ok(std::string(kAmdModel) + "gpus: {count: 2, model: mi}\n");
  ASSERT_EQ(s.gpus.size(), 2u);
  EXPECT_TRUE(s.is_amd(0));
  EXPECT_EQ(s.models[0].architecture, "cdna3");
  EXPECT_EQ(s.models[0].pci_device_id, 0x74a1u << 16 | 0x1002u);
  EXPECT_EQ(s.models[0].sm_clock.max_mhz, 2100u);  // no SM clock of its own
  EXPECT_TRUE(s.models[0].ecc);
}

TEST(AmdScenario, RejectsWhatAnAmdModelCannotBe) {
  std::string no_cus = kAmdModel;
  no_cus.replace(no_cus.find("    compute_units: 304\n"), 23, "");
  EXPECT_NE(parse_error(no_cus + "gpus: {count: 1, model: mi}\n").find("compute_units"), std::string::npos);
  std::string sm = kAmdModel;
  sm.replace(sm.find("      memory: {idle: 1300"), 0, "      sm: {idle: 1, max: 2}\n");
  EXPECT_NE(parse_error(sm + "gpus: {count: 1, model: mi}\n").find("no SM clock"), std::string::npos);
}

TEST(AmdScenario, NvidiaGpusComeFirst) {
  std::string yaml = std::string(sim::testing::kModel) + std::string(sim::testing::kAmdModelEntry) +
                     "gpus:\n  - {model: mi}\n  - {model: m}\n";
  EXPECT_NE(parse_error(yaml).find("list the NVIDIA GPUs first"), std::string::npos) << parse_error(yaml);
}

TEST(AmdGpuMetrics, LayoutOfContentRevisionOne) {
  MetricsInput in;
  in.edge_c = 61;
  in.energy_accumulator = 0x0102030405060708ULL;
  in.socket_power_w = 612;
  const std::string b = gpu_metrics_v1_1(in);
  ASSERT_EQ(b.size(), 96u);
  EXPECT_EQ(static_cast<unsigned char>(b[0]), 96);
  EXPECT_EQ(b[2], 1);
  EXPECT_EQ(b[3], 1);  // content revision 1: Debian's 5.2.3 aborts on 4 and later
  EXPECT_EQ(static_cast<unsigned char>(b[4]), 61);
  EXPECT_EQ(static_cast<unsigned char>(b[22]) | static_cast<unsigned char>(b[23]) << 8, 612);
  EXPECT_EQ(static_cast<unsigned char>(b[24]), 0x08);
  EXPECT_EQ(static_cast<unsigned char>(b[31]), 0x01);
}

TEST(AmdGpuMetrics, ContentRevisionThreeKeepsRevisionOnesOffsets) {
  MetricsInput in;
  in.edge_c = 61;
  in.fan_rpm = 1234;
  in.energy_accumulator = 0x0102030405060708ULL;
  const std::string v1 = gpu_metrics_v1_1(in);
  const std::string b = gpu_metrics_v1_3(in, true);
  ASSERT_EQ(b.size(), 120u);
  EXPECT_EQ(static_cast<unsigned char>(b[0]), 120);
  EXPECT_EQ(b[2], 1);
  EXPECT_EQ(b[3], 3);
  EXPECT_EQ(b.substr(4, 74), v1.substr(4, 74));
  EXPECT_EQ(b.substr(78, 2), "\xff\xff");  // padding, as smu_cmn_init_soft_gpu_metrics leaves it
  EXPECT_EQ(b.substr(80, 16), v1.substr(80, 16));
  EXPECT_EQ(b.substr(96, 14), std::string(14, '\0'));  // firmware timestamp, voltages
  EXPECT_EQ(b.substr(110, 2), "\xff\xff");
  EXPECT_EQ(b.substr(112), std::string(8, '\0'));  // indep_throttle_status
  // A GDDR board (Navi 31): no accumulators, HBM temperatures or firmware timestamp.
  const std::string g = gpu_metrics_v1_3(in, false);
  EXPECT_EQ(g.substr(80, 24), std::string(24, '\xff'));
  EXPECT_EQ(g.substr(4, 74), v1.substr(4, 74));
  EXPECT_EQ(static_cast<unsigned char>(g[72]) | static_cast<unsigned char>(g[73]) << 8, 1234);
}

TEST(AmdGpuMetrics, EveryArchitectureWritesContentRevisionThree) {
  GpuModelSpec m;
  for (const char* arch : {"cdna2", "rdna3", "cdna3"}) {  // aldebaran, smu_v13_0_0, smu_v13_0_6
    m.architecture = arch;
    const std::string b = gpu_metrics(m, MetricsInput{});
    ASSERT_EQ(b.size(), 120u) << arch;
    EXPECT_EQ(b[3], 3) << arch;  // Debian's 5.2.3 aborts on 4 and later
  }
}

TEST(AmdGpuMetrics, Mi300xLeavesWhatSmuV13_0_6SetsNothingInAt0xFF) {
  MetricsInput in;
  in.edge_c = 61;
  in.junction_c = 69;
  in.mem_c = 65;
  in.socket_power_w = 613;
  in.fan_rpm = 1234;
  in.gfxclk_mhz = 2100;
  in.energy_accumulator = 0x0102030405060708ULL;
  GpuModelSpec m;
  m.architecture = "cdna3";
  const std::string b = gpu_metrics(m, in);
  const std::string all = gpu_metrics_v1_3(in, true);
  ASSERT_EQ(b.size(), 120u);
  auto u16 = [&](std::size_t at) {
    return static_cast<unsigned char>(b[at]) | static_cast<unsigned char>(b[at + 1]) << 8;
  };
  EXPECT_EQ(u16(4), 0xFFFF);                            // no edge temperature
  EXPECT_EQ(u16(6), 69u);                               // hotspot
  EXPECT_EQ(u16(8), 65u);                               // memory
  EXPECT_EQ(u16(22), 613u);                             // average_socket_power: its current socket power
  EXPECT_EQ(b.substr(24, 8), all.substr(24, 8));        // energy accumulator
  EXPECT_EQ(u16(54), 2100u);                            // current_gfxclk
  EXPECT_EQ(u16(72), 0xFFFF);                           // no fan
  EXPECT_EQ(b.substr(88, 8), std::string(8, '\xff'));   // no HBM stack temperatures
  EXPECT_EQ(b.substr(104, 6), std::string(6, '\xff'));  // no voltages
  EXPECT_EQ(b.substr(112, 8), std::string(8, '\xff'));  // no independent throttle status
  EXPECT_EQ(b.substr(68, 4), std::string(4, '\0'));     // throttle_status 0, as it set it
  EXPECT_EQ(b.substr(74, 4), all.substr(74, 4));        // PCIe width and speed
}

TEST(AmdGpuFiles, OnlyMi300xHasNoAveragePowerFile) {
  GpuModelSpec m;
  m.architecture = "cdna3";
  EXPECT_FALSE(has_average_power(m));
  EXPECT_STREQ(power_file(m), "power1_input");
  for (const char* arch : {"cdna2", "rdna3"}) {
    m.architecture = arch;
    EXPECT_TRUE(has_average_power(m));
    EXPECT_STREQ(power_file(m), "power1_average");
  }
}

TEST(AmdGpuFiles, PcieBwIsReceivedThenSentMessagesThenPayloadSize) {
  // 2 GB/s out and 4 GB/s in, in 256-byte payloads.
  EXPECT_EQ(pcie_bw(2e9, 4e9), "15625000 7812500 256\n");
  EXPECT_EQ(pcie_bw(0, 0), "0 0 256\n");
  EXPECT_EQ(pcie_bw(100, 0), "0 0 256\n");  // under half a payload rounds to no message
}

TEST(AmdGpuFiles, DpmLevelsMarkTheCurrentOne) {
  EXPECT_EQ(dpm_levels({500, 2100}, 2100), "0: 500Mhz\n1: 2100Mhz *\n");
  EXPECT_EQ(dpm_levels({500, 2100}, 500), "0: 500Mhz *\n1: 2100Mhz\n");
  EXPECT_EQ(dpm_levels({1300, 1300}, 1300), "0: 1300Mhz *\n");
}

TEST(AmdSysfsTree, FollowsTheScenarioAndItsProcesses) {
  Scenario s = parse_ok(std::string(kAmdModel) + R"(
gpus: {count: 2, model: mi}
jobs:
  - {name: a, start: 10s, end: 20s, gpus: [1], pid: 700, memory: 1GiB, utilization: 0.5}
  - {name: b, start: 15s, end: 20s, gpus: [1], pid: 701, memory: 2GiB, utilization: 0.5}
)");
  s.source = "test.yaml";
  const fs::path dir = temp_dir() / "amd-tree";
  auto tree = SysfsTree::open(dir, s);
  ASSERT_TRUE(tree.ok()) << tree.error().message;
  const fs::path card1 = dir / "class/drm/card1";
  ASSERT_TRUE(fs::is_symlink(card1));
  EXPECT_TRUE(fs::read_symlink(card1).is_absolute());  // ROCm SMI needs an absolute link
  EXPECT_EQ(read(card1 / "device/vendor"), "0x1002\n");
  EXPECT_EQ(read(card1 / "device/gpu_busy_percent"), "0\n");
  EXPECT_TRUE((*tree)->processes().empty());

  ASSERT_TRUE((*tree)->sync(12 * kMicrosPerSecond).ok());
  EXPECT_EQ(read(card1 / "device/gpu_busy_percent"), "50\n");
  // The last second at 50 %: half the model's 2 GB/s out and 4 GB/s in, in 256-byte messages.
  EXPECT_EQ(read(card1 / "device/pcie_bw"), "7812500 3906250 256\n");
  EXPECT_EQ(read(dir / "class/drm/card0/device/pcie_bw"), "0 0 256\n");
  EXPECT_EQ((*tree)->processes(), std::vector<unsigned>{700});
  const fs::path proc = dir / "class/kfd/kfd/proc/700";
  const unsigned id0 = kfd_gpu_id(0), id1 = kfd_gpu_id(1);
  EXPECT_EQ(read(proc / ("vram_" + std::to_string(id1))), "1073741824\n");
  EXPECT_EQ(read(proc / ("vram_" + std::to_string(id0))), "0\n");  // every GPU has its files
  EXPECT_EQ(read(proc / "queues/0/gpuid"), std::to_string(id1) + "\n");
  EXPECT_EQ(read(proc / ("stats_" + std::to_string(id1)) / "cu_occupancy"), "152\n");  // half of 304

  ASSERT_TRUE((*tree)->sync(16 * kMicrosPerSecond).ok());
  EXPECT_EQ(read(card1 / "device/gpu_busy_percent"), "100\n");
  EXPECT_EQ((*tree)->processes(), (std::vector<unsigned>{700, 701}));
  EXPECT_EQ(read(proc / ("stats_" + std::to_string(id1)) / "cu_occupancy"), "152\n");

  ASSERT_TRUE((*tree)->sync(25 * kMicrosPerSecond).ok());
  EXPECT_TRUE((*tree)->processes().empty());
  EXPECT_FALSE(fs::exists(proc));
  // The hwmon sensors the library insists on.
  EXPECT_EQ(read(card1 / "device/hwmon/hwmon1/name"), "amdgpu\n");
  EXPECT_EQ(read(card1 / "device/hwmon/hwmon1/in0_label"), "vddgfx\n");
}

// MI300X's one power file is power1_input, its current socket power in whole watts, which
// gpu_metrics repeats; an MI250X keeps power1_average.
TEST(AmdSysfsTree, Mi300xPowerIsPower1InputInWholeWatts) {
  std::string both = std::string(kAmdModel) + sim::testing::kAmdModelEntry;
  both.replace(both.rfind("  mi:"), 5, "  mi250x:");
  both.replace(both.rfind("AMD Instinct MI300X"), 19, "AMD Instinct MI250X");
  Scenario s = parse_ok(both + R"(
gpus:
  - {model: mi}
  - {model: mi250x}
jobs:
  - {name: a, start: 0, end: 20s, gpus: [0, 1], pids: [700, 701], utilization: 0.37}
)");
  s.source = "test.yaml";
  const fs::path dir = temp_dir() / "amd-power";
  auto tree = SysfsTree::open(dir, s);
  ASSERT_TRUE(tree.ok()) << tree.error().message;
  ASSERT_TRUE((*tree)->sync(12 * kMicrosPerSecond).ok());
  const fs::path mi300x = dir / "class/drm/card0/device/hwmon/hwmon0";
  const fs::path mi250x = dir / "class/drm/card1/device/hwmon/hwmon1";
  EXPECT_FALSE(fs::exists(mi300x / "power1_average"));
  const std::string input = read(mi300x / "power1_input");
  ASSERT_FALSE(input.empty());
  const unsigned long long uw = std::stoull(input);
  EXPECT_EQ(uw % 1'000'000, 0u) << input;                          // whole watts
  EXPECT_GT(uw, 150'000'000u) << "above idle at 37 %: " << input;  // not a constant
  const std::string metrics = read(dir / "class/drm/card0/device/gpu_metrics");
  ASSERT_EQ(metrics.size(), 120u);
  EXPECT_EQ(static_cast<unsigned char>(metrics[22]) | static_cast<unsigned char>(metrics[23]) << 8, uw / 1'000'000);
  EXPECT_EQ(read(mi300x / "power1_label"), "PPT\n");
  EXPECT_TRUE(fs::exists(mi250x / "power1_average"));
  EXPECT_FALSE(fs::exists(mi250x / "power1_input"));
  EXPECT_EQ(read(mi250x / "power1_label"), "PPT\n");
}

TEST(AmdSysfsTree, NeedsAnAmdGpu) {
  Scenario s = parse_ok(std::string(sim::testing::kModel) + "gpus: {count: 1, model: m}\n");
  auto tree = SysfsTree::open(temp_dir() / "no-amd", s);
  ASSERT_FALSE(tree.ok());
  EXPECT_NE(tree.error().message.find("no AMD GPU"), std::string::npos);
}

}  // namespace
}  // namespace gpumeter::sim::amd
