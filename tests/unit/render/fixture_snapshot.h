#pragma once
// A fixed, hand-built Snapshot used by the golden files and the HTTP tests. Changing it changes the
// golden files: regenerate them with GPUMETER_UPDATE_GOLDEN=1 and review the diff.

#include <memory>

#include "model/snapshot.h"

namespace gpumeter::testing {

inline constexpr double kFixtureTakenUnix = 1700000000.25;
inline constexpr double kFixtureNowUnix = 1700000001.5;  // snapshot age 1.25 s

// GPU 0: an H100 with every field set (no fan, as on SXM boards). GPU 1: an A100 with a fan, some
// fields unsupported and a driver string that needs escaping. GPU 2: fell off the bus, down, with Xids.
inline Snapshot fixture_snapshot() {
  Snapshot s;
  s.taken_unix = kFixtureTakenUnix;
  s.build = {"0.1.0", "abc1234"};
  s.backends = {{"nvml", true, "loaded", "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", "550.54.15"},
                {"rocm_smi", false, "librocm_smi64.so: cannot open shared object file", "", ""}};
  // GPU 1's fan query answers UNKNOWN now and then; GPU 0's driver handed back garbage records.
  s.backends[0].counters.call_errors[{1, "nvmlDeviceGetFanSpeed", "unknown"}] = 3;
  s.backends[0].counters.call_errors[{1, "nvmlDeviceGetFanSpeed", "timeout"}] = 1;
  s.backends[0].counters.dropped_records[{0, "pid_zero"}] = 12;
  s.backends[0].counters.reinitializations = 1;

  GpuSnapshot g0;
  g0.identity = {0,
                 "GPU-6f2d9d6c-1c3e-4b7e-9a43-2b8b0f3c1a10",
                 "nvidia",
                 "NVIDIA H100 80GB HBM3",
                 "00000000:18:00.0",
                 "550.54.15",
                 "96.00.89.00.01",
                 "1650123456789"};
  g0.up = true;
  auto r0 = std::make_shared<DeviceReading>();
  r0->device.utilization_ratio = 0.53;
  r0->device.memory_utilization_ratio = 0.21;
  r0->device.memory_total_bytes = 85520809984.0;
  r0->device.memory_used_bytes = 42949672960.0;
  r0->device.memory_free_bytes = 42571137024.0;
  r0->device.temperature_celsius = {{"gpu", 64}, {"memory", 71}};
  r0->device.power_watts = 312.457;
  r0->device.power_limit_watts = 700;
  r0->device.energy_joules = 123456789.123;
  r0->clocks.hertz = {{"graphics", 1980e6}, {"sm", 1980e6}, {"memory", 2619e6}, {"video", 1755e6}};
  r0->clocks.performance_state = 0;
  r0->pcie.link_generation = 5;
  r0->pcie.link_width = 16;
  r0->pcie.replay_errors = 0;
  r0->pcie.transmit_bytes = 1234567890123.0;
  r0->pcie.receive_bytes = 987654321098.0;
  r0->clocks.event_active = {{"gpu_idle", 0}, {"sw_power_cap", 1}, {"hw_slowdown", 0}};
  r0->ecc.errors = {{"corrected", 12}, {"uncorrected", 0}};
  r0->ecc.remapped_rows = {{"correctable", 2}, {"uncorrectable", 0}, {"pending", 0}, {"failure", 0}};
  g0.reading = r0;
  g0.collect_success = true;
  g0.collect_duration_seconds = 0.0042;
  g0.last_success_unix = kFixtureTakenUnix - 0.1;
  g0.xid_counts = {{13, 2}};

  GpuSnapshot g1;
  g1.identity = {1,
                 "GPU-0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d",
                 "nvidia",
                 "NVIDIA A100-PCIE-40GB",
                 "00000000:3B:00.0",
                 "550.54.15",
                 "92.00.25.00.08 \"eng\\build\"",
                 ""};
  g1.up = true;
  auto r1 = std::make_shared<DeviceReading>();
  r1->device.utilization_ratio = 0;
  r1->device.memory_total_bytes = 42949672960.0;
  r1->device.memory_used_bytes = 0;
  r1->device.memory_free_bytes = 42949672960.0;
  r1->device.temperature_celsius = {{"gpu", 31}};
  r1->device.power_watts = 35.5;
  r1->device.energy_joules = 4242.0;
  r1->clocks.hertz = {{"graphics", 210e6}, {"memory", 1215e6}};
  r1->clocks.performance_state = 8;
  r1->device.fan_speed_ratio = 0.3;
  r1->pcie.link_generation = 4;
  r1->pcie.link_width = 16;
  r1->clocks.event_active = {{"gpu_idle", 1}};
  g1.reading = r1;
  g1.collect_success = true;
  g1.collect_duration_seconds = 0.0031;
  g1.last_success_unix = kFixtureTakenUnix - 0.1;

  GpuSnapshot g2;
  g2.identity = {2,
                 "GPU-ffeeddcc-bbaa-9988-7766-554433221100",
                 "nvidia",
                 "NVIDIA A100-PCIE-40GB",
                 "00000000:86:00.0",
                 "550.54.15",
                 "",
                 ""};
  g2.up = false;
  g2.down_reason = "GPU is lost (NVML_ERROR_GPU_IS_LOST)";
  g2.collect_success = false;
  g2.collect_duration_seconds = 1.5;
  g2.xid_counts = {{79, 1}, {48, 3}};

  s.gpus = {g0, g1, g2};
  s.collectors = {{"events", true, std::nullopt}};
  return s;
}

// GPU 0: an H100 in MIG mode, split 3g + 2g + 1c.3g (two compute instances sharing GPU instance
// 2), with GPM per GPU instance and no utilization (NVML answers NOT_SUPPORTED on a MIG parent).
// GPU 1: an H100 without MIG, with GPM and two NVLinks, one of them down and without error counts.
inline Snapshot mig_fixture_snapshot() {
  Snapshot s;
  s.taken_unix = kFixtureTakenUnix;
  s.build = {"0.1.0", "abc1234"};
  s.backends = {{"nvml", true, "loaded", "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", "550.54.15"},
                {"rocm_smi", false, "no AMD GPU in /sys/class/drm"}};
  s.backends[1].absent = true;  // an NVIDIA-only node: no series says ROCm SMI is down

  auto profiling = [](double sm, double tensor) {
    ProfilingReading p;
    p.graphics_active_ratio = sm + 0.05;
    p.sm_active_ratio = sm;
    p.sm_occupancy_ratio = sm / 2;
    p.tensor_active_ratio = tensor;
    p.dram_active_ratio = 0.25;
    p.fp64_active_ratio = 0;
    p.fp32_active_ratio = 0.125;
    p.fp16_active_ratio = tensor / 2;
    p.pcie_transmit_bytes_per_second = 1048576;
    p.pcie_receive_bytes_per_second = 2097152;
    return p;
  };

  GpuSnapshot g0;
  g0.identity = {0,
                 "GPU-6f2d9d6c-1c3e-4b7e-9a43-2b8b0f3c1a10",
                 "nvidia",
                 "NVIDIA H100 80GB HBM3",
                 "00000000:18:00.0",
                 "550.54.15",
                 "96.00.89.00.01",
                 "1650123456789"};
  g0.up = true;
  auto r0 = std::make_shared<DeviceReading>();
  r0->device.memory_total_bytes = 85520809984.0;
  r0->device.memory_used_bytes = 25769803776.0;
  r0->device.power_watts = 402.5;
  r0->mig.enabled = true;
  r0->mig.slices = 7;
  MigInstanceReading a{"MIG-5a1e8d7c-0b3f-5c2d-8e4f-1a2b3c4d5e6f",
                       1,
                       0,
                       "3g.40gb",
                       3,
                       42949672960.0,
                       21474836480.0,
                       std::nullopt,
                       profiling(0.75, 0.5)};
  MigInstanceReading b{
      "MIG-9c8b7a6d-5e4f-5a3b-9c2d-6e5f4a3b2c1d", 5, 0, "2g.20gb", 2, 21474836480.0, 0, std::nullopt, profiling(0, 0)};
  MigInstanceReading c0{"MIG-1d2c3b4a-6f5e-5d4c-8b7a-9f8e7d6c5b4a",
                        2,
                        0,
                        "2c.3g.40gb",
                        3,
                        42949672960.0,
                        4294967296.0,
                        std::nullopt,
                        profiling(0.5, 0.25)};
  MigInstanceReading c1{"MIG-4a5b6c7d-8e9f-5a0b-9c1d-2e3f4a5b6c7d",
                        2,
                        2,
                        "1c.3g.40gb",
                        3,
                        42949672960.0,
                        4294967296.0,
                        std::nullopt,
                        profiling(0.5, 0.25)};
  r0->mig.instances = {a, b, c0, c1};
  g0.reading = r0;
  g0.collect_success = true;
  g0.collect_duration_seconds = 0.0042;
  g0.last_success_unix = kFixtureTakenUnix - 0.1;

  GpuSnapshot g1;
  g1.identity = {1,
                 "GPU-0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d",
                 "nvidia",
                 "NVIDIA H100 80GB HBM3",
                 "00000000:3B:00.0",
                 "550.54.15",
                 "96.00.89.00.01",
                 ""};
  g1.up = true;
  auto r1 = std::make_shared<DeviceReading>();
  r1->device.utilization_ratio = 0.9;
  r1->device.memory_total_bytes = 85520809984.0;
  r1->device.memory_used_bytes = 64424509440.0;
  r1->mig.enabled = false;
  ProfilingReading p1 = profiling(0.875, 0.625);
  p1.nvlink_transmit_bytes_per_second = 52428800;
  p1.nvlink_receive_bytes_per_second = 41943040;
  r1->profiling = p1;
  NvlinkReading l0;
  l0.link = 0;
  l0.active = true;
  l0.speed_bytes_per_second = 26562500000.0;
  l0.transmit_bytes = 1099511627776.0;
  l0.receive_bytes = 549755813888.0;
  l0.errors = {{"replay", 0}, {"recovery", 1}, {"crc", 3}};
  NvlinkReading l1;
  l1.link = 1;
  l1.active = false;
  l1.transmit_bytes = 0;
  l1.receive_bytes = 0;
  r1->nvlinks = {l0, l1};
  g1.reading = r1;
  g1.collect_success = true;
  g1.collect_duration_seconds = 0.0031;
  g1.last_success_unix = kFixtureTakenUnix - 0.1;

  s.gpus = {g0, g1};
  return s;
}

}  // namespace gpumeter::testing
