#include "sim/amd/sysfs_writer.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <system_error>

#include <fmt/format.h>

#include "sim/host/tree_files.h"

#include "sim/amd/amdgpu_files.h"

namespace gpumeter::sim::amd {

namespace fs = std::filesystem;

namespace {

Result<void> make_dirs(const fs::path& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) return Error{ec.value(), fmt::format("cannot create {}: {}", path.string(), ec.message())};
  return {};
}

Result<void> make_symlink(const fs::path& target, const fs::path& link) {
  std::error_code ec;
  fs::remove(link, ec);
  fs::create_directory_symlink(target, link, ec);
  if (ec) return Error{ec.value(), fmt::format("cannot link {}: {}", link.string(), ec.message())};
  return {};
}

#define TRY(expr)                                 \
  do {                                            \
    if (auto r_ = (expr); !r_) return r_.error(); \
  } while (0)

// The CUs a process occupies: its share of the GPU's busy time (the same split NVML's
// per-process SM share uses: U * u_j / sum u) of the GPU's compute units, rounded.
unsigned cu_occupancy(const GpuModelSpec& m, int sum_percent, const JobShare& j) {
  if (sum_percent <= 0) return 0;
  const int util = std::min(100, sum_percent);
  const double share = static_cast<double>(util) * j.percent / sum_percent / 100.0;
  return static_cast<unsigned>(std::lround(share * m.compute_units));
}

// The socket power the model's hwmon file and gpu_metrics hold, in mW. power1_average: the SMU's
// average over its last second (an assumption on the window). MI300X's power1_input: its current
// socket power, which smu_v13_0_6 rounds to whole watts for hwmon and gpu_metrics alike
// (SMUQ10_ROUND(SocketPower), docs/rocm-behaviour.md).
unsigned socket_power_mw(SimGpu& sim, Micros t, const InstantValues& now) {
  if (has_average_power(sim.model())) return sim.average_power_mw(t, kMicrosPerSecond);
  return (now.power_mw + 500) / 1000 * 1000;
}

}  // namespace

SysfsTree::SysfsTree(fs::path dir, const Scenario& scenario, bool hangs)
    : dir_(std::move(dir)), scenario_(scenario), hangs_(hangs) {}

Result<std::unique_ptr<SysfsTree>> SysfsTree::open(const fs::path& dir, const Scenario& scenario, bool hangs) {
  const std::vector<unsigned> amd = amd_gpus(scenario);
  if (amd.empty()) return Error{EINVAL, fmt::format("{} has no AMD GPU (a model with vendor: amd)", scenario.source)};
  std::error_code ec;
  fs::path root = fs::absolute(dir, ec);
  if (ec) return Error{ec.value(), fmt::format("cannot resolve {}: {}", dir.string(), ec.message())};
  std::unique_ptr<SysfsTree> tree(new SysfsTree(root.lexically_normal(), scenario, hangs));
  // A tree left by an earlier run is replaced: its cards may not match this scenario.
  for (const char* part : {"class", "devices", "module"}) fs::remove_all(tree->dir_ / part, ec);
  const fs::path drm = tree->dir_ / "class/drm";
  const fs::path nodes = tree->dir_ / "class/kfd/kfd/topology/nodes";
  TRY(make_dirs(drm));
  TRY(make_dirs(nodes / "0/io_links"));
  TRY(make_dirs(tree->dir_ / "class/kfd/kfd/proc"));
  TRY(write_file(nodes / "0/properties", kfd_cpu_properties()));
  TRY(write_file(nodes / "0/gpu_id", "0\n"));
  TRY(write_file(nodes / "0/name", "\n"));
  TRY(make_dirs(tree->dir_ / "module/amdgpu"));
  TRY(write_file(tree->dir_ / "module/amdgpu/version", scenario.amdgpu_version + "\n"));
  for (unsigned card = 0; card < amd.size(); ++card) {
    Gpu g;
    g.index = amd[card];
    g.card = card;
    const PciAddress& pci = scenario.gpus[g.index].pci;
    g.device = tree->dir_ / fmt::format("devices/pci{:04x}:00", pci.domain) / pci_address(pci);
    g.hwmon = g.device / fmt::format("hwmon/hwmon{}", card);
    g.sim = std::make_unique<SimGpu>(scenario, g.index);
    tree->gpus_.push_back(std::move(g));
  }
  for (Gpu& g : tree->gpus_) TRY(tree->write_static(g));
  TRY(tree->sync(0));
  // Last, as the driver marks itself live once its devices are up: a reader that waits for it
  // finds every card and KFD node (ROCm SMI started on a part of them faults on a process
  // entry naming a GPU it did not see).
  TRY(write_file(tree->dir_ / "module/amdgpu/initstate", "live\n"));
  return tree;
}

