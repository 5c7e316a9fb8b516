#include "fake_rocm_smi.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <string_view>

namespace gpumeter::fake_rocm {
namespace {

Script g_script;
std::array<std::atomic<int>, 8> g_throughput_reads;

// The scripted status of `call` on `gpu`, counting the call; SUCCESS unless scripted.
rsmi_status_t answer(const char* call, std::uint32_t gpu) {
  ++g_script.calls[call];
  if (gpu >= g_script.gpus.size()) return RSMI_STATUS_INVALID_ARGS;
  if (auto it = g_script.gpu_rc.find({call, gpu}); it != g_script.gpu_rc.end()) return it->second;
  if (auto it = g_script.rc.find(call); it != g_script.rc.end()) return it->second;
  return RSMI_STATUS_SUCCESS;
}

rsmi_status_t init(std::uint64_t) { return RSMI_STATUS_SUCCESS; }
rsmi_status_t shut_down() { return RSMI_STATUS_SUCCESS; }
rsmi_status_t num_devices(std::uint32_t* n) {
  *n = static_cast<std::uint32_t>(g_script.gpus.size());
  return RSMI_STATUS_SUCCESS;
}
rsmi_status_t version(rsmi_version_t* v) {
  *v = g_script.version;
  return RSMI_STATUS_SUCCESS;
}
rsmi_status_t name(std::uint32_t d, char* buf, std::size_t len) {
  if (rsmi_status_t rc = answer("rsmi_dev_name_get", d); rc != RSMI_STATUS_SUCCESS) return rc;
  const Gpu& g = g_script.gpus[d];
  std::snprintf(buf, len, "%s", g.name.c_str());
  return RSMI_STATUS_SUCCESS;
}
rsmi_status_t serial(std::uint32_t d, char* buf, std::uint32_t len) {
  if (rsmi_status_t rc = answer("rsmi_dev_serial_number_get", d); rc != RSMI_STATUS_SUCCESS) return rc;
  const Gpu& g = g_script.gpus[d];
  std::snprintf(buf, len, "%s", g.serial.c_str());
  return RSMI_STATUS_SUCCESS;
}
rsmi_status_t unique_id(std::uint32_t d, std::uint64_t* id) {
  if (rsmi_status_t rc = answer("rsmi_dev_unique_id_get", d); rc != RSMI_STATUS_SUCCESS) return rc;
  const Gpu& g = g_script.gpus[d];
  *id = g.unique_id;
  return RSMI_STATUS_SUCCESS;
}
rsmi_status_t pci_id(std::uint32_t d, std::uint64_t* id) {
  if (rsmi_status_t rc = answer("rsmi_dev_pci_id_get", d); rc != RSMI_STATUS_SUCCESS) return rc;
  const Gpu& g = g_script.gpus[d];
  *id = g.pci_id;
  return RSMI_STATUS_SUCCESS;
}
rsmi_status_t busy(std::uint32_t d, std::uint32_t* pct) {
  if (rsmi_status_t rc = answer("rsmi_dev_busy_percent_get", d); rc != RSMI_STATUS_SUCCESS) return rc;
  const Gpu& g = g_script.gpus[d];
  *pct = g.busy_percent;
  return RSMI_STATUS_SUCCESS;
}
rsmi_status_t memory_busy(std::uint32_t d, std::uint32_t* pct) {
  if (rsmi_status_t rc = answer("rsmi_dev_memory_busy_percent_get", d); rc != RSMI_STATUS_SUCCESS) return rc;
  const Gpu& g = g_script.gpus[d];
  *pct = g.memory_busy_percent;
  return RSMI_STATUS_SUCCESS;
}
rsmi_status_t memory_total(std::uint32_t d, rsmi_memory_type_t, std::uint64_t* v) {
  if (rsmi_status_t rc = answer("rsmi_dev_memory_total_get", d); rc != RSMI_STATUS_SUCCESS) return rc;
  const Gpu& g = g_script.gpus[d];
  *v = g.vram_total;
  return RSMI_STATUS_SUCCESS;
}
rsmi_status_t memory_usage(std::uint32_t d, rsmi_memory_type_t, std::uint64_t* v) {
  if (rsmi_status_t rc = answer("rsmi_dev_memory_usage_get", d); rc != RSMI_STATUS_SUCCESS) return rc;
  const Gpu& g = g_script.gpus[d];
  *v = g.vram_used;
  return RSMI_STATUS_SUCCESS;
}
rsmi_status_t temperature(std::uint32_t d, std::uint32_t sensor, rsmi_temperature_metric_t, std::int64_t* mc) {
  if (rsmi_status_t rc = answer("rsmi_dev_temp_metric_get", d); rc != RSMI_STATUS_SUCCESS) return rc;
  const Gpu& g = g_script.gpus[d];
  auto it = g.temperature_mc.find(sensor);
  if (it == g.temperature_mc.end()) return RSMI_STATUS_NOT_SUPPORTED;
  *mc = it->second;
  return RSMI_STATUS_SUCCESS;
}
rsmi_status_t power_ave(std::uint32_t d, std::uint32_t, std::uint64_t* uw) {
  if (rsmi_status_t rc = answer("rsmi_dev_power_ave_get", d); rc != RSMI_STATUS_SUCCESS) return rc;
  const Gpu& g = g_script.gpus[d];
  *uw = g.power_uw;
  return RSMI_STATUS_SUCCESS;
}
rsmi_status_t power_get(std::uint32_t d, std::uint64_t* uw, RSMI_POWER_TYPE* type) {
  if (uw == nullptr || type == nullptr) return RSMI_STATUS_INVALID_ARGS;  // as ROCm 6.x checks
  *type = RSMI_INVALID_POWER;
  if (rsmi_status_t rc = answer("rsmi_dev_power_get", d); rc != RSMI_STATUS_SUCCESS) return rc;
  const Gpu& g = g_script.gpus[d];
  *uw = g.power_get_uw;
  *type = g.power_get_type;
  return RSMI_STATUS_SUCCESS;
}
rsmi_status_t socket_power(std::uint32_t d, std::uint64_t* uw) {
  if (rsmi_status_t rc = answer("rsmi_dev_current_socket_power_get", d); rc != RSMI_STATUS_SUCCESS) return rc;
  const Gpu& g = g_script.gpus[d];
  *uw = g.socket_power_uw;
  return RSMI_STATUS_SUCCESS;
}
rsmi_status_t gpu_metrics(std::uint32_t d, void* out) {
  if (rsmi_status_t rc = answer("rsmi_dev_gpu_metrics_info_get", d); rc != RSMI_STATUS_SUCCESS) return rc;
  const Gpu& g = g_script.gpus[d];
  auto* m = static_cast<rsmi_gpu_metrics_v5_t*>(out);  // the 5.2.3 layout the script's version names
  *m = rsmi_gpu_metrics_v5_t{};
  m->average_socket_power = g.metrics_socket_power_w;
  m->throttle_status = g.throttle_status;
  return RSMI_STATUS_SUCCESS;
}
rsmi_status_t power_cap(std::uint32_t d, std::uint32_t, std::uint64_t* uw) {
  if (rsmi_status_t rc = answer("rsmi_dev_power_cap_get", d); rc != RSMI_STATUS_SUCCESS) return rc;
  const Gpu& g = g_script.gpus[d];
  *uw = g.power_cap_uw;
  return RSMI_STATUS_SUCCESS;
}
rsmi_status_t energy(std::uint32_t d, std::uint64_t* counter, float* resolution, std::uint64_t* ts) {
  if (rsmi_status_t rc = answer("rsmi_dev_energy_count_get", d); rc != RSMI_STATUS_SUCCESS) return rc;
  const Gpu& g = g_script.gpus[d];
  *counter = g.energy_counter;
  *resolution = g.energy_resolution_uj;
  *ts = 0;
  return RSMI_STATUS_SUCCESS;
}
rsmi_status_t clock(std::uint32_t d, rsmi_clk_type_t type, void* out) {
  if (rsmi_status_t rc = answer("rsmi_dev_gpu_clk_freq_get", d); rc != RSMI_STATUS_SUCCESS) return rc;
  const Gpu& g = g_script.gpus[d];
  if (type != RSMI_CLK_TYPE_SYS) return RSMI_STATUS_NOT_SUPPORTED;
  auto* f = static_cast<rsmi_frequencies_v5_t*>(out);  // the 5.2.3 layout the script's version names
  f->num_supported = static_cast<std::uint32_t>(g.sys_clock_hz.size());
  f->current = g.sys_clock_current;
  std::copy(g.sys_clock_hz.begin(), g.sys_clock_hz.end(), f->frequency);
  return RSMI_STATUS_SUCCESS;
}
rsmi_status_t pcie_bandwidth(std::uint32_t d, void* out) {
  if (rsmi_status_t rc = answer("rsmi_dev_pci_bandwidth_get", d); rc != RSMI_STATUS_SUCCESS) return rc;
  const Gpu& g = g_script.gpus[d];
  auto* b = static_cast<rsmi_pcie_bandwidth_v5_t*>(out);
  b->transfer_rate.num_supported = 1;
  b->transfer_rate.current = 0;
  b->transfer_rate.frequency[0] = g.pcie_rate;
  b->lanes[0] = g.pcie_lanes;
  return RSMI_STATUS_SUCCESS;
}
rsmi_status_t replay(std::uint32_t d, std::uint64_t* v) {
  if (rsmi_status_t rc = answer("rsmi_dev_pci_replay_counter_get", d); rc != RSMI_STATUS_SUCCESS) return rc;
  const Gpu& g = g_script.gpus[d];
  *v = g.replays;
  return RSMI_STATUS_SUCCESS;
}
rsmi_status_t fan(std::uint32_t d, std::uint32_t, std::int64_t* v) {
  if (rsmi_status_t rc = answer("rsmi_dev_fan_speed_get", d); rc != RSMI_STATUS_SUCCESS) return rc;
  const Gpu& g = g_script.gpus[d];
  *v = g.fan_speed;
  return RSMI_STATUS_SUCCESS;
}
rsmi_status_t fan_max(std::uint32_t d, std::uint32_t, std::uint64_t* v) {
  if (rsmi_status_t rc = answer("rsmi_dev_fan_speed_max_get", d); rc != RSMI_STATUS_SUCCESS) return rc;
  const Gpu& g = g_script.gpus[d];
  *v = g.fan_max;
  return RSMI_STATUS_SUCCESS;
}
rsmi_status_t ecc_enabled(std::uint32_t d, std::uint64_t* v) {
  if (rsmi_status_t rc = answer("rsmi_dev_ecc_enabled_get", d); rc != RSMI_STATUS_SUCCESS) return rc;
  const Gpu& g = g_script.gpus[d];
  *v = g.ecc_enabled;
  return RSMI_STATUS_SUCCESS;
}
rsmi_status_t ecc_count(std::uint32_t d, rsmi_gpu_block_t block, rsmi_error_count_t* ec) {
  if (rsmi_status_t rc = answer("rsmi_dev_ecc_count_get", d); rc != RSMI_STATUS_SUCCESS) return rc;
  const Gpu& g = g_script.gpus[d];
  auto it = g.ecc.find(block);
  if (it == g.ecc.end()) return RSMI_STATUS_NOT_SUPPORTED;
  *ec = it->second;
  return RSMI_STATUS_SUCCESS;
}
rsmi_status_t perf_level(std::uint32_t d, rsmi_dev_perf_level_t* level) {
  if (rsmi_status_t rc = answer("rsmi_dev_perf_level_get", d); rc != RSMI_STATUS_SUCCESS) return rc;
  const Gpu& g = g_script.gpus[d];
  *level = g.perf_level;
  return RSMI_STATUS_SUCCESS;
}
// On the backend's reader thread: reads only what the test set before the backend started.
rsmi_status_t pcie_throughput(std::uint32_t d, std::uint64_t* first, std::uint64_t* second, std::uint64_t* mps) {
  if (d >= g_script.gpus.size()) return RSMI_STATUS_INVALID_ARGS;
  ++g_throughput_reads[d];
  const auto& t = g_script.gpus[d].pcie_throughput;
  if (!t) return RSMI_STATUS_NOT_SUPPORTED;
  *first = (*t)[0];
  *second = (*t)[1];
  *mps = (*t)[2];
  return RSMI_STATUS_SUCCESS;
}
rsmi_status_t process_list(rsmi_process_info_t* list, std::uint32_t* n) {
  ++g_script.calls["rsmi_compute_process_info_get"];
  const auto count = static_cast<std::uint32_t>(g_script.processes.size());
  if (list == nullptr) {
    *n = count;
    return RSMI_STATUS_SUCCESS;
  }
  const std::uint32_t written = std::min(*n, count);
  for (std::uint32_t i = 0; i < written; ++i) list[i] = rsmi_process_info_t{g_script.processes[i].pid, 0, 0, 0, 0};
  *n = written;
  return written < count ? RSMI_STATUS_INSUFFICIENT_SIZE : RSMI_STATUS_SUCCESS;
}
const Process* find_process(std::uint32_t pid) {
  for (const Process& p : g_script.processes) {
    if (p.pid == pid) return &p;
  }
  return nullptr;
}
rsmi_status_t process_by_pid(std::uint32_t pid, rsmi_process_info_t* info) {
  const Process* p = find_process(pid);
  if (p == nullptr) return RSMI_STATUS_NOT_FOUND;
  *info = rsmi_process_info_t{pid, 0, p->vram_bytes, 0, p->cu_occupancy};
  return RSMI_STATUS_SUCCESS;
}
rsmi_status_t process_gpus(std::uint32_t pid, std::uint32_t* gpus, std::uint32_t* n) {
  ++g_script.calls["rsmi_compute_process_gpus_get"];
  const Process* p = find_process(pid);
  if (p == nullptr) return RSMI_STATUS_NOT_FOUND;
  const auto count = std::min<std::uint32_t>(*n, static_cast<std::uint32_t>(p->gpus.size()));
  std::copy_n(p->gpus.begin(), count, gpus);
  *n = count;
  return RSMI_STATUS_SUCCESS;
}
rsmi_status_t status_string(rsmi_status_t rc, const char** text) {
  *text = rc == RSMI_STATUS_PERMISSION ? "RSMI_STATUS_PERMISSION" : "RSMI_STATUS_OTHER";
  return RSMI_STATUS_SUCCESS;
}

}  // namespace

Script& script() { return g_script; }
void reset() {
  g_script = Script{};
  for (auto& n : g_throughput_reads) n = 0;
}
int throughput_reads(unsigned gpu) { return g_throughput_reads.at(gpu).load(); }

void* FakeRocmSmi::symbol(const char* name_) const {
  static const std::map<std::string, void*> kSymbols = {
      {"rsmi_init", reinterpret_cast<void*>(&init)},
      {"rsmi_shut_down", reinterpret_cast<void*>(&shut_down)},
      {"rsmi_num_monitor_devices", reinterpret_cast<void*>(&num_devices)},
      {"rsmi_version_get", reinterpret_cast<void*>(&version)},
      {"rsmi_status_string", reinterpret_cast<void*>(&status_string)},
      {"rsmi_dev_name_get", reinterpret_cast<void*>(&name)},
      {"rsmi_dev_serial_number_get", reinterpret_cast<void*>(&serial)},
      {"rsmi_dev_unique_id_get", reinterpret_cast<void*>(&unique_id)},
      {"rsmi_dev_pci_id_get", reinterpret_cast<void*>(&pci_id)},
      {"rsmi_dev_busy_percent_get", reinterpret_cast<void*>(&busy)},
      {"rsmi_dev_memory_busy_percent_get", reinterpret_cast<void*>(&memory_busy)},
      {"rsmi_dev_memory_total_get", reinterpret_cast<void*>(&memory_total)},
      {"rsmi_dev_memory_usage_get", reinterpret_cast<void*>(&memory_usage)},
      {"rsmi_dev_temp_metric_get", reinterpret_cast<void*>(&temperature)},
      {"rsmi_dev_power_ave_get", reinterpret_cast<void*>(&power_ave)},
      {"rsmi_dev_power_cap_get", reinterpret_cast<void*>(&power_cap)},
      {"rsmi_dev_gpu_metrics_info_get", reinterpret_cast<void*>(&gpu_metrics)},
      {"rsmi_dev_energy_count_get", reinterpret_cast<void*>(&energy)},
      {"rsmi_dev_gpu_clk_freq_get", reinterpret_cast<void*>(&clock)},
      {"rsmi_dev_pci_bandwidth_get", reinterpret_cast<void*>(&pcie_bandwidth)},
      {"rsmi_dev_pci_replay_counter_get", reinterpret_cast<void*>(&replay)},
      {"rsmi_dev_fan_speed_get", reinterpret_cast<void*>(&fan)},
      {"rsmi_dev_fan_speed_max_get", reinterpret_cast<void*>(&fan_max)},
      {"rsmi_dev_ecc_enabled_get", reinterpret_cast<void*>(&ecc_enabled)},
      {"rsmi_dev_ecc_count_get", reinterpret_cast<void*>(&ecc_count)},
      {"rsmi_dev_perf_level_get", reinterpret_cast<void*>(&perf_level)},
      {"rsmi_compute_process_info_get", reinterpret_cast<void*>(&process_list)},
      {"rsmi_compute_process_info_by_pid_get", reinterpret_cast<void*>(&process_by_pid)},
      {"rsmi_compute_process_gpus_get", reinterpret_cast<void*>(&process_gpus)},
  };
  if (std::find(hidden_.begin(), hidden_.end(), name_) != hidden_.end()) return nullptr;
  if (std::string_view(name_) == "rsmi_dev_pci_throughput_get") {
    return g_script.pcie_throughput ? reinterpret_cast<void*>(&pcie_throughput) : nullptr;
  }
  if (std::string_view(name_) == "rsmi_dev_power_get") {
    return g_script.power_get ? reinterpret_cast<void*>(&power_get) : nullptr;
  }
  if (std::string_view(name_) == "rsmi_dev_current_socket_power_get") {
    return g_script.socket_power ? reinterpret_cast<void*>(&socket_power) : nullptr;
  }
  auto it = kSymbols.find(name_);
  return it == kSymbols.end() ? nullptr : it->second;
}

}  // namespace gpumeter::fake_rocm
