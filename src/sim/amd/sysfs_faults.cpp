// The scenario's faults on the simulated amdgpu tree: a lost GPU's files vanish and come back;
// a hung GPU's files block their readers. docs/rocm-behaviour.md ("Faults") gives the sources
// and the assumptions.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include <fmt/format.h>

#include "sim/amd/amdgpu_files.h"
#include "sim/amd/sysfs_writer.h"
#include "sim/host/tree_files.h"

namespace gpumeter::sim::amd {

namespace fs = std::filesystem;

namespace {

bool in_window(Micros t, Micros at, Micros duration) { return t >= at && t - at < duration; }

Result<void> rename_path(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::rename(from, to, ec);
  if (ec) return fs_error("cannot rename into", to, ec);
  return {};
}

}  // namespace

std::vector<fs::path> SysfsTree::hang_files(const Gpu& g, bool processes) const {
  if (processes) {
    // KFD reads a process's CU occupancy from the GPU only when the process has queues on it
    // (kfd_get_cu_occupancy): the files of the processes that use this GPU.
    const unsigned id = kfd_gpu_id(g.index);
    const std::string queue = fmt::format("{},", id);
    std::vector<fs::path> out;
    for (const auto& [pid, signature] : present_) {
      if (("," + signature).find("," + queue) == std::string::npos) continue;
      out.push_back(dir_ / "class/kfd/kfd/proc" / std::to_string(pid) / fmt::format("stats_{}", id) / "cu_occupancy");
    }
    return out;
  }
  // The files of every collection that ROCm SMI 5.2.3 opens without checking first that they
  // are regular files: gpu_metrics (fopen, rsmi_dev_energy_count_get) and hwmon files (an
  // ifstream, rsmi_dev_power_ave_get). A FIFO in place of gpu_busy_percent would not block:
  // the library stat()s it, finds no regular file and answers NOT_SUPPORTED. The power file is
  // the model's (power1_input on MI300X, which 5.2.3 does not read; 6.x reads it).
  return {g.device / "gpu_metrics", g.hwmon / power_file(g.sim->model())};
}

Result<void> SysfsTree::sync_faults(Gpu& g, Micros t) {
  bool lost = false;
  for (const WindowFault& f : scenario_.lost) {
    if (f.gpu == g.index && in_window(t, f.at, f.duration)) lost = true;
  }
  bool hung = false;
  bool processes = false;
  if (hangs_) {
    for (const HangFault& f : scenario_.hangs) {
      const auto duration = static_cast<Micros>(f.wall_seconds * static_cast<double>(kMicrosPerSecond));
      if (f.gpu == g.index && in_window(t, f.at, duration)) {
        hung = true;
        processes = f.call == kAmdProcessHangCall;
      }
    }
  }
  hung = hung && !lost;
  if (g.hung && !hung) {
    if (auto r = release(g); !r) return r;
  }
  if (g.lost != lost) {
    if (auto r = set_lost(g, lost); !r) return r;
  }
  if (hung && !g.hung) return hang(g, processes);
  return {};
}

Result<void> SysfsTree::set_lost(Gpu& g, bool lost) {
  // A GPU that falls off the bus is removed from the PCI bus: its device folder (with hwmon and
  // every amdgpu attribute) and its class/drm/card link go. It comes back at the same address
  // and card number.
  const fs::path link = dir_ / "class/drm" / fmt::format("card{}", g.card);
  const fs::path aside_device = beside(g.device, "lost");
  const fs::path aside_link = beside(link, "lost");
  if (lost) {
    if (auto r = rename_path(link, aside_link); !r) return r;
    if (auto r = rename_path(g.device, aside_device); !r) return r;
  } else {
    if (auto r = rename_path(aside_device, g.device); !r) return r;
    if (auto r = rename_path(aside_link, link); !r) return r;
  }
  g.lost = lost;
  return {};
}

Result<void> SysfsTree::hang(Gpu& g, bool processes) {
  g.held = hang_files(g, processes);
  for (const fs::path& path : g.held) {
    const fs::path tmp = beside(path, "fifo");
    std::error_code ec;
    fs::remove(tmp, ec);
    if (::mkfifo(tmp.c_str(), 0644) != 0) {
      return Error{errno, fmt::format("cannot create the FIFO {}: {}", tmp.string(), std::strerror(errno))};
    }
    if (auto r = rename_path(tmp, path); !r) return r;
    held_.insert(path.string());
  }
  g.hung = true;
  return {};
}

Result<void> SysfsTree::release(Gpu& g) {
  // Opening a FIFO for reading and writing never blocks (Linux, fifo(7)), and a writer lets
  // every reader blocked in open() go on. Each file is then put back as a regular file (new
  // readers get it), and the current value is written into the FIFO for the readers that were
  // waiting: the first one reads it, any other finds the FIFO empty once it is closed (EOF).
  std::vector<std::pair<int, std::string>> waiting;
  for (const fs::path& path : g.held) {
    if (held_.count(path.string()) == 0) continue;  // its process entry was rebuilt or removed
    const int fd = ::open(path.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
    held_.erase(path.string());
    const auto it = written_.find(path.string());
    const std::string content = it != written_.end() ? it->second : std::string();
    written_.erase(path.string());
    if (auto r = replace_file(path, content); !r) {
      if (fd >= 0) ::close(fd);
      for (auto& [other, _] : waiting) ::close(other);
      return r;
    }
    if (fd >= 0) waiting.emplace_back(fd, content);
  }
  for (auto& [fd, content] : waiting) {
    // At most a few hundred bytes: within PIPE_BUF, so written whole into the empty FIFO.
    [[maybe_unused]] const ssize_t n = ::write(fd, content.data(), content.size());
    ::close(fd);
  }
  g.hung = false;
  g.held.clear();
  return {};
}

Result<void> SysfsTree::release_hangs() {
  for (Gpu& g : gpus_) {
    if (!g.hung) continue;
    if (auto r = release(g); !r) return r;
  }
  return {};
}

}  // namespace gpumeter::sim::amd
