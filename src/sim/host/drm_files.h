#pragma once
// The DRM files of the scenario's processes on AMD GPUs, as `gpumeter sim procfs` writes them
// into <dir>/proc/<pid>/fd/<n> (a symbolic link to the device node) and fdinfo/<n>, in the
// format of the kernel's amdgpu_show_fdinfo() (Documentation/gpu/drm-usage-stats.rst):
//
//   - a graphics client (`client: graphics`) holds its GPU's render node /dev/dri/renderD<128+k>
//     (k: the card, counted over the AMD GPUs in scenario order) open on two fds, the second a
//     dup of the first, so both show one drm-client-id; `drm-engine-gfx` is its busy time since
//     it started, the same integral as `gpumeter sim truth` (U × u_j / Σu over time);
//   - a ROCm compute process (the default) holds the render node open too, as the ROCm runtime
//     does, with no engine time (it submits through /dev/kfd);
//   - fds 0, 1 and 2 are /dev/null.
// The DRM fds exist while the job runs, [start, end); the pid's entry exists longer (the lead).

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sim/scenario/scenario.h"
#include "sim/physics/timeline.h"

namespace gpumeter::sim {

struct OpenFile {
  unsigned fd = 0;
  std::string target;  // what the fd link points to
  std::string fdinfo;
  bool operator==(const OpenFile&) const = default;
};

class DrmFiles {
 public:
  // `period`: how often the counters of open graphics clients are rewritten (scenario time).
  DrmFiles(const Scenario& scenario, Micros period);

  // The open files of `pid`, a process of job `job`, at t (engine time integrated up to t). Empty
  // when the job has no AMD GPU.
  std::vector<OpenFile> files(unsigned pid, std::size_t job, Micros t);
  // The instants the DRM files open and close (job starts and ends on AMD GPUs), sorted.
  const std::vector<Micros>& edges() const { return edges_; }
  // The next rewrite after t while a graphics client is open, else kForever.
  Micros next_rewrite_after(Micros t) const;
  // A graphics job's busy seconds on the GPU at entry `slot` of its gpus, over [start, t).
  double engine_seconds(std::size_t job, std::size_t slot, Micros t);

 private:
  const Scenario& scenario_;
  Micros period_;
  std::vector<Micros> edges_;
  std::vector<std::pair<Micros, Micros>> graphics_runs_;  // [start, end) of each graphics job
  std::map<unsigned, unsigned> card_;                     // scenario GPU index -> card
  // Per GPU with graphics clients: its timeline, how far it is integrated, and each job's sum.
  struct Integral {
    std::unique_ptr<GpuTimeline> timeline;
    Micros done = 0;
    std::map<std::size_t, double> seconds;  // by job
  };
  std::map<unsigned, Integral> integrals_;
};

}  // namespace gpumeter::sim
