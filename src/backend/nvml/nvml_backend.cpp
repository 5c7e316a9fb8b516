#include "backend/nvml/nvml_backend.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <thread>

#include "backend/nvml/nvml_internal.h"

namespace gpumeter {

using namespace std::chrono_literals;

bool is_fatal(nvmlReturn_t rc) {
  switch (rc) {
    case NVML_ERROR_UNINITIALIZED:
    case NVML_ERROR_DRIVER_NOT_LOADED:
    case NVML_ERROR_GPU_IS_LOST:
    case NVML_ERROR_GPU_NOT_FOUND:
    case NVML_ERROR_RESET_REQUIRED:
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
    case NVML_ERROR_IRQ_ISSUE:
      return true;
    default:
      return false;
  }
}

std::string error_name(nvmlReturn_t rc) {
  switch (rc) {
    case NVML_ERROR_UNINITIALIZED:
      return "uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "invalid_argument";
    case NVML_ERROR_NOT_SUPPORTED:
      return "not_supported";
    case NVML_ERROR_NO_PERMISSION:
      return "no_permission";
    case NVML_ERROR_ALREADY_INITIALIZED:
      return "already_initialized";
    case NVML_ERROR_NOT_FOUND:
      return "not_found";
    case NVML_ERROR_INSUFFICIENT_SIZE:
      return "insufficient_size";
    case NVML_ERROR_INSUFFICIENT_POWER:
      return "insufficient_power";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "driver_not_loaded";
    case NVML_ERROR_TIMEOUT:
      return "timeout";
    case NVML_ERROR_IRQ_ISSUE:
      return "irq_issue";
    case NVML_ERROR_LIBRARY_NOT_FOUND:
      return "library_not_found";
    case NVML_ERROR_FUNCTION_NOT_FOUND:
      return "function_not_found";
    case NVML_ERROR_CORRUPTED_INFOROM:
      return "corrupted_inforom";
    case NVML_ERROR_GPU_IS_LOST:
      return "gpu_is_lost";
    case NVML_ERROR_RESET_REQUIRED:
      return "reset_required";
    case NVML_ERROR_OPERATING_SYSTEM:
      return "operating_system";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
      return "lib_rm_version_mismatch";
    case NVML_ERROR_IN_USE:
      return "in_use";
    case NVML_ERROR_MEMORY:
      return "memory";
    case NVML_ERROR_NO_DATA:
      return "no_data";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
      return "argument_version_mismatch";
    case NVML_ERROR_DEPRECATED:
      return "deprecated";
    case NVML_ERROR_NOT_READY:
      return "not_ready";
    case NVML_ERROR_GPU_NOT_FOUND:
      return "gpu_not_found";
    case NVML_ERROR_INVALID_STATE:
      return "invalid_state";
    case NVML_ERROR_UNKNOWN:
      return "unknown";
    default:
      return "error_" + std::to_string(rc);
  }
}

bool NvmlCollection::ok(Call c, nvmlReturn_t rc, const char* fn_name) {
  if (rc == NVML_SUCCESS) {
    answered_ = true;
    return true;
  }
  if (rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_FUNCTION_NOT_FOUND) {
    unsupported_.set(c);
    answered_ = true;
  } else if (rc == NVML_ERROR_NO_PERMISSION) {
    unsupported_.set(c);
    answered_ = true;
    not_permitted_.emplace_back(fn_name);
  } else if (is_fatal(rc)) {
    if (!fatal_) fatal_ = Error{rc, std::string(fn_name) + ": " + text_(rc)};
  } else {
    call_errors_.emplace_back(fn_name, rc);
    if (!first_error_) first_error_ = Error{rc, std::string(fn_name) + ": " + text_(rc)};
  }
  return false;
}

std::optional<Error> NvmlCollection::failure() const {
  if (fatal_) return fatal_;
  if (!answered_ && first_error_) return first_error_;
  return std::nullopt;
}

namespace {

std::string c_string(const char* buf, size_t size) { return std::string(buf, strnlen(buf, size)); }

std::string loaded_detail(const BackendStatus& s, unsigned count) {
  return "loaded " + s.library + ", driver " + (s.driver_version.empty() ? "unknown" : s.driver_version) + ", " +
         std::to_string(count) + " GPU(s)";
}

}  // namespace

std::optional<double> field_as_double(const nvmlFieldValue_t& f, NvmlCollection& c) {
  if (f.nvmlReturn != NVML_SUCCESS) return std::nullopt;
  switch (f.valueType) {
    case NVML_VALUE_TYPE_DOUBLE:
      return c.finite(f.value.dVal, "nvmlDeviceGetFieldValues");
    case NVML_VALUE_TYPE_UNSIGNED_INT:
      return f.value.uiVal;
    case NVML_VALUE_TYPE_UNSIGNED_LONG:
      return static_cast<double>(f.value.ulVal);
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
      return static_cast<double>(f.value.ullVal);
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG:
      return static_cast<double>(f.value.sllVal);
    case NVML_VALUE_TYPE_SIGNED_INT:
      return f.value.siVal;
    case NVML_VALUE_TYPE_UNSIGNED_SHORT:
      return f.value.usVal;
    default:
      return std::nullopt;
  }
}

std::unique_ptr<NvmlBackend> NvmlBackend::create(const NvmlBackendOptions& options, Logger& log) {
  auto lib = DynamicLibrary::open_first(options.library_candidates);
  if (!lib) {
    std::unique_ptr<NvmlBackend> b(new NvmlBackend(options, log));
    b->status_.absent = true;
    b->status_.detail = "NVML library not found (" + lib.error().message + ")";
    return b;
  }
  std::unique_ptr<SymbolSource> source = std::move(lib).value();
  if (!options.hidden_symbols.empty()) {
    source = std::make_unique<FilteredSymbolSource>(std::move(source), options.hidden_symbols);
  }
  return create(std::move(source), options, log);
}

std::unique_ptr<NvmlBackend> NvmlBackend::create(std::unique_ptr<SymbolSource> library,
                                                 const NvmlBackendOptions& options, Logger& log) {
  std::unique_ptr<NvmlBackend> b(new NvmlBackend(options, log));
  b->start(std::move(library));
  return b;
}

NvmlBackend::NvmlBackend(const NvmlBackendOptions& options, Logger& log) : options_(options), log_(log) {
  status_.backend = "nvml";
  status_.vendor = "nvidia";
}

void NvmlBackend::start(std::unique_ptr<SymbolSource> library) {
  library_ = std::move(library);
  auto syms = NvmlSymbols::resolve(*library_);
  if (!syms) {
    status_.detail = syms.error().message;
    return;
  }
  symbols_ = std::move(syms).value();
  status_.library = library_->path();

  nvmlReturn_t rc = symbols_.init();
  for (const auto delay : options_.init_retry_delays) {
    if (rc == NVML_SUCCESS) break;
    log_.warn("nvmlInit_v2 failed; trying again",
              {{"err", error_text(rc)}, {"in_seconds", std::to_string(delay.count() / 1000.0)}});
    std::this_thread::sleep_for(delay);
    rc = symbols_.init();
  }
  if (rc != NVML_SUCCESS) {
    status_.detail = "nvmlInit_v2 failed: " + error_text(rc);
    restart_reason_ = status_.detail + " (" + std::to_string(options_.init_retry_delays.size() + 1) + " attempts)";
    return;
  }
  initialized_ = true;

  if (symbols_.driver_version != nullptr) {
    char buf[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
    if (symbols_.driver_version(buf, sizeof buf) == NVML_SUCCESS) status_.driver_version = c_string(buf, sizeof buf);
  }
  unsigned count = 0;
  rc = symbols_.device_count(&count);
  if (rc != NVML_SUCCESS) {
    status_.detail = "nvmlDeviceGetCount_v2 failed: " + error_text(rc);
    return;
  }
  for (unsigned i = 0; i < count; ++i) {
    auto d = std::make_unique<Device>();
    d->index = i;
    devices_.push_back(std::move(d));
  }
  if (symbols_.pcie_throughput != nullptr && count > 0) {
    // A round a second at most: a GPU's read blocks 40 ms (20 ms each way), and a rate sampled
    // more often than the agent collects would only be thrown away.
    pcie_reader_ = std::make_unique<ThroughputReader>(
        ThroughputReaderOptions{.devices = count, .min_round = std::chrono::seconds(1), .clock = options_.clock},
        [this](unsigned i) { return read_pcie_throughput(i); });
  }
  loaded_ = true;
  status_.up = true;
  status_.detail = loaded_detail(status_, count);
}

NvmlBackend::~NvmlBackend() {
  pcie_reader_.reset();  // its thread calls the driver
  {
    std::lock_guard lock(events_mu_);
    free_event_set_locked();
  }
  if (initialized_) {
    for (auto& d : devices_) free_gpm_samples(*d);
    symbols_.shutdown();
  }
}

std::optional<std::string> NvmlBackend::restart_reason() const {
  std::lock_guard lock(status_mu_);
  return restart_reason_;
}

BackendStatus NvmlBackend::status() const {
  std::lock_guard lock(status_mu_);
  return status_;
}

std::int64_t NvmlBackend::wall_now_us() const { return (options_.clock ? *options_.clock : system_clock()).wall_us(); }

std::chrono::steady_clock::time_point NvmlBackend::steady_now() const {
  return (options_.clock ? *options_.clock : system_clock()).now();
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
    std::lock_guard lock(handles_mu_);
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
  // A reset or a MIG change can change what the GPU supports: ask again.
  d.unsupported.reset();
  d.slow.valid.reset();
  d.pcie_byte_fields.reset();
  d.mig_profiles.reset();
  // A sample taken before a reset is no start for one taken after it.
  d.gpm.previous = -1;
  for (auto& [gi, m] : d.mig_gpm) m.pair.previous = -1;
  bool rejoins = false;
  {
    // The event thread registers the new handle before its next wait.
    std::lock_guard lock(handles_mu_);
    d.handle = h;
    d.events_registered = false;
    rejoins = d.events_excluded;
    d.events_excluded = false;
  }
  if (rejoins) log_.info("GPU rejoins the event set", {{"gpu", std::to_string(index)}});
  return h;
}

void NvmlBackend::drop_handle(unsigned index) {
  std::lock_guard lock(handles_mu_);
  devices_.at(index)->handle = nullptr;
}

Result<DeviceIdentity> NvmlBackend::identify(unsigned index) {
  if (index >= devices_.size()) return Error{NVML_ERROR_INVALID_ARGUMENT, "no such GPU"};
  maybe_reinitialize();
  std::shared_lock calls(calls_mu_);
  if (reinit_needed_) return closed_error();
  Device& d = *devices_[index];
  auto h = acquire(index);
  if (!h) {
    if (h.error().code == NVML_ERROR_LIB_RM_VERSION_MISMATCH) request_reinit(h.error().message);
    return h.error();
  }
  DeviceIdentity id;
  id.index = index;
  id.vendor = "nvidia";
  id.driver_version = status().driver_version;
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
    if (rc == NVML_ERROR_LIB_RM_VERSION_MISMATCH) request_reinit("nvmlDeviceGetUUID: " + error_text(rc));
    return Error{rc, "nvmlDeviceGetUUID: " + error_text(rc)};
  }
  read_string(symbols_.name, NVML_DEVICE_NAME_V2_BUFFER_SIZE, id.model);
  read_string(symbols_.serial, NVML_DEVICE_SERIAL_BUFFER_SIZE, id.serial);
  read_string(symbols_.vbios_version, NVML_DEVICE_VBIOS_VERSION_BUFFER_SIZE, id.vbios_version);
  if (symbols_.pci_info != nullptr) {
    nvmlPciInfo_t pci{};
    if (symbols_.pci_info(*h, &pci) == NVML_SUCCESS) id.pci_bus_id = c_string(pci.busId, sizeof pci.busId);
  }
  if (unsigned minor = 0; symbols_.minor_number != nullptr && symbols_.minor_number(*h, &minor) == NVML_SUCCESS) {
    id.device_minor = minor;
  }
  if (!id.uuid.empty()) d.uuid = id.uuid;
  return id;
}

Result<DeviceReading> NvmlBackend::collect(unsigned index, CollectScope scope, CollectorSet groups) {
  if (index >= devices_.size()) return Error{NVML_ERROR_INVALID_ARGUMENT, "no such GPU"};
  maybe_reinitialize();
  std::shared_lock calls(calls_mu_);
  if (reinit_needed_) return closed_error();
  Device& d = *devices_[index];
  auto handle = acquire(index);
  if (!handle) {
    if (handle.error().code == NVML_ERROR_LIB_RM_VERSION_MISMATCH) request_reinit(handle.error().message);
    return handle.error();
  }
  NvmlCollection c(d.unsupported, [this](nvmlReturn_t rc) { return error_text(rc); });
  c.set_power_limit(d.slow.power_limit_watts);
  DeviceReading r;
  collect_device(d, *handle, scope, groups, c, r);
  // The processes and their records, read for the per-process series and for the ledger alike.
  if (groups.has(CollectorId::kLedger) || groups.has(CollectorId::kProcesses)) {
    r.runs.push_back(c.timed(CollectorId::kProcesses, [&] { collect_usage(d, *handle, c, r.usage); }));
  }
  const auto failure = c.failure();
  // A failed collection's errors are not counted: gpu_up and its reason tell of them already.
  merge_counters(index, c, /*with_call_errors=*/!failure);
  if (!c.not_permitted().empty()) report_not_permitted(d, c.not_permitted());
  if (failure) {
    if (invalidates_handle(failure->code)) drop_handle(index);
    if (failure->code == NVML_ERROR_LIB_RM_VERSION_MISMATCH) request_reinit(failure->message);
    return *failure;
  }
  return r;
}

void NvmlBackend::merge_counters(unsigned index, const NvmlCollection& c, bool with_call_errors) {
  if ((!with_call_errors || c.call_errors().empty()) && c.dropped_records().empty() && c.non_finite_values().empty() &&
      c.dropped_samples().empty())
    return;
  std::lock_guard lock(status_mu_);
  if (with_call_errors) {
    for (const auto& [call, rc] : c.call_errors()) ++status_.counters.call_errors[{index, call, error_name(rc)}];
  }
  for (const auto& [reason, n] : c.dropped_records()) status_.counters.dropped_records[{index, reason}] += n;
  for (const auto& [call, n] : c.non_finite_values()) status_.counters.non_finite_values[{index, call}] += n;
  for (const auto& [reason, n] : c.dropped_samples()) status_.counters.dropped_samples[{index, reason}] += n;
}

void NvmlBackend::report_not_permitted(Device& d, std::vector<std::string> calls) {
  // A refused GPU instance query shows the agent is unprivileged, and nvml.h says event waits then
  // report "only the events which affect all the instances": Xids inside a MIG instance are missing.
  if (d.mig_enabled == true && std::find(calls.begin(), calls.end(), "nvmlDeviceGetGpuInstanceById") != calls.end()) {
    calls.emplace_back("nvmlEventSetWait_v2");
  }
  {
    std::lock_guard lock(status_mu_);
    for (const auto& call : calls) status_.counters.not_permitted.emplace(d.index, call);
  }
  if (d.not_permitted_logged) return;
  d.not_permitted_logged = true;
  std::string names;
  for (const auto& call : calls) names += (names.empty() ? "" : ",") + call;
  if (d.mig_enabled == true) {
    log_.warn(
        "GPU in MIG mode: the driver refuses these calls without CAP_SYS_ADMIN; the whole GPU is still "
        "billed per MIG device, profiles are read from the MIG devices' names, and what the calls read is "
        "missing, Xid events inside an instance among it (gpumeter_backend_not_permitted; "
        "docs/kubernetes.md#mig)",
        {{"gpu", std::to_string(d.index)}, {"calls", names}});
  } else {
    log_.warn(
        "the driver refuses these calls (NO_PERMISSION); what they read is missing and they are not asked "
        "again (gpumeter_backend_not_permitted)",
        {{"gpu", std::to_string(d.index)}, {"calls", names}});
  }
}

void NvmlBackend::request_reinit(const std::string& reason) {
  const bool already = reinit_needed_.exchange(true);
  {
    std::lock_guard lock(status_mu_);
    status_.up = false;
    status_.detail = "NVML must be initialised again: " + reason;
  }
  if (!already) log_.warn("NVML library and driver versions differ; re-initializing NVML", {{"err", reason}});
}

// Runs on whichever worker or event thread gets here first once an attempt is due; the others
// go on failing their collections meanwhile.
void NvmlBackend::maybe_reinitialize() {
  if (!reinit_needed_) return;
  std::unique_lock one(reinit_mu_, std::try_to_lock);
  if (!one.owns_lock() || !reinit_needed_) return;
  const auto now = steady_now();
  if (now < next_reinit_) return;
  auto retry_later = [&](const std::string& why) {
    reinit_backoff_ = reinit_backoff_ == 0ms ? 1000ms : std::min<std::chrono::milliseconds>(2 * reinit_backoff_, 30s);
    next_reinit_ = now + reinit_backoff_;
    std::lock_guard lock(status_mu_);
    status_.detail = why + "; next attempt in " + std::to_string(reinit_backoff_.count() / 1000) + " s";
  };
  std::unique_lock calls(calls_mu_, std::defer_lock);
  if (!calls.try_lock_for(options_.reinit_lock_timeout)) {
    retry_later("NVML must be initialised again, but a driver call is still in progress");
    return;
  }
  close_library();
  nvmlReturn_t rc = symbols_.init();
  if (rc != NVML_SUCCESS) {
    log_.warn("NVML re-initialization failed", {{"err", error_text(rc)}});
    retry_later("NVML re-initialization failed: nvmlInit_v2: " + error_text(rc));
    // The library mapped into this process is the old driver's: no re-initialization can
    // succeed, only a new process that loads the new one.
    reinit_mismatches_ = rc == NVML_ERROR_LIB_RM_VERSION_MISMATCH ? reinit_mismatches_ + 1 : 0;
    if (reinit_mismatches_ >= options_.reinit_attempts) {
      std::lock_guard lock(status_mu_);
      if (!restart_reason_) {
        restart_reason_ =
            "the driver changed under the agent: its NVML library no longer matches the kernel module "
            "(nvmlInit_v2: " +
            error_text(rc) + ", " + std::to_string(reinit_mismatches_) + " times)";
      }
    }
    return;
  }
  reinit_mismatches_ = 0;
  initialized_ = true;
  std::string driver;
  if (symbols_.driver_version != nullptr) {
    char buf[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
    if (symbols_.driver_version(buf, sizeof buf) == NVML_SUCCESS) driver = c_string(buf, sizeof buf);
  }
  unsigned count = 0;
  if (symbols_.device_count(&count) == NVML_SUCCESS && count != devices_.size()) {
    // The collector's slots are fixed at start-up: keep them; a slot whose GPU is gone fails
    // its collections, and a new GPU waits for a restart.
    log_.warn("GPU count changed across NVML re-initialization",
              {{"before", std::to_string(devices_.size())}, {"after", std::to_string(count)}});
  }
  reinit_backoff_ = 0ms;
  next_reinit_ = {};
  reinit_needed_ = false;
  const bool was_released = released_.exchange(false);
  {
    std::lock_guard lock(status_mu_);
    status_.released_until_us = 0;
    status_.up = true;
    if (!driver.empty()) status_.driver_version = driver;
    status_.detail = loaded_detail(status_, static_cast<unsigned>(devices_.size())) + ", re-initialized";
    ++status_.counters.reinitializations;
  }
  log_.info(was_released ? "NVML opened again after the release: reading the GPUs" : "NVML re-initialized",
            {{"driver", driver}});
}

// Holds calls_mu_ exclusively: no driver call is in flight.
void NvmlBackend::close_library() {
  {
    std::lock_guard lock(events_mu_);
    free_event_set_locked();
    std::lock_guard handles(handles_mu_);
    for (auto& d : devices_) {
      d->handle = nullptr;
      d->events_registered = false;
      d->events_excluded = false;
    }
  }
  for (auto& d : devices_) {
    d->unsupported.reset();
    // Samples belong to the library instance being shut down; support is probed again.
    if (initialized_) free_gpm_samples(*d);
    d->gpm_supported.reset();
    d->mig_profiles.reset();
  }
  if (initialized_) symbols_.shutdown();
  initialized_ = false;
}

Result<bool> NvmlBackend::release(std::chrono::milliseconds period) {
  if (!loaded_) return false;  // nothing was opened
  std::lock_guard one(reinit_mu_);
  const auto now = steady_now();
  if (period <= 0ms) {
    // Taken back at the next collection (maybe_reinitialize), on the worker as usual.
    if (released_) next_reinit_ = now;
    return true;
  }
  // Calls that start from now on see the flag and leave at once, so the event thread's wait
  // (up to a second under the shared lock) is the longest the exclusive lock waits for.
  reinit_needed_ = true;
  released_ = true;
  std::unique_lock calls(calls_mu_, std::defer_lock);
  if (!calls.try_lock_for(options_.reinit_lock_timeout + kLongestEventWait)) {
    released_ = false;
    reinit_needed_ = false;
    return Error{0, "a driver call is still in progress; NVML stays open (try again)"};
  }
  close_library();
  reinit_backoff_ = 0ms;
  next_reinit_ = now + period;
  const std::int64_t until_us = wall_now_us() + std::chrono::duration_cast<std::chrono::microseconds>(period).count();
  {
    std::lock_guard lock(status_mu_);
    status_.up = false;
    status_.released_until_us = until_us;
    status_.detail = "released: NVML is closed for " + std::to_string(period.count() / 1000) +
                     " s, so that a GPU can be reset; no GPU is read meanwhile";
  }
  log_.info("NVML released: the device files are closed and no GPU is read until the period ends",
            {{"seconds", std::to_string(period.count() / 1000)}});
  return true;
}

Error NvmlBackend::closed_error() const {
  return Error{released_ ? NVML_ERROR_UNINITIALIZED : NVML_ERROR_LIB_RM_VERSION_MISMATCH, status().detail};
}

}  // namespace gpumeter
