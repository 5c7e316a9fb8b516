#include "backend/nvml_backend.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <bitset>
#include <cstring>
#include <functional>

namespace gpumeter {

namespace {

// Calls whose NOT_SUPPORTED answer is remembered per device, so an unsupported query costs
// one call at start-up and nothing afterwards.
enum Call : size_t {
  kUtilization, kMemoryV2, kMemoryV1, kTemperature, kPowerUsage, kPowerLimit, kEnergy,
  kClockGraphics, kClockSm, kClockMemory, kClockVideo, kPerformanceState, kFanSpeed,
  kPcieGeneration, kPcieWidth, kPcieReplay, kFieldValues, kClockEvents, kSupportedClockEvents,
  kEccCorrected, kEccUncorrected, kRemappedRows,
  kComputeProcesses, kGraphicsProcesses, kMpsProcesses, kProcessUtilization, kUtilizationSamples, kPowerSamples,
  kCallCount
};

// Errors after which the device (or the whole driver) cannot answer: the collection fails and
// the GPU is reported down. Anything else only leaves the one value out.
bool is_fatal(nvmlReturn_t rc) {
  switch (rc) {
    case NVML_ERROR_UNINITIALIZED:
    case NVML_ERROR_DRIVER_NOT_LOADED:
    case NVML_ERROR_GPU_IS_LOST:
    case NVML_ERROR_RESET_REQUIRED:
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
    case NVML_ERROR_IRQ_ISSUE:
    case NVML_ERROR_TIMEOUT:
    case NVML_ERROR_UNKNOWN:
      return true;
    default:
      return false;
  }
}

// A handle needs re-acquiring after these: the GPU fell off the bus or was reset.
bool invalidates_handle(nvmlReturn_t rc) {
  return rc == NVML_ERROR_GPU_IS_LOST || rc == NVML_ERROR_RESET_REQUIRED;
}

struct ClockEventReason {
  unsigned long long bit;
  const char* label;
};
constexpr std::array<ClockEventReason, 9> kClockEventReasons = {{
    {nvmlClocksEventReasonGpuIdle, "gpu_idle"},
    {nvmlClocksEventReasonApplicationsClocksSetting, "applications_clocks_setting"},
    {nvmlClocksEventReasonSwPowerCap, "sw_power_cap"},
    {nvmlClocksThrottleReasonHwSlowdown, "hw_slowdown"},
    {nvmlClocksEventReasonSyncBoost, "sync_boost"},
    {nvmlClocksEventReasonSwThermalSlowdown, "sw_thermal_slowdown"},
    {nvmlClocksThrottleReasonHwThermalSlowdown, "hw_thermal_slowdown"},
    {nvmlClocksThrottleReasonHwPowerBrakeSlowdown, "hw_power_brake_slowdown"},
    {nvmlClocksEventReasonDisplayClockSetting, "display_clock_setting"},
}};

std::string c_string(const char* buf, size_t size) { return std::string(buf, strnlen(buf, size)); }

std::optional<double> field_as_double(const nvmlFieldValue_t& f) {
  if (f.nvmlReturn != NVML_SUCCESS) return std::nullopt;
  switch (f.valueType) {
    case NVML_VALUE_TYPE_DOUBLE: return f.value.dVal;
    case NVML_VALUE_TYPE_UNSIGNED_INT: return f.value.uiVal;
    case NVML_VALUE_TYPE_UNSIGNED_LONG: return static_cast<double>(f.value.ulVal);
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: return static_cast<double>(f.value.ullVal);
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG: return static_cast<double>(f.value.sllVal);
    case NVML_VALUE_TYPE_SIGNED_INT: return f.value.siVal;
    case NVML_VALUE_TYPE_UNSIGNED_SHORT: return f.value.usVal;
    default: return std::nullopt;
  }
}

}  // namespace

struct NvmlBackend::Device {
  unsigned index = 0;
  // Written by this device's worker; read by the event thread under events_mu_.
  nvmlDevice_t handle = nullptr;
  bool events_registered = false;
  // Only this device's worker touches the fields below.
  std::string uuid;
  std::bitset<kCallCount> unsupported;
  // Sample-buffer cursors: the newest timestamp already returned, per buffer.
  unsigned long long utilization_seen_us = 0;
  unsigned long long power_seen_us = 0;
  unsigned long long process_seen_us = 0;
  std::vector<unsigned> previous_pids;  // sorted; process samples of these are still valid
};

// One collection of one device: stops calling into the driver after the first fatal error
// (a lost GPU answers every call slowly) and remembers NOT_SUPPORTED answers.
class NvmlCollection {
 public:
  NvmlCollection(std::bitset<kCallCount>& unsupported, std::function<std::string(nvmlReturn_t)> text)
      : unsupported_(unsupported), text_(std::move(text)) {}

