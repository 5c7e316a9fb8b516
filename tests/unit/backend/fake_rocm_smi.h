#pragma once
// A scripted ROCm SMI for the AMD backend's unit tests: per GPU, the values each call answers
// and, per call name, the status it answers instead. What it scripts is what the backend reads
// (src/backend/rocm/); the real library's behaviour is tested against Debian's librocm-smi64 in
// tests/integration/test_rocm*.py.

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "abi/rocm_smi_api.h"
#include "backend/dynamic_library.h"

namespace gpumeter::fake_rocm {

struct Gpu {
  std::string name = "AMD Instinct MI210";
  std::string serial = "SERIAL0";
  std::uint64_t unique_id = 0x1234abcd;
  std::uint64_t pci_id = (0ULL << 32) | (0x43 << 8) | (0 << 3) | 0;  // 0000:43:00.0
  std::uint32_t busy_percent = 40;
  std::uint32_t memory_busy_percent = 10;
  std::uint64_t vram_total = 64ULL << 30;
  std::uint64_t vram_used = 16ULL << 30;
  std::map<std::uint32_t, std::int64_t> temperature_mc = {{0, 45'000}, {1, 52'000}, {2, 60'000}};
  std::uint64_t power_uw = 250'000'000;  // rsmi_dev_power_ave_get
  // What ROCm 6.0's power calls answer (exported only when Script::power_get, ::socket_power):
  // distinct values, so that a test sees which one the backend read.
  std::uint64_t power_get_uw = 401'000'000;
  RSMI_POWER_TYPE power_get_type = RSMI_CURRENT_POWER;
  std::uint64_t socket_power_uw = 402'000'000;
  // gpu_metrics (5.x layout): average_socket_power in W (0xFFFF: the kernel filled nothing in),
  // throttle_status.
  std::uint16_t metrics_socket_power_w = 0xFFFF;
  std::uint32_t throttle_status = 0;
  std::uint64_t power_cap_uw = 300'000'000;
  std::uint64_t energy_counter = 1'000'000;
  float energy_resolution_uj = 15.3f;
  std::vector<std::uint64_t> sys_clock_hz = {500'000'000, 1'700'000'000};
  std::uint32_t sys_clock_current = 1;
  std::uint64_t pcie_rate = 16'000'000'000ULL;  // gen 4
  std::uint32_t pcie_lanes = 16;
  std::uint64_t replays = 3;
  std::int64_t fan_speed = 128;
  std::uint64_t fan_max = 255;
  std::uint64_t ecc_enabled = 0x1 | 0x4;  // umc, gfx
  std::map<std::uint64_t, rsmi_error_count_t> ecc = {{0x1, {5, 1}}, {0x4, {2, 0}}};
  rsmi_dev_perf_level_t perf_level = 0;  // auto
  // pcie_bw: rsmi_dev_pci_throughput_get's three outputs in order (the two packet counts of the
  // kernel's one-second window, and the maximum payload size); unset: NOT_SUPPORTED (an APU).
  std::optional<std::array<std::uint64_t, 3>> pcie_throughput = std::array<std::uint64_t, 3>{1000, 250, 256};
};

// A process with a KFD context: the GPUs it uses, its VRAM (summed over them, as ROCm SMI reports
// it) and its CU occupancy.
struct Process {
  std::uint32_t pid = 0;
  std::vector<std::uint32_t> gpus;
  std::uint64_t vram_bytes = 0;
  std::uint32_t cu_occupancy = 0;
};

struct Script {
  std::vector<Gpu> gpus = std::vector<Gpu>(1);
  rsmi_version_t version = {5, 2, 3, nullptr};
  std::map<std::string, rsmi_status_t> rc;                           // call -> status for every GPU
  std::map<std::pair<std::string, unsigned>, rsmi_status_t> gpu_rc;  // (call, gpu) -> status
  std::vector<Process> processes;
  // Exports rsmi_dev_pci_throughput_get, which starts the backend's reader thread: off unless a
  // test is about that thread. The thread's reads are counted apart (throughput_reads()), not in
  // `calls`, which only the test's thread touches.
  bool pcie_throughput = false;
  // Exports ROCm 6.0's rsmi_dev_power_get and rsmi_dev_current_socket_power_get, which Debian's
  // 5.2.3 lacks.
  bool power_get = false;
  bool socket_power = false;
  std::map<std::string, int> calls;  // call -> times made
};

Script& script();
void reset();
// Reads of pcie_bw on `gpu` so far, by the backend's reader thread.
int throughput_reads(unsigned gpu);

// The fake's entry points, minus `hidden`.
class FakeRocmSmi final : public SymbolSource {
 public:
  explicit FakeRocmSmi(std::vector<std::string> hidden = {}) : hidden_(std::move(hidden)) {}
  void* symbol(const char* name) const override;
  const std::string& path() const override { return path_; }

 private:
  std::vector<std::string> hidden_;
  std::string path_ = "fake-rocm-smi";
};

}  // namespace gpumeter::fake_rocm
