#include "sim/model/process_utilization.h"

#include <algorithm>
#include <cmath>

#include "sim/model/readings.h"

namespace gpumeter::sim {

namespace {

struct Accumulator {
  std::uint32_t pid = 0;
  Micros sample_time = 0;
  double sm = 0;   // percent * us over (from, sample_time]
  double mem = 0;  // percent * us
};

// Last grid point phase + k * period at or before t (floor division, t may precede phase).
Micros last_sample_at_or_before(Micros t, Micros phase, Micros period) {
  Micros k = (t - phase) / period;
  if ((t - phase) % period < 0) --k;
  return phase + k * period;
}

}  // namespace

Micros process_phase(std::uint32_t pid, Micros period) {
  // splitmix64's finalizer: neighbouring pids land far apart on the grid.
  std::uint64_t x = pid + 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  x ^= x >> 31;
  return static_cast<Micros>(x % static_cast<std::uint64_t>(period));
}

std::vector<ProcessRecord> process_records(const GpuTimeline& timeline, Micros now, Micros since,
                                           Micros oldest, Micros period) {
  const Micros from = std::max({since, oldest, Micros{0}});
  std::vector<Accumulator> seen;
  if (now <= from) return {};
  timeline.for_each_segment(from, now, [&](const Segment& s) {
    if (s.util_percent == 0 || s.sum_percent == 0) return;
    const int mem_util = memory_util_percent(s.util_percent);
    for (const JobShare& j : s.jobs) {
      if (j.percent == 0) continue;
      auto it = std::find_if(seen.begin(), seen.end(), [&](const Accumulator& a) { return a.pid == j.pid; });
      if (it == seen.end()) {
        const Micros sample = last_sample_at_or_before(now, process_phase(j.pid, period), period);
        it = seen.insert(seen.end(), Accumulator{j.pid, sample, 0, 0});
      }
      const Micros end = std::min(s.end, it->sample_time);
      if (end <= s.start) continue;
      const double fraction = static_cast<double>(j.percent) / s.sum_percent;
      const auto d = static_cast<double>(end - s.start);
      it->sm += s.util_percent * fraction * d;
      it->mem += mem_util * fraction * d;
    }
  });
  std::vector<ProcessRecord> records;
  for (const Accumulator& a : seen) {
    if (a.sample_time <= from) continue;
    const auto window = static_cast<double>(a.sample_time - from);
    records.push_back(ProcessRecord{a.pid, a.sample_time, from,
                                    static_cast<unsigned>(std::lround(a.sm / window)),
                                    static_cast<unsigned>(std::lround(a.mem / window))});
  }
  return records;
}

}  // namespace gpumeter::sim