  // True when `fn` exists and the call should be made.
  template <typename Fn>
  bool wanted(Fn fn, Call c) const {
    return fn != nullptr && !fatal_ && !unsupported_[c];
  }

  // Classifies a return code; true when the value is usable.
  bool ok(Call c, nvmlReturn_t rc, const char* fn_name) {
    if (rc == NVML_SUCCESS) return true;
    if (rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_FUNCTION_NOT_FOUND) {
      unsupported_.set(c);
    } else if (is_fatal(rc) && !fatal_) {
      fatal_ = Error{rc, std::string(fn_name) + ": " + text_(rc)};
    }
    return false;
  }
  const std::optional<Error>& fatal() const { return fatal_; }

 private:
  std::bitset<kCallCount>& unsupported_;
  std::function<std::string(nvmlReturn_t)> text_;
  std::optional<Error> fatal_;
};

std::unique_ptr<NvmlBackend> NvmlBackend::create(const NvmlBackendOptions& options, Logger& log) {
  std::unique_ptr<NvmlBackend> b(new NvmlBackend(log));
  b->status_.backend = "nvml";
  b->status_.vendor = "nvidia";
  auto lib = DynamicLibrary::open_first(options.library_candidates);
  if (!lib) {
    b->status_.detail = "NVML library not found (" + lib.error().message + ")";
    return b;
  }
  if (options.hidden_symbols.empty()) {
    b->library_ = std::move(lib).value();
  } else {
    b->library_ = std::make_unique<FilteredSymbolSource>(std::move(lib).value(), options.hidden_symbols);
  }
  auto syms = NvmlSymbols::resolve(*b->library_);
  if (!syms) {
    b->status_.detail = syms.error().message;
    return b;
  }
  b->symbols_ = std::move(syms).value();
  b->status_.library = b->library_->path();

  nvmlReturn_t rc = b->symbols_.init();
  if (rc != NVML_SUCCESS) {
    b->status_.detail = "nvmlInit_v2 failed: " + b->error_text(rc);
    return b;
  }
  b->initialized_ = true;

  if (b->symbols_.driver_version != nullptr) {
    char buf[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
    if (b->symbols_.driver_version(buf, sizeof buf) == NVML_SUCCESS) {
      b->status_.driver_version = c_string(buf, sizeof buf);
    }
  }
  unsigned count = 0;
  rc = b->symbols_.device_count(&count);
  if (rc != NVML_SUCCESS) {
    b->status_.detail = "nvmlDeviceGetCount_v2 failed: " + b->error_text(rc);
    return b;
  }
  for (unsigned i = 0; i < count; ++i) {
    auto d = std::make_unique<Device>();
    d->index = i;
    b->devices_.push_back(std::move(d));
  }
  b->status_.up = true;
  b->status_.detail = "loaded " + b->status_.library + ", driver " +
                      (b->status_.driver_version.empty() ? "unknown" : b->status_.driver_version) + ", " +
                      std::to_string(count) + " GPU(s)";
  return b;
}

NvmlBackend::NvmlBackend(Logger& log) : log_(log) {}

NvmlBackend::~NvmlBackend() {
  if (event_set_ != nullptr && symbols_.event_set_free != nullptr) symbols_.event_set_free(event_set_);
  if (initialized_) symbols_.shutdown();
}

std::string NvmlBackend::error_text(nvmlReturn_t rc) const {
  std::string s;
  if (symbols_.error_string != nullptr) {
    if (const char* t = symbols_.error_string(rc)) s = t;
  }
  if (s.empty()) s = "NVML error";
  return s + " (" + std::to_string(rc) + ")";
}

Result<nvmlDevice_t> NvmlBackend::acquire(unsigned index) {
  Device& d = *devices_.at(index);
  {
    std::lock_guard lock(events_mu_);
    if (d.handle != nullptr) return d.handle;
  }
  nvmlDevice_t h = nullptr;
  nvmlReturn_t rc;
  const char* how;
  // Indices can shift when a GPU disappears; once the UUID is known it is the stable key.
  if (!d.uuid.empty() && symbols_.handle_by_uuid != nullptr) {
    rc = symbols_.handle_by_uuid(d.uuid.c_str(), &h);
    how = "nvmlDeviceGetHandleByUUID";
  } else {
    rc = symbols_.handle_by_index(index, &h);
    how = "nvmlDeviceGetHandleByIndex_v2";
  }
  if (rc != NVML_SUCCESS) return Error{rc, std::string(how) + ": " + error_text(rc)};
  std::lock_guard lock(events_mu_);
  d.handle = h;
  d.events_registered = false;
  if (event_set_ != nullptr) register_events_locked(index, h);
  return h;
}

void NvmlBackend::drop_handle(unsigned index) {
  std::lock_guard lock(events_mu_);
  devices_.at(index)->handle = nullptr;
}

Result<DeviceIdentity> NvmlBackend::identify(unsigned index) {
  if (index >= devices_.size()) return Error{NVML_ERROR_INVALID_ARGUMENT, "no such GPU"};
  Device& d = *devices_[index];
  auto h = acquire(index);
  if (!h) return h.error();
  DeviceIdentity id;
  id.index = index;
  id.vendor = status_.vendor;
  id.driver_version = status_.driver_version;
  auto read_string = [&](nvmlDeviceGetString_fn fn, unsigned size, std::string& out) -> nvmlReturn_t {
    if (fn == nullptr) return NVML_ERROR_FUNCTION_NOT_FOUND;
    std::vector<char> buf(size, '\0');
    nvmlReturn_t rc = fn(*h, buf.data(), size);
    if (rc == NVML_SUCCESS) out = c_string(buf.data(), size);
    return rc;
  };
  nvmlReturn_t rc = read_string(symbols_.uuid, NVML_DEVICE_UUID_V2_BUFFER_SIZE, id.uuid);
  if (is_fatal(rc)) {
    if (invalidates_handle(rc)) drop_handle(index);
    return Error{rc, "nvmlDeviceGetUUID: " + error_text(rc)};
  }
  read_string(symbols_.name, NVML_DEVICE_NAME_V2_BUFFER_SIZE, id.model);
  read_string(symbols_.serial, NVML_DEVICE_SERIAL_BUFFER_SIZE, id.serial);
  read_string(symbols_.vbios_version, NVML_DEVICE_VBIOS_VERSION_BUFFER_SIZE, id.vbios_version);
  if (symbols_.pci_info != nullptr) {
    nvmlPciInfo_t pci{};
    if (symbols_.pci_info(*h, &pci) == NVML_SUCCESS) id.pci_bus_id = c_string(pci.busId, sizeof pci.busId);
  }
  if (!id.uuid.empty()) d.uuid = id.uuid;
  return id;
}

Result<DeviceReading> NvmlBackend::collect(unsigned index, CollectScope /*scope*/) {
  if (index >= devices_.size()) return Error{NVML_ERROR_INVALID_ARGUMENT, "no such GPU"};
  Device& d = *devices_[index];
  auto handle = acquire(index);
  if (!handle) {
    return handle.error();
  }
  nvmlDevice_t h = *handle;
  const NvmlSymbols& s = symbols_;
  NvmlCollection c(d.unsupported, [this](nvmlReturn_t rc) { return error_text(rc); });
  DeviceReading r;

  if (c.wanted(s.utilization, kUtilization)) {
    nvmlUtilization_t u{};
    if (c.ok(kUtilization, s.utilization(h, &u), "nvmlDeviceGetUtilizationRates")) {
      r.utilization_ratio = u.gpu / 100.0;
      r.memory_utilization_ratio = u.memory / 100.0;
    }
  }
  // v2 first: its "used" excludes driver-reserved memory and matches nvidia-smi.
  auto set_memory = [&r](unsigned long long total, unsigned long long used, unsigned long long free) {
    r.memory_total_bytes = static_cast<double>(total);
    r.memory_used_bytes = static_cast<double>(used);
    r.memory_free_bytes = static_cast<double>(free);
  };
  if (c.wanted(s.memory_v2, kMemoryV2)) {
    nvmlMemory_v2_t m{};
    m.version = nvmlMemory_v2;
    if (c.ok(kMemoryV2, s.memory_v2(h, &m), "nvmlDeviceGetMemoryInfo_v2")) set_memory(m.total, m.used, m.free);
  }
  if (!r.memory_total_bytes && c.wanted(s.memory_v1, kMemoryV1)) {
    nvmlMemory_t m{};
    if (c.ok(kMemoryV1, s.memory_v1(h, &m), "nvmlDeviceGetMemoryInfo")) set_memory(m.total, m.used, m.free);
  }
  if (c.wanted(s.temperature, kTemperature)) {
    unsigned t = 0;
    if (c.ok(kTemperature, s.temperature(h, NVML_TEMPERATURE_GPU, &t), "nvmlDeviceGetTemperature")) {
      r.temperature_celsius.push_back({"gpu", static_cast<double>(t)});
    }
  }
  if (c.wanted(s.power_usage, kPowerUsage)) {
    unsigned mw = 0;
    if (c.ok(kPowerUsage, s.power_usage(h, &mw), "nvmlDeviceGetPowerUsage")) r.power_watts = mw / 1000.0;
  }
  if (c.wanted(s.power_limit, kPowerLimit)) {
    unsigned mw = 0;
    if (c.ok(kPowerLimit, s.power_limit(h, &mw), "nvmlDeviceGetEnforcedPowerLimit")) {
      r.power_limit_watts = mw / 1000.0;
    }
  }
  if (c.wanted(s.total_energy, kEnergy)) {
    unsigned long long mj = 0;
    if (c.ok(kEnergy, s.total_energy(h, &mj), "nvmlDeviceGetTotalEnergyConsumption")) {
      r.energy_joules = static_cast<double>(mj) / 1000.0;
    }
  }
  struct ClockQuery {
    Call call;
    unsigned type;
    const char* label;
  };
  for (const ClockQuery& q : {ClockQuery{kClockGraphics, NVML_CLOCK_GRAPHICS, "graphics"},
                              ClockQuery{kClockSm, NVML_CLOCK_SM, "sm"},
                              ClockQuery{kClockMemory, NVML_CLOCK_MEM, "memory"},
                              ClockQuery{kClockVideo, NVML_CLOCK_VIDEO, "video"}}) {
    if (!c.wanted(s.clock_info, q.call)) continue;
    unsigned mhz = 0;
    if (c.ok(q.call, s.clock_info(h, q.type, &mhz), "nvmlDeviceGetClockInfo")) {
      r.clock_hertz.push_back({q.label, mhz * 1e6});
    }
  }
  if (c.wanted(s.performance_state, kPerformanceState)) {
    unsigned p = NVML_PSTATE_UNKNOWN;
    if (c.ok(kPerformanceState, s.performance_state(h, &p), "nvmlDeviceGetPerformanceState") && p <= 15) {
      r.performance_state = p;
    }
  }
  if (c.wanted(s.fan_speed, kFanSpeed)) {
    unsigned pct = 0;
    if (c.ok(kFanSpeed, s.fan_speed(h, &pct), "nvmlDeviceGetFanSpeed")) r.fan_speed_ratio = pct / 100.0;
  }
  if (c.wanted(s.pcie_link_generation, kPcieGeneration)) {
    unsigned v = 0;
    if (c.ok(kPcieGeneration, s.pcie_link_generation(h, &v), "nvmlDeviceGetCurrPcieLinkGeneration")) {
      r.pcie_link_generation = v;
    }
  }
  if (c.wanted(s.pcie_link_width, kPcieWidth)) {
    unsigned v = 0;
    if (c.ok(kPcieWidth, s.pcie_link_width(h, &v), "nvmlDeviceGetCurrPcieLinkWidth")) r.pcie_link_width = v;
  }
  if (c.wanted(s.pcie_replay_counter, kPcieReplay)) {
    unsigned v = 0;
    if (c.ok(kPcieReplay, s.pcie_replay_counter(h, &v), "nvmlDeviceGetPcieReplayCounter")) {
      r.pcie_replay_errors = v;
    }
  }
  if (c.wanted(s.field_values, kFieldValues)) {
    // One call for the values only the field API offers; each field has its own status.
    std::array<nvmlFieldValue_t, 3> f{};
    f[0].fieldId = NVML_FI_DEV_MEMORY_TEMP;
    f[1].fieldId = NVML_FI_DEV_PCIE_COUNT_TX_BYTES;
    f[2].fieldId = NVML_FI_DEV_PCIE_COUNT_RX_BYTES;
    if (c.ok(kFieldValues, s.field_values(h, static_cast<int>(f.size()), f.data()), "nvmlDeviceGetFieldValues")) {
      if (auto v = field_as_double(f[0])) r.temperature_celsius.push_back({"memory", *v});
      r.pcie_transmit_bytes = field_as_double(f[1]);
      r.pcie_receive_bytes = field_as_double(f[2]);
    }
  }
  if (c.wanted(s.clock_event_reasons, kClockEvents)) {
    unsigned long long current = 0;
    if (c.ok(kClockEvents, s.clock_event_reasons(h, &current), "nvmlDeviceGetCurrentClocksEventReasons")) {
      unsigned long long supported = ~0ULL;
      if (c.wanted(s.supported_clock_event_reasons, kSupportedClockEvents)) {
        unsigned long long m = 0;
        if (c.ok(kSupportedClockEvents, s.supported_clock_event_reasons(h, &m),
                 "nvmlDeviceGetSupportedClocksEventReasons")) {
          supported = m;
        }
      }
      for (const auto& reason : kClockEventReasons) {
        if ((supported & reason.bit) == 0) continue;
        r.clock_event_active.push_back({reason.label, (current & reason.bit) != 0 ? 1.0 : 0.0});
      }
    }
  }
  struct EccQuery {
    Call call;
    unsigned type;
    const char* label;
  };
  for (const EccQuery& q : {EccQuery{kEccCorrected, NVML_MEMORY_ERROR_TYPE_CORRECTED, "corrected"},
                            EccQuery{kEccUncorrected, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, "uncorrected"}}) {
    if (!c.wanted(s.total_ecc_errors, q.call)) continue;
    unsigned long long n = 0;
    if (c.ok(q.call, s.total_ecc_errors(h, q.type, NVML_VOLATILE_ECC, &n), "nvmlDeviceGetTotalEccErrors")) {
      r.ecc_errors.push_back({q.label, static_cast<double>(n)});
    }
  }
  if (c.wanted(s.remapped_rows, kRemappedRows)) {
    unsigned corr = 0, unc = 0, pending = 0, failure = 0;
    if (c.ok(kRemappedRows, s.remapped_rows(h, &corr, &unc, &pending, &failure), "nvmlDeviceGetRemappedRows")) {
      r.remapped_rows = {{"correctable", static_cast<double>(corr)},
                         {"uncorrectable", static_cast<double>(unc)},
                         {"pending", static_cast<double>(pending)},
                         {"failure", static_cast<double>(failure)}};
    }
  }

  collect_usage(d, h, c, r.usage);

  if (c.fatal()) {
    if (invalidates_handle(c.fatal()->code)) drop_handle(index);
    return *c.fatal();
  }
  return r;
}

namespace {

// Reads one process list: size query, then a call with headroom, growing while the list grows
// between calls. Walks the records with the stride of the generation that answered.
nvmlReturn_t read_process_list(const nvmlDeviceGetProcessesRaw_fn (&fns)[3], unsigned v3_record_size,
                               nvmlDevice_t h, unsigned type_bit, std::vector<GpuProcess>& out) {
  int generation = -1;
  for (int i = 0; i < 3; ++i) {
    if (fns[i] != nullptr) {
      generation = i;
      break;
    }
  }
  if (generation < 0) return NVML_ERROR_FUNCTION_NOT_FOUND;
  const unsigned record = generation == 0 ? v3_record_size : generation == 1 ? 24 : 16;
  unsigned count = 0;
  nvmlReturn_t rc = fns[generation](h, &count, nullptr);
  if (rc == NVML_SUCCESS) return rc;  // nothing running
  std::vector<unsigned char> buf;
  for (int attempt = 0; attempt < 4 && rc == NVML_ERROR_INSUFFICIENT_SIZE; ++attempt) {
    count += 8 + count / 4;
    buf.assign(static_cast<size_t>(count) * record, 0);
    rc = fns[generation](h, &count, buf.data());
  }
  if (rc != NVML_SUCCESS) return rc;
  for (unsigned i = 0; i < count; ++i) {
    const unsigned char* rec = buf.data() + static_cast<size_t>(i) * record;
    unsigned pid;
    unsigned long long mem;
    std::memcpy(&pid, rec + offsetof(nvmlProcessInfo_t, pid), sizeof pid);
    std::memcpy(&mem, rec + offsetof(nvmlProcessInfo_t, usedGpuMemory), sizeof mem);
    auto it = std::find_if(out.begin(), out.end(), [pid](const GpuProcess& p) { return p.pid == pid; });
    if (it == out.end()) it = out.insert(out.end(), GpuProcess{pid, std::nullopt, 0});
    it->types |= type_bit;
    // ~0 is NVML_VALUE_NOT_AVAILABLE; a pid in two lists reports the same allocation twice.
    if (mem != ~0ULL) it->memory_bytes = std::max(it->memory_bytes.value_or(0), static_cast<double>(mem));
  }
  return NVML_SUCCESS;
}

double sample_as_double(unsigned type, const nvmlValue_t& v) {
  switch (type) {
    case NVML_VALUE_TYPE_DOUBLE: return v.dVal;
    case NVML_VALUE_TYPE_UNSIGNED_LONG: return static_cast<double>(v.ulVal);
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: return static_cast<double>(v.ullVal);
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG: return static_cast<double>(v.sllVal);
    case NVML_VALUE_TYPE_SIGNED_INT: return v.siVal;
    case NVML_VALUE_TYPE_UNSIGNED_SHORT: return v.usVal;
    default: return v.uiVal;
  }
}

}  // namespace

void NvmlBackend::collect_usage(Device& d, nvmlDevice_t h, NvmlCollection& c, UsageReading& u) {
  const NvmlSymbols& s = symbols_;
  // Processes: compute, graphics and MPS lists merged by pid.
  std::vector<GpuProcess> procs;
  bool any_list = false;
  struct List {
    const nvmlDeviceGetProcessesRaw_fn (&fns)[3];
    Call call;
    unsigned bit;
    const char* name;
  };
  for (const List& l : {List{s.compute_processes, kComputeProcesses, kProcessCompute,
                             "nvmlDeviceGetComputeRunningProcesses_v3"},
                        List{s.graphics_processes, kGraphicsProcesses, kProcessGraphics,
                             "nvmlDeviceGetGraphicsRunningProcesses_v3"},
                        List{s.mps_processes, kMpsProcesses, kProcessMps, "nvmlDeviceGetMPSComputeRunningProcesses_v3"}}) {
    if (c.fatal() || d.unsupported[l.call]) continue;
    if (c.ok(l.call, read_process_list(l.fns, s.v3_process_record_size, h, l.bit, procs), l.name)) any_list = true;
  }
  std::vector<unsigned> pids;
  if (any_list) {
    for (const auto& p : procs) pids.push_back(p.pid);
    std::sort(pids.begin(), pids.end());
    u.processes = std::move(procs);
  }

  // Device sample buffers: utilization and power, only what is newer than last time.
  auto read_samples = [&](Call call, unsigned type, unsigned long long& seen, double scale, bool& supported,
                          std::vector<TimedSample>& out) {
    if (!c.wanted(s.samples, call)) return;
    unsigned value_type = 0;
    unsigned count = 0;
    nvmlReturn_t rc = s.samples(h, type, seen, &value_type, &count, nullptr);
    if (rc == NVML_ERROR_NOT_FOUND) {
      supported = true;  // no new samples yet
      return;
    }
    if ((rc != NVML_SUCCESS && rc != NVML_ERROR_INSUFFICIENT_SIZE) || count == 0) {
      c.ok(call, rc, "nvmlDeviceGetSamples");
      if (rc == NVML_SUCCESS) supported = true;
      return;
    }
    std::vector<nvmlSample_t> buf(count + 8);
    count = static_cast<unsigned>(buf.size());
    rc = s.samples(h, type, seen, &value_type, &count, buf.data());
    if (rc == NVML_ERROR_NOT_FOUND) {
      supported = true;
      return;
    }
    if (!c.ok(call, rc, "nvmlDeviceGetSamples")) return;
    supported = true;
    for (unsigned i = 0; i < count && i < buf.size(); ++i) {
      const auto ts = buf[i].timeStamp;
      if (ts <= seen) continue;  // drivers have been seen to repeat old samples
      out.push_back({static_cast<std::int64_t>(ts), sample_as_double(value_type, buf[i].sampleValue) * scale});
    }
    std::sort(out.begin(), out.end(), [](const TimedSample& a, const TimedSample& b) {
      return a.timestamp_us < b.timestamp_us;
    });
    if (!out.empty()) seen = static_cast<unsigned long long>(out.back().timestamp_us);
  };
  read_samples(kUtilizationSamples, NVML_GPU_UTILIZATION_SAMPLES, d.utilization_seen_us, 0.01,
               u.utilization_samples_supported, u.utilization_samples);
  read_samples(kPowerSamples, NVML_TOTAL_POWER_SAMPLES, d.power_seen_us, 0.001, u.power_samples_supported,
               u.power_samples);

  // Per-process utilization, windowed by the newest timestamp seen on this GPU (not per pid),
  // keeping only sane samples of processes that are (or just were) on the GPU.
  if (c.wanted(s.process_utilization, kProcessUtilization)) {
    unsigned count = 0;
    nvmlReturn_t rc = s.process_utilization(h, nullptr, &count, d.process_seen_us);
    std::vector<nvmlProcessUtilizationSample_t> buf;
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE || (rc == NVML_SUCCESS && count > 0)) {
      buf.resize(count + 8);
      count = static_cast<unsigned>(buf.size());
      rc = s.process_utilization(h, buf.data(), &count, d.process_seen_us);
    }
    if (rc == NVML_ERROR_NOT_FOUND || rc == NVML_SUCCESS) {
      u.process_samples_supported = true;
      if (rc == NVML_ERROR_NOT_FOUND) count = 0;
      unsigned long long newest = d.process_seen_us;
      for (unsigned i = 0; i < count && i < buf.size(); ++i) {
        const auto& smp = buf[i];
        if (smp.timeStamp <= d.process_seen_us || smp.smUtil > 100 || smp.memUtil > 100) continue;
        bool known = std::binary_search(pids.begin(), pids.end(), smp.pid) ||
                     std::binary_search(d.previous_pids.begin(), d.previous_pids.end(), smp.pid);
        if (!known) continue;
        u.process_samples.push_back({smp.pid, static_cast<std::int64_t>(smp.timeStamp), smp.smUtil / 100.0,
                                     smp.memUtil / 100.0});
        newest = std::max(newest, smp.timeStamp);
      }
      d.process_seen_us = newest;
      std::sort(u.process_samples.begin(), u.process_samples.end(),
                [](const ProcessSample& a, const ProcessSample& b) { return a.timestamp_us < b.timestamp_us; });
    } else {
      c.ok(kProcessUtilization, rc, "nvmlDeviceGetProcessUtilization");
    }
  }
  if (any_list) d.previous_pids = std::move(pids);
}

bool NvmlBackend::supports_events() const {
  return status_.up && symbols_.event_set_create != nullptr && symbols_.register_events != nullptr &&
         symbols_.event_set_wait != nullptr && symbols_.event_set_free != nullptr;
}

void NvmlBackend::register_events_locked(unsigned index, nvmlDevice_t handle) {
  Device& d = *devices_[index];
  if (d.events_registered) return;
  unsigned long long mask = nvmlEventTypeXidCriticalError;
  if (symbols_.supported_event_types != nullptr) {
    unsigned long long supported = 0;
    if (symbols_.supported_event_types(handle, &supported) == NVML_SUCCESS) mask &= supported;
  }
  if (mask == 0) return;
  nvmlReturn_t rc = symbols_.register_events(handle, mask, event_set_);
  if (rc == NVML_SUCCESS) {
    d.events_registered = true;
  } else {
    log_.warn("cannot watch Xid events", {{"gpu", std::to_string(index)}, {"err", error_text(rc)}});
  }
}

Result<std::optional<DeviceEvent>> NvmlBackend::wait_event(std::chrono::milliseconds timeout) {
  if (!supports_events()) return Error{NVML_ERROR_NOT_SUPPORTED, "NVML events are not available"};
  nvmlEventSet_t set;
  {
    std::lock_guard lock(events_mu_);
    if (event_set_ == nullptr) {
      nvmlReturn_t rc = symbols_.event_set_create(&event_set_);
      if (rc != NVML_SUCCESS) {
        event_set_ = nullptr;
        return Error{rc, "nvmlEventSetCreate: " + error_text(rc)};
      }
    }
    for (auto& d : devices_) {
      if (d->handle != nullptr) register_events_locked(d->index, d->handle);
    }
    set = event_set_;
  }
  nvmlEventData_t data{};
  nvmlReturn_t rc = symbols_.event_set_wait(set, &data, static_cast<unsigned>(timeout.count()));
  if (rc == NVML_ERROR_TIMEOUT) return std::optional<DeviceEvent>{};
  if (rc != NVML_SUCCESS) return Error{rc, "nvmlEventSetWait_v2: " + error_text(rc)};
  if ((data.eventType & nvmlEventTypeXidCriticalError) == 0) return std::optional<DeviceEvent>{};
  std::lock_guard lock(events_mu_);
  for (auto& d : devices_) {
    if (d->handle == data.device) {
      return std::optional<DeviceEvent>{DeviceEvent{d->index, DeviceEventKind::kXid, data.eventData}};
    }
  }
  log_.warn("Xid event for an unknown device", {{"xid", std::to_string(data.eventData)}});
  return std::optional<DeviceEvent>{};
}

}  // namespace gpumeter
