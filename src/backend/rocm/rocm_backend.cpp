#include "backend/rocm/rocm_backend.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "backend/rocm/rocm_internal.h"
#include "backend/rocm/rocm_values.h"
#include "util/file_read.h"

namespace gpumeter {

namespace {

template <typename Fn>
void resolve(const SymbolSource& lib, const char* name, Fn& out, std::vector<std::string>& missing) {
  out = reinterpret_cast<Fn>(lib.symbol(name));
  if (out == nullptr) missing.emplace_back(name);
}

// Whether the DRM class directory has an AMD card: a card<N> whose device's vendor is 0x1002, as
// ROCm SMI itself discovers its GPUs (docs/rocm-behaviour.md).
bool has_amd_gpu(const std::string& drm_class_dir) {
  std::error_code ec;
  for (std::filesystem::directory_iterator it(drm_class_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() < 5 || name.compare(0, 4, "card") != 0 ||
        name.find_first_not_of("0123456789", 4) != std::string::npos) {
      continue;  // a connector (card0-DP-1), a render node
    }
    auto vendor = read_regular_file(it->path().string() + "/device/vendor", {.max_bytes = 64, .truncate = true});
    if (vendor && vendor->starts_with("0x1002")) return true;
  }
  return false;
}

// How long a worker may be in the process calls before the others stop waiting for it.
constexpr std::int64_t kProcessCallsStuckUs = 500'000;

std::int64_t wall_now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

RocmBackend::RocmBackend(Logger& log) : log_(log), sym_(std::make_unique<Symbols>()) {
  status_.backend = "rocm_smi";
  status_.vendor = "amd";
}

RocmBackend::~RocmBackend() {
  pcie_.reset();  // its thread calls into the library
  if (initialized_ && sym_->shut_down != nullptr) sym_->shut_down();
}

std::unique_ptr<RocmBackend> RocmBackend::create(const RocmBackendOptions& options, Logger& log) {
  // Without an AMD GPU the library is not even initialized: nothing is wrong, and rsmi_init would
  // print its own lines to stderr where the DRM tree is missing (a container without one).
  if (!has_amd_gpu(options.drm_class_dir)) {
    std::unique_ptr<RocmBackend> b(new RocmBackend(log));
    b->status_.absent = true;
    b->status_.detail = "no AMD GPU in " + options.drm_class_dir;
    return b;
  }
  auto lib = DynamicLibrary::open_first(options.library_candidates);
  if (!lib) {
    std::unique_ptr<RocmBackend> b(new RocmBackend(log));
    b->status_.detail = "AMD GPUs in " + options.drm_class_dir + ", but no ROCm SMI library: " + lib.error().message;
    return b;
  }
  std::unique_ptr<SymbolSource> source = std::move(lib).value();
  if (!options.hidden_symbols.empty()) {
    source = std::make_unique<FilteredSymbolSource>(std::move(source), options.hidden_symbols);
  }
  return create(std::move(source), log);
}

std::unique_ptr<RocmBackend> RocmBackend::create(std::unique_ptr<SymbolSource> library, Logger& log) {
  std::unique_ptr<RocmBackend> b(new RocmBackend(log));
  b->start(std::move(library));
  return b;
}

void RocmBackend::start(std::unique_ptr<SymbolSource> library) {
  library_ = std::move(library);
  const SymbolSource& lib = *library_;
  std::vector<std::string> required_missing;
  resolve(lib, "rsmi_init", sym_->init, required_missing);
  resolve(lib, "rsmi_shut_down", sym_->shut_down, required_missing);
  resolve(lib, "rsmi_num_monitor_devices", sym_->num_devices, required_missing);
  if (!required_missing.empty()) {
    std::string names;
    for (const auto& n : required_missing) names += (names.empty() ? "" : ", ") + n;
    status_.detail = fmt::format("{} is not a ROCm SMI library (no {})", lib.path(), names);
    return;
  }
  Symbols& s = *sym_;
  resolve(lib, "rsmi_version_get", s.version, missing_);
  resolve(lib, "rsmi_version_str_get", s.version_str, missing_);
  resolve(lib, "rsmi_status_string", s.status_string, missing_);
  resolve(lib, "rsmi_dev_name_get", s.name, missing_);
  resolve(lib, "rsmi_dev_serial_number_get", s.serial, missing_);
  resolve(lib, "rsmi_dev_vbios_version_get", s.vbios, missing_);
  resolve(lib, "rsmi_dev_unique_id_get", s.unique_id, missing_);
  resolve(lib, "rsmi_dev_pci_id_get", s.pci_id, missing_);
  resolve(lib, "rsmi_dev_busy_percent_get", s.busy, missing_);
  resolve(lib, "rsmi_dev_memory_busy_percent_get", s.memory_busy, missing_);
  resolve(lib, "rsmi_dev_memory_total_get", s.memory_total, missing_);
  resolve(lib, "rsmi_dev_memory_usage_get", s.memory_usage, missing_);
  resolve(lib, "rsmi_dev_temp_metric_get", s.temperature, missing_);
  resolve(lib, "rsmi_dev_power_get", s.power, missing_);
  resolve(lib, "rsmi_dev_current_socket_power_get", s.socket_power, missing_);
  resolve(lib, "rsmi_dev_power_ave_get", s.power_ave, missing_);
  resolve(lib, "rsmi_dev_power_cap_get", s.power_cap, missing_);
  resolve(lib, "rsmi_dev_energy_count_get", s.energy, missing_);
  resolve(lib, "rsmi_dev_gpu_clk_freq_get", s.clock, missing_);
  resolve(lib, "rsmi_dev_pci_bandwidth_get", s.pcie_bandwidth, missing_);
  resolve(lib, "rsmi_dev_pci_replay_counter_get", s.replay, missing_);
  resolve(lib, "rsmi_dev_fan_speed_get", s.fan, missing_);
  resolve(lib, "rsmi_dev_fan_speed_max_get", s.fan_max, missing_);
  resolve(lib, "rsmi_dev_ecc_enabled_get", s.ecc_enabled, missing_);
  resolve(lib, "rsmi_dev_ecc_count_get", s.ecc_count, missing_);
  resolve(lib, "rsmi_dev_perf_level_get", s.perf_level, missing_);
  resolve(lib, "rsmi_dev_pci_throughput_get", s.pcie_throughput, missing_);
  resolve(lib, "rsmi_dev_gpu_metrics_info_get", s.gpu_metrics, missing_);
  resolve(lib, "rsmi_compute_process_info_get", s.process_list, missing_);
  resolve(lib, "rsmi_compute_process_info_by_pid_get", s.process_by_pid, missing_);
  resolve(lib, "rsmi_compute_process_gpus_get", s.process_gpus, missing_);

  if (rsmi_status_t rc = s.init(0); rc != RSMI_STATUS_SUCCESS) {
    status_.detail = error_text("rsmi_init", rc);
    return;
  }
  initialized_ = true;
  // The ABI: rsmi_frequencies_t gained a leading bool in ROCm 6.0. 5.x reports major 5; Debian's
  // 5.2.3 build and ROCm 7.2 both report 1, told apart by rsmi_dev_activity_metric_get, which
  // only 6.x and later export (btop does the same).
  rsmi_version_t v{};
  if (s.version != nullptr && s.version(&v) == RSMI_STATUS_SUCCESS) {
    if (v.major == 5) {
      abi_ = "5";
    } else if (v.major == 6 || v.major == 7) {
      abi_ = "6";
    } else {
      abi_ = lib.symbol("rsmi_dev_activity_metric_get") != nullptr ? "6" : "5";
    }
  } else {
    abi_ = lib.symbol("rsmi_dev_activity_metric_get") != nullptr ? "6" : "5";
  }
  std::uint32_t count = 0;
  if (rsmi_status_t rc = s.num_devices(&count); rc != RSMI_STATUS_SUCCESS) {
    status_.detail = error_text("rsmi_num_monitor_devices", rc);
    return;
  }
  if (count == 0) {
    status_.detail = fmt::format("{} found no AMD GPU", lib.path());
    return;
  }
  if (s.version_str != nullptr) {
    char buf[256] = {};
    if (s.version_str(RSMI_SW_COMP_DRIVER, buf, sizeof buf) == RSMI_STATUS_SUCCESS) status_.driver_version = buf;
  }
  device_count_ = count;
  devices_.resize(count);
  if (s.pcie_throughput != nullptr) {
    // The kernel counts for one second inside each read (msleep(1000) in amdgpu's
    // *_get_pcie_usage), so a round over N GPUs takes N seconds on real hardware; a round that
    // took less (a simulated tree) is followed by a pause, so that no GPU is asked more than once
    // a second.
    pcie_ = std::make_unique<ThroughputReader>(
        ThroughputReaderOptions{.devices = count, .min_round = std::chrono::seconds(1)},
        [this](unsigned d) { return read_pcie_throughput(d); });
  }
  status_.up = true;
  status_.library = lib.path();
  status_.detail =
      fmt::format("{} (ROCm SMI {}.{}.{}, ABI {}), {} AMD GPUs", lib.path(), v.major, v.minor, v.patch, abi_, count);
}

BackendStatus RocmBackend::status() const {
  std::lock_guard lock(status_mu_);
  return status_;
}

std::string RocmBackend::error_text(const char* call, int rc) const {
  const char* text = nullptr;
  if (sym_->status_string != nullptr) sym_->status_string(rc, &text);
  return fmt::format("{}: {} ({})", call, text != nullptr ? text : "ROCm SMI error", rc);
}

void RocmBackend::note_call_error(unsigned device, const char* call, int rc) {
  if (rc == RSMI_STATUS_NOT_SUPPORTED || rc == RSMI_STATUS_NOT_YET_IMPLEMENTED) return;
  std::lock_guard lock(status_mu_);
  ++status_.counters.call_errors[{device, call, fmt::format("rsmi_{}", rc)}];
}

Result<std::optional<DeviceEvent>> RocmBackend::wait_event(std::chrono::milliseconds) {
  return Error{RSMI_STATUS_NOT_SUPPORTED, "the ROCm SMI backend watches no events"};
}

Result<DeviceIdentity> RocmBackend::identify(unsigned device) {
  if (device >= device_count_) return Error{RSMI_STATUS_INVALID_ARGS, fmt::format("no AMD GPU {}", device)};
  const Symbols& s = *sym_;
  DeviceIdentity id;
  id.index = device;
  id.vendor = "amd";
  id.driver_version = status().driver_version;
  char buf[256] = {};
  if (s.name != nullptr && s.name(device, buf, sizeof buf) == RSMI_STATUS_SUCCESS) id.model = buf;
  std::memset(buf, 0, sizeof buf);
  if (s.serial != nullptr && s.serial(device, buf, sizeof buf) == RSMI_STATUS_SUCCESS) id.serial = buf;
  std::memset(buf, 0, sizeof buf);
  if (s.vbios != nullptr && s.vbios(device, buf, sizeof buf) == RSMI_STATUS_SUCCESS) id.vbios_version = buf;
  std::uint64_t bdf = 0;
  if (s.pci_id != nullptr && s.pci_id(device, &bdf) == RSMI_STATUS_SUCCESS) {
    // (domain << 32) | (bus << 8) | (device << 3) | function
    id.pci_bus_id =
        fmt::format("{:04x}:{:02x}:{:02x}.{:x}", bdf >> 32, (bdf >> 8) & 0xFF, (bdf >> 3) & 0x1F, bdf & 0x7);
  }
  std::uint64_t uid = 0;
  if (s.unique_id != nullptr && s.unique_id(device, &uid) == RSMI_STATUS_SUCCESS && uid != 0) {
    id.uuid = fmt::format("0x{:x}", uid);  // as rocm-smi prints its Unique ID
  } else if (!id.pci_bus_id.empty()) {
    id.uuid = "amd-" + id.pci_bus_id;  // GPUs without a unique id (consumer boards) by their slot
  } else {
    return Error{RSMI_STATUS_NOT_SUPPORTED,
                 fmt::format("AMD GPU {} has neither a unique id nor a PCI address", device)};
  }
  return id;
}

ThroughputRead RocmBackend::read_pcie_throughput(unsigned device) {
  std::uint64_t first = 0, second = 0, mps = 0;
  const rsmi_status_t rc = sym_->pcie_throughput(device, &first, &second, &mps);
  ThroughputRead read;
  if (rc == RSMI_STATUS_SUCCESS) {
    if (auto rates = rocm::pcie_rates(first, second, mps)) {
      read.rates = {rates->transmit_bytes_per_second, rates->receive_bytes_per_second};
    }
  } else if (rc == RSMI_STATUS_NOT_SUPPORTED || rc == RSMI_STATUS_NOT_YET_IMPLEMENTED) {
    read.unsupported = true;
  } else {
    note_call_error(device, "rsmi_dev_pci_throughput_get", rc);
  }
  return read;
}

void RocmBackend::collect_usage(unsigned device, DeviceReading& r) {
  // The ledger integrates an AMD GPU on the wall clock between its readings: a step of that
  // clock moves the ledger's cursor, as on NVIDIA GPUs, rather than being billed or lost.
  r.usage.clock_step_us = devices_[device].clock_steps.observe(wall_now_us(), std::chrono::steady_clock::now());
  r.runs.push_back(timed_run(CollectorId::kProcesses, [&] { return read_processes(device, r); }));
}

bool RocmBackend::read_processes(unsigned device, DeviceReading& r) {
  const Symbols& s = *sym_;
  if (s.process_list == nullptr || s.process_gpus == nullptr || s.process_by_pid == nullptr) return true;
  DeviceState& state = devices_[device];
  const std::int64_t now = wall_now_us();
  // One worker at a time in the process calls (see below). A worker that has been in them for
  // over half a second is stuck in a read (a hung GPU's KFD files): the others then collect without
  // processes rather than wait behind it, so one hung GPU does not stall every AMD GPU.
  std::unique_lock lock(processes_mu_, std::defer_lock);
  while (!lock.try_lock_for(std::chrono::milliseconds(50))) {
    const std::int64_t entered = processes_entered_us_.load();
    if (entered != 0 && wall_now_us() - entered > kProcessCallsStuckUs) return false;
  }
  processes_entered_us_.store(wall_now_us());
  struct Leave {  // leaves the process calls on every path out
    std::atomic<std::int64_t>& entered;
    std::unique_lock<std::timed_mutex>& lock;
    void now() {
      if (!lock.owns_lock()) return;
      entered.store(0);
      lock.unlock();
    }
    ~Leave() { now(); }
  } leave{processes_entered_us_, lock};
  std::uint32_t n = 0;
  if (s.process_list(nullptr, &n) != RSMI_STATUS_SUCCESS) return false;
  std::vector<rsmi_process_info_t> list(n + 8);  // room for processes that start meanwhile
  n = static_cast<std::uint32_t>(list.size());
  if (rsmi_status_t rc = s.process_list(list.data(), &n);
      rc != RSMI_STATUS_SUCCESS && rc != RSMI_STATUS_INSUFFICIENT_SIZE) {
    note_call_error(device, "rsmi_compute_process_info_get", rc);
    return false;
  }
  list.resize(std::min<std::size_t>(n, list.size()));
  std::vector<GpuProcess> processes;
  std::vector<std::pair<unsigned, std::uint32_t>> occupancy;  // pid, CUs
  {
    // One worker at a time in the process calls: they walk KFD's global process table, and
    // Debian's 5.2.3 library was seen to crash (a null KFD node in
    // rsmi_compute_process_gpus_get) when workers asked at once while processes came and went.
    // A pid's GPUs are asked once, when it first appears, not at every collection.
    std::map<unsigned, std::vector<std::uint32_t>> known;
    for (const rsmi_process_info_t& p : list) {
      auto it = process_gpus_.find(p.process_id);
      if (it == process_gpus_.end()) {
        std::uint32_t gpus[64];
        std::uint32_t count = 64;
        if (s.process_gpus(p.process_id, gpus, &count) != RSMI_STATUS_SUCCESS) continue;
        it = process_gpus_
                 .emplace(p.process_id, std::vector<std::uint32_t>(gpus, gpus + std::min<std::uint32_t>(count, 64)))
                 .first;
      }
      known.insert(*it);
      const std::vector<std::uint32_t>& on = it->second;
      if (std::find(on.begin(), on.end(), device) == on.end()) continue;
      rsmi_process_info_t info{};
      if (s.process_by_pid(p.process_id, &info) != RSMI_STATUS_SUCCESS) continue;
      GpuProcess gp;
      gp.pid = p.process_id;
      gp.types = kProcessCompute;
      // ROCm SMI sums a process's VRAM over its GPUs: it is this GPU's only when it uses one.
      if (on.size() == 1) gp.memory_bytes = static_cast<double>(info.vram_usage);
      processes.push_back(gp);
      occupancy.emplace_back(p.process_id, info.cu_occupancy);
    }
    process_gpus_ = std::move(known);  // forget pids that are gone (a pid can be reused)
  }
  leave.now();
  r.usage.processes = std::move(processes);
  // Each process's share of the busy time is sampled from its CU occupancy at this instant
  // (ROCm compute records no engine time; docs/rocm-behaviour.md), applied since the previous
  // query.
  std::uint64_t total = 0;
  for (const auto& [pid, cus] : occupancy) total += cus;
  r.usage.process_samples_supported = true;
  if (state.last_usage_us != 0 && total > 0 && r.device.utilization_ratio) {
    for (const auto& [pid, cus] : occupancy) {
      ProcessSample smp;
      smp.pid = pid;
      smp.timestamp_us = now;
      smp.covers_from_us = state.last_usage_us;
      smp.sm_ratio = *r.device.utilization_ratio * static_cast<double>(cus) / static_cast<double>(total);
      r.usage.process_samples.push_back(smp);
    }
  }
  state.last_usage_us = now;
  return true;
}

}  // namespace gpumeter
