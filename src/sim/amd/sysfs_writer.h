#pragma once
// `gpumeter sim sysfs`: the amdgpu sysfs tree of a scenario's AMD GPUs, as the kernel's amdgpu
// and amdkfd drivers lay it out, so that the real ROCm SMI library reads the simulated GPUs when
// the tree is bind-mounted over /sys/class and /sys/module:
//
//   <dir>/class/drm/card<k>  -> <dir>/devices/pci<dom>:00/<pci address>/drm/card<k>  (absolute)
//   <dir>/devices/.../<pci address>/{vendor,device,gpu_busy_percent,mem_info_*,pp_dpm_*,
//                                    gpu_metrics,ras/,hwmon/hwmon<k>/,drm/card<k>,drm/renderD<128+k>}
//   <dir>/class/kfd/kfd/topology/nodes/<n>/{properties,gpu_id,name,io_links/}   (node 0: the CPU)
//   <dir>/class/kfd/kfd/proc/<pid>/{pasid,vram_<gpu_id>,sdma_<gpu_id>,stats_<gpu_id>/cu_occupancy,
//                                   queues/<q>/gpuid}
//   <dir>/module/amdgpu/{version,initstate}
//
// Cards are numbered over the AMD GPUs only, in scenario order. The tree follows scenario time:
// sync(t) rewrites every value that changes with time (each file replaced by a rename, so a
// reader sees the old file or the new one) and makes the KFD process entries exactly those of
// the processes present at t.
//
// Faults (docs/rocm-behaviour.md, "Faults"): during a `lost` window the GPU's PCI device folder
// and its class/drm/card link are gone, as after a surprise removal, and come back at its end;
// during a `hang` (modelled only when the tree follows the clock) gpu_metrics and
// the hwmon power file (power1_average, or power1_input on MI300X) are FIFOs, so a reader's open() blocks until the
// hang ends, when the writer lets the waiting readers through with the current value and puts the files back. A hang
// with `call: rsmi_compute_process_info_by_pid_get` makes FIFOs of the GPU's KFD cu_occupancy
// files (of the processes that use it) instead.

#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "sim/physics/gpu_sim.h"
#include "sim/scenario/scenario.h"
#include "util/result.h"

namespace gpumeter::sim::amd {

class SysfsTree {
 public:
  // Writes the static part of the tree under `dir` (made absolute; the card links must be) and
  // the values at time 0, then module/amdgpu/initstate: once it exists, the tree is whole.
  // Fails when the scenario has no AMD GPU.
  // `hangs`: model the scenario's `hang` faults (a follower that lets the readers go on at the
  // hang's end); a one-shot tree leaves them out, as nothing would unblock its readers.
  static Result<std::unique_ptr<SysfsTree>> open(const std::filesystem::path& dir, const Scenario& scenario,
                                                 bool hangs = false);

  Result<void> sync(Micros t);
  // Lets the readers of a hung GPU go on and puts its files back (when the follower stops).
  Result<void> release_hangs();

  std::size_t gpu_count() const { return gpus_.size(); }
  // The pids with a KFD process entry after the last sync().
  std::vector<unsigned> processes() const;

 private:
  struct Gpu {
    unsigned index;  // in the scenario
    unsigned card;
    std::filesystem::path device;  // the PCI device folder
    std::filesystem::path hwmon;
    std::unique_ptr<SimGpu> sim;
    bool lost = false;                        // its device folder and card link are moved aside
    bool hung = false;                        // its hang files are FIFOs
    std::vector<std::filesystem::path> held;  // those files
  };
  // One process's use of one GPU at t.
  struct Use {
    unsigned gpu_id = 0;
    std::uint64_t vram_bytes = 0;
    unsigned cu_occupancy = 0;
  };
  // `used` completed with a zero entry for every other AMD GPU, in card order.
  std::vector<Use> per_gpu(const std::vector<Use>& used) const;
  SysfsTree(std::filesystem::path dir, const Scenario& scenario, bool hangs);
  Result<void> write_static(Gpu& g);
  Result<void> write_dynamic(Gpu& g, Micros t);
  Result<void> sync_processes(Micros t);
  Result<void> replace_file(const std::filesystem::path& path, const std::string& content);
  void forget_under(const std::filesystem::path& dir);  // drops cached contents of a removed entry
  // Faults (sysfs_faults.cpp): brings the GPU's lost and hung states to those at t.
  Result<void> sync_faults(Gpu& g, Micros t);
  Result<void> set_lost(Gpu& g, bool lost);
  Result<void> hang(Gpu& g, bool processes);
  Result<void> release(Gpu& g);
  std::vector<std::filesystem::path> hang_files(const Gpu& g, bool processes) const;

  std::filesystem::path dir_;
  const Scenario& scenario_;
  const bool hangs_;
  std::vector<Gpu> gpus_;
  std::map<unsigned, std::string> present_;     // pid -> the content signature of its entry
  std::map<std::string, std::string> written_;  // path -> what the last replace_file wrote there
  std::set<std::string> held_;                  // FIFOs of a hung GPU: replace_file only notes their content
};

}  // namespace gpumeter::sim::amd
