#pragma once
// One GPU's composite state over scenario time: which jobs are present and how busy it is.
// The state is piecewise constant; segment_at() returns the piece containing t together with
// the instant it ends, so callers walk whole segments and integrate exactly.

#include <cstdint>
#include <vector>

#include "sim/physics/live.h"
#include "sim/scenario/pattern.h"
#include "sim/scenario/scenario.h"
#include "sim/scenario/time.h"

namespace gpumeter::sim {

struct JobShare {
  std::uint32_t job = 0;  // index into Scenario::jobs, or kLiveJob for a live process (live.h)
  std::uint32_t pid = 0;  // the job's process on this GPU
  int percent = 0;        // the job's own utilization u_j
  std::uint64_t memory_bytes = 0;
  std::size_t mig = kNoMigInstance;  // the MIG instance it runs on, into Scenario::mig.instances
};

struct Segment {
  Micros start = 0;
  Micros end = kForever;  // exclusive
  // min(100, sum_percent); on a GPU in MIG mode, each instance's min(100, sum of its u_j)
  // weighted by its compute slices of the GPU's (7, 4 on A30), rounded to a whole percent.
  int util_percent = 0;
  int sum_percent = 0;             // sum of u_j over present jobs
  std::uint64_t memory_bytes = 0;  // sum of present jobs' memory
  bool driver_reload = false;      // a driver reload happens at `start`
  std::vector<JobShare> jobs;      // present jobs, in scenario order
};

class GpuTimeline {
 public:
  // `live`: the live processes to add to the scenario's jobs (the simulated NVML's), or null.
  GpuTimeline(const Scenario& scenario, unsigned gpu, const LiveTable* live = nullptr);

  // The state at t (t >= 0), valid on [t, end).
  Segment segment_at(Micros t) const;

  // Changes whenever the live processes do: a segment read before may have changed.
  std::uint64_t version() const { return live_ == nullptr ? 0 : live_->version(); }

  // Calls f(segment) for each segment overlapping [from, to), clipped to the window.
  template <typename F>
  void for_each_segment(Micros from, Micros to, F&& f) const {
    Micros t = from;
    while (t < to) {
      Segment s = segment_at(t);
      if (s.end > to) s.end = to;
      t = s.end;
      f(static_cast<const Segment&>(s));
    }
  }

 private:
  void add_live(Micros t, Segment& s) const;

  struct Entry {
    std::uint32_t job;
    std::uint32_t pid;
    Micros start;
    Micros end;
    std::uint64_t memory_bytes;
    Pattern pattern;
    std::size_t mig;
    unsigned mig_slices;
  };
  unsigned gpu_ = 0;
  const LiveTable* live_ = nullptr;
  unsigned mig_slices_ = 0;  // the GPU's compute slices in MIG mode, else 0
  std::vector<Entry> entries_;
  std::vector<Micros> reloads_;
};

}  // namespace gpumeter::sim