Result<void> SysfsTree::replace_file(const fs::path& path, const std::string& content) {
  // Most values stand still between segment edges: a file already holding them is left alone.
  if (held_.count(path.string()) != 0) {
    written_[path.string()] = content;  // written when the hang ends
    return {};
  }
  auto [it, inserted] = written_.try_emplace(path.string(), content);
  if (!inserted) {
    if (it->second == content) return {};
    it->second = content;
  }
  if (auto r = write_file_atomic(path, content); !r) {
    written_.erase(path.string());
    return r;
  }
  return {};
}

Result<void> SysfsTree::write_static(Gpu& g) {
  const GpuModelSpec& m = scenario_.model_of(g.index);
  const GpuSpec& spec = scenario_.gpus[g.index];
  const fs::path& d = g.device;
  const std::string card = fmt::format("card{}", g.card);
  TRY(make_dirs(d / "drm" / card));
  TRY(make_dirs(d / "drm" / fmt::format("renderD{}", 128 + g.card)));
  TRY(make_symlink("../../", d / "drm" / card / "device"));
  TRY(make_symlink(d / "drm" / card, dir_ / "class/drm" / card));
  const unsigned device_id = m.pci_device_id >> 16;
  const unsigned subsystem = m.pci_subsystem_id != 0 ? m.pci_subsystem_id & 0xFFFF : device_id;
  TRY(write_file(d / "vendor", "0x1002\n"));
  TRY(write_file(d / "device", fmt::format("0x{:04x}\n", device_id)));
  TRY(write_file(d / "subsystem_vendor", "0x1002\n"));
  TRY(write_file(d / "subsystem_device", fmt::format("0x{:04x}\n", subsystem)));
  TRY(write_file(d / "revision", "0x00\n"));
  TRY(write_file(d / "vbios_version", m.vbios_version + "\n"));
  TRY(write_file(d / "product_name", m.name + "\n"));
  TRY(write_file(d / "serial_number", spec.serial + "\n"));
  TRY(write_file(d / "unique_id", unique_id(spec) + "\n"));
  TRY(write_file(d / "mem_info_vram_total", fmt::format("{}\n", m.memory_total_bytes)));
  TRY(write_file(d / "mem_info_vis_vram_total", fmt::format("{}\n", m.memory_total_bytes)));
  TRY(write_file(d / "mem_info_gtt_total", fmt::format("{}\n", m.memory_total_bytes / 2)));
  TRY(write_file(d / "power_dpm_force_performance_level", "auto\n"));
  TRY(write_file(d / "pp_dpm_pcie", dpm_pcie(m)));
  TRY(write_file(d / "pcie_replay_count", "0\n"));
  const unsigned gts = pcie_tenths_gts(m.pcie_generation);
  TRY(write_file(d / "current_link_speed", fmt::format("{}.{} GT/s PCIe\n", gts / 10, gts % 10)));
  TRY(write_file(d / "current_link_width", fmt::format("{}\n", m.pcie_width)));
  if (m.ecc) {
    TRY(make_dirs(d / "ras"));
    TRY(write_file(d / "ras/features", "feature mask: 0x0000000f\n"));
    for (const char* block : kRasBlocks)
      TRY(write_file(d / "ras" / fmt::format("{}_err_count", block), "ue: 0\nce: 0\n"));
  }
  const fs::path& h = g.hwmon;
  TRY(make_dirs(h));
  TRY(write_file(h / "name", "amdgpu\n"));
  TRY(write_file(h / "in0_label", "vddgfx\n"));
  TRY(write_file(h / "temp1_label", "edge\n"));
  TRY(write_file(h / "temp2_label", "junction\n"));
  TRY(write_file(h / "temp3_label", "mem\n"));
  TRY(write_file(h / "temp1_crit", fmt::format("{}\n", kCriticalEdgeC * 1000)));
  TRY(write_file(h / "temp2_crit", fmt::format("{}\n", kCriticalJunctionC * 1000)));
  TRY(write_file(h / "temp3_crit", fmt::format("{}\n", kCriticalMemC * 1000)));
  const std::uint64_t cap_uw = static_cast<std::uint64_t>(m.power_limit_mw) * 1000;
  TRY(write_file(h / "power1_cap", fmt::format("{}\n", cap_uw)));
  TRY(write_file(h / "power1_cap_default", fmt::format("{}\n", cap_uw)));
  TRY(write_file(h / "power1_cap_max", fmt::format("{}\n", cap_uw)));
  TRY(write_file(h / "power1_cap_min", "0\n"));
  // Every ASIC but Vangogh labels its one power sensor PPT ("drm/amd/pm: correct hwmon power
  // lable name"); ROCm SMI 6.x reads power1_input only under that label.
  TRY(write_file(h / "power1_label", "PPT\n"));
  if (m.fan) {
    TRY(write_file(h / "pwm1_max", fmt::format("{}\n", kPwmMax)));
    TRY(write_file(h / "pwm1_min", "0\n"));
    TRY(write_file(h / "pwm1_enable", "2\n"));
    TRY(write_file(h / "fan1_max", fmt::format("{}\n", kFanMaxRpm)));
  }
  const fs::path node = dir_ / "class/kfd/kfd/topology/nodes" / std::to_string(g.card + 1);
  TRY(make_dirs(node / "io_links"));
  TRY(make_dirs(node / "mem_banks"));
  TRY(make_dirs(node / "caches"));
  TRY(write_file(node / "gpu_id", fmt::format("{}\n", kfd_gpu_id(g.index))));
  TRY(write_file(node / "name", m.architecture == "cdna3"   ? "gfx942\n"
                                : m.architecture == "cdna2" ? "gfx90a\n"
                                                            : "gfx1100\n"));
  TRY(write_file(node / "properties", kfd_gpu_properties(scenario_, g.index, g.card)));
  return {};
}

Result<void> SysfsTree::write_dynamic(Gpu& g, Micros t) {
  const GpuModelSpec& m = g.sim->model();
  const InstantValues r = g.sim->values_at(t);
  const fs::path& d = g.device;
  const fs::path& h = g.hwmon;
  TRY(replace_file(d / "gpu_busy_percent", fmt::format("{}\n", r.util_percent)));
  TRY(replace_file(d / "mem_busy_percent", fmt::format("{}\n", r.memory_util_percent)));
  const std::uint64_t used = r.memory_used_bytes + m.memory_reserved_bytes;
  TRY(replace_file(d / "mem_info_vram_used", fmt::format("{}\n", used)));
  TRY(replace_file(d / "mem_info_vis_vram_used", fmt::format("{}\n", used)));
  TRY(replace_file(d / "mem_info_gtt_used", "0\n"));
  TRY(replace_file(d / "pp_dpm_sclk", dpm_levels(m.graphics_clock, r.graphics_clock_mhz)));
  TRY(replace_file(d / "pp_dpm_mclk", dpm_levels(m.memory_clock, r.memory_clock_mhz)));
  TRY(replace_file(d / "pcie_bw",
                   pcie_bw(g.sim->pcie_tx_rate(t, kMicrosPerSecond), g.sim->pcie_rx_rate(t, kMicrosPerSecond))));
  const unsigned junction = r.temperature_c + kJunctionAboveEdgeC;
  TRY(replace_file(h / "temp1_input", fmt::format("{}\n", r.temperature_c * 1000)));
  TRY(replace_file(h / "temp2_input", fmt::format("{}\n", junction * 1000)));
  TRY(replace_file(h / "temp3_input", fmt::format("{}\n", r.memory_temperature_c * 1000)));
  const unsigned socket_mw = socket_power_mw(*g.sim, t, r);
  TRY(replace_file(h / power_file(m), fmt::format("{}\n", static_cast<std::uint64_t>(socket_mw) * 1000)));
  // in0 (vddgfx): 0.75 V idle to 1.1 V at full load, an assumption.
  TRY(replace_file(h / "in0_input", fmt::format("{}\n", 750 + 350 * r.util_percent / 100)));
  unsigned fan_rpm = 0;
  if (m.fan) {
    const unsigned pwm = (r.fan_percent * kPwmMax + 50) / 100;
    fan_rpm = r.fan_percent * kFanMaxRpm / 100;
    TRY(replace_file(h / "pwm1", fmt::format("{}\n", pwm)));
    TRY(replace_file(h / "fan1_input", fmt::format("{}\n", fan_rpm)));
  }
  MetricsInput in;
  in.edge_c = r.temperature_c;
  in.junction_c = junction;
  in.mem_c = r.memory_temperature_c;
  in.gfx_activity = r.util_percent;
  in.umc_activity = r.memory_util_percent;
  in.socket_power_w = (socket_mw + 500) / 1000;
  in.energy_accumulator = static_cast<std::uint64_t>(std::llround(g.sim->energy_joules(t) / kEnergyUnitJoules));
  in.system_clock_ns = static_cast<std::uint64_t>(std::max<Micros>(t, 0)) * 1000;
  in.gfxclk_mhz = r.graphics_clock_mhz;
  in.uclk_mhz = r.memory_clock_mhz;
  in.fan_rpm = fan_rpm;
  in.pcie_width = m.pcie_width;
  in.pcie_speed_tenths_gts = pcie_tenths_gts(m.pcie_generation);
  TRY(replace_file(d / "gpu_metrics", gpu_metrics(m, in)));
  return {};
}

std::vector<SysfsTree::Use> SysfsTree::per_gpu(const std::vector<Use>& used) const {
  std::vector<Use> out;
  for (const Gpu& g : gpus_) {
    Use u{kfd_gpu_id(g.index), 0, 0};
    for (const Use& x : used) {
      if (x.gpu_id == u.gpu_id) u = x;
    }
    out.push_back(u);
  }
  return out;
}

Result<void> SysfsTree::sync_processes(Micros t) {
  std::map<unsigned, std::vector<Use>> uses;  // pid -> its GPUs, in card order
  for (Gpu& g : gpus_) {
    const std::vector<JobShare>& jobs = g.sim->processes(t);
    int sum = 0;
    for (const JobShare& j : jobs) sum += j.percent;
    for (const JobShare& j : jobs) {
      if (scenario_.jobs[j.job].graphics) continue;  // a DRM client, not a KFD process
      uses[j.pid].push_back({kfd_gpu_id(g.index), j.memory_bytes, cu_occupancy(g.sim->model(), sum, j)});
    }
  }
  const fs::path proc = dir_ / "class/kfd/kfd/proc";
  std::error_code ec;
  for (auto it = present_.begin(); it != present_.end();) {
    if (uses.count(it->first) != 0) {
      ++it;
      continue;
    }
    const fs::path gone = proc / fmt::format(".{}.gone", it->first);
    fs::rename(proc / std::to_string(it->first), gone, ec);
    fs::remove_all(gone, ec);
    forget_under(proc / std::to_string(it->first));
    it = present_.erase(it);
  }
  for (const auto& [pid, list] : uses) {
    std::string signature;
    for (const Use& u : list) signature += fmt::format("{},", u.gpu_id);
    const fs::path entry = proc / std::to_string(pid);
    auto p = present_.find(pid);
    if (p == present_.end() || p->second != signature) {
      // A new entry (or one whose GPUs changed) is built aside and renamed into place whole.
      const fs::path tmp = proc / fmt::format(".{}.tmp", pid);
      fs::remove_all(tmp, ec);
      TRY(make_dirs(tmp));
      TRY(write_file(tmp / "pasid", fmt::format("{}\n", kfd_pasid(pid))));
      for (std::size_t q = 0; q < list.size(); ++q) {
        TRY(make_dirs(tmp / "queues" / std::to_string(q)));
        TRY(write_file(tmp / "queues" / std::to_string(q) / "gpuid", fmt::format("{}\n", list[q].gpu_id)));
      }
      // KFD gives a process a device entry on every GPU it can see (ROCm opens them all), so
      // vram_, sdma_ and stats_ exist for each gpu_id; ROCm SMI reads them all and fails without.
      for (const Use& u : per_gpu(list)) {
        TRY(make_dirs(tmp / fmt::format("stats_{}", u.gpu_id)));
        TRY(write_file(tmp / fmt::format("vram_{}", u.gpu_id), fmt::format("{}\n", u.vram_bytes)));
        TRY(write_file(tmp / fmt::format("sdma_{}", u.gpu_id), "0\n"));
        TRY(write_file(tmp / fmt::format("stats_{}/cu_occupancy", u.gpu_id), fmt::format("{}\n", u.cu_occupancy)));
      }
      fs::remove_all(entry, ec);
      forget_under(entry);
      fs::rename(tmp, entry, ec);
      if (ec) return Error{ec.value(), fmt::format("cannot rename {}: {}", tmp.string(), ec.message())};
      present_[pid] = signature;
      continue;
    }
    for (const Use& u : per_gpu(list)) {
      TRY(replace_file(entry / fmt::format("vram_{}", u.gpu_id), fmt::format("{}\n", u.vram_bytes)));
      TRY(replace_file(entry / fmt::format("stats_{}/cu_occupancy", u.gpu_id), fmt::format("{}\n", u.cu_occupancy)));
    }
  }
  return {};
}

Result<void> SysfsTree::sync(Micros t) {
  for (Gpu& g : gpus_) {
    TRY(sync_faults(g, t));
    if (!g.lost) TRY(write_dynamic(g, t));
  }
  return sync_processes(t);
}

void SysfsTree::forget_under(const fs::path& dir) {
  const std::string prefix = dir.string() + "/";
  for (auto it = held_.lower_bound(prefix); it != held_.end() && it->compare(0, prefix.size(), prefix) == 0;)
    it = held_.erase(it);
  for (auto it = written_.lower_bound(prefix);
       it != written_.end() && it->first.compare(0, prefix.size(), prefix) == 0;)
    it = written_.erase(it);
}

std::vector<unsigned> SysfsTree::processes() const {
  std::vector<unsigned> out;
  for (const auto& [pid, _] : present_) out.push_back(pid);
  return out;
}

}  // namespace gpumeter::sim::amd
