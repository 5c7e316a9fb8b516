#include "sim/physics/process_utilization.h"

#include <algorithm>
#include <cmath>

#include "sim/physics/instant_values.h"

namespace gpumeter::sim {

namespace {

struct Accumulator {
  std::uint32_t pid = 0;
  Micros sample_time = 0;   // the newest sample
  Micros window_start = 0;  // where the period of the first sample after the query's `from` begins
  double sm = 0;            // percent * us over (window_start, sample_time]
  double mem = 0;           // percent * us
  bool active = false;      // had a non-zero share somewhere in the window
  Micros alive_until = 0;   // the last instant the process existed, up to now
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

std::vector<ProcessRecord> process_records(const GpuTimeline& timeline, Micros now, Micros since, Micros oldest,
                                           Micros period) {
  const Micros from = std::max({since, oldest, Micros{0}});
  if (now <= from) return {};
  // The driver keeps samples, each stamped at the end of the period it measured. A query returns
  // per process the average of its samples stamped after `from`: the window runs from the last
  // point of the process's grid at or before `from` (where its first new sample's period begins)
  // to its newest sample. A process is sampled only while it exists: its first sample measured
  // the period in which it started, and its newest is the last point of its grid before it ended
  // (segments are half-open), or at or before now.
  std::vector<Accumulator> seen;
  const Micros scan_from = std::max(Micros{0}, from - period);
  timeline.for_each_segment(scan_from, now, [&](const Segment& s) {
    for (const JobShare& j : s.jobs) {
      auto it = std::find_if(seen.begin(), seen.end(), [&](const Accumulator& a) { return a.pid == j.pid; });
      if (it == seen.end()) {
        // The first segment it is in: where it started, unless it ran before the scan.
        const Micros phase = process_phase(j.pid, period);
        const Micros since_sampled = last_sample_at_or_before(std::max(from, s.start), phase, period);
        it = seen.insert(seen.end(), Accumulator{j.pid, 0, std::max(Micros{0}, since_sampled), 0, 0, false});
      }
      it->alive_until = std::max(it->alive_until, s.end >= now ? now : s.end - 1);
    }
  });
  for (Accumulator& a : seen) {
    a.sample_time = last_sample_at_or_before(a.alive_until, process_phase(a.pid, period), period);
  }
  timeline.for_each_segment(scan_from, now, [&](const Segment& s) {
    if (s.util_percent == 0 || s.sum_percent == 0) return;
    const int mem_util = memory_util_percent(s.util_percent);
    for (const JobShare& j : s.jobs) {
      if (j.percent == 0) continue;
      auto it = std::find_if(seen.begin(), seen.end(), [&](const Accumulator& a) { return a.pid == j.pid; });
      const Micros begin = std::max(s.start, it->window_start);
      const Micros end = std::min(s.end, it->sample_time);
      if (end <= begin) continue;
      const double fraction = static_cast<double>(j.percent) / s.sum_percent;
      const auto d = static_cast<double>(end - begin);
      it->sm += s.util_percent * fraction * d;
      it->mem += mem_util * fraction * d;
      it->active = true;
    }
  });
  std::vector<ProcessRecord> records;
  for (const Accumulator& a : seen) {
    // Only processes with a new sample (stamped after `from`) that had a share of the GPU.
    if (!a.active || a.sample_time <= from || a.sample_time <= a.window_start) continue;
    const auto window = static_cast<double>(a.sample_time - a.window_start);
    records.push_back(ProcessRecord{a.pid, a.sample_time, a.window_start,
                                    static_cast<unsigned>(std::lround(a.sm / window)),
                                    static_cast<unsigned>(std::lround(a.mem / window))});
  }
  return records;
}

std::vector<ProcessRecord> active_process_records(const GpuTimeline& timeline, Micros now, Micros since, Micros oldest,
                                                  Micros period) {
  const Micros from = std::max({since, oldest, Micros{0}});
  if (now <= from) return {};
  // The processes present since the first sample period that can end after `from`, in order
  // of first presence, each with the last instant it existed (up to now): as in
  // process_records(), a process is sampled only while it exists.
  std::vector<std::pair<std::uint32_t, Micros>> alive;
  timeline.for_each_segment(std::max(Micros{0}, from - period), now, [&](const Segment& s) {
    for (const JobShare& j : s.jobs) {
      auto it = std::find_if(alive.begin(), alive.end(), [&](const auto& a) { return a.first == j.pid; });
      if (it == alive.end()) it = alive.insert(alive.end(), {j.pid, 0});
      it->second = std::max(it->second, s.end >= now ? now : s.end - 1);
    }
  });
  std::vector<ProcessRecord> records;
  for (const auto& entry : alive) {
    const std::uint32_t pid = entry.first;  // a plain variable: lambdas below capture it
    const Micros alive_until = entry.second;
    const Micros phase = process_phase(pid, period);
    double sm = 0;
    double mem = 0;
    int active = 0;
    ProcessRecord r{pid, 0, 0, 0, 0};
    // Each sample on the process's grid in (from, alive_until] measured the period before it.
    for (Micros t = last_sample_at_or_before(from, phase, period) + period; t <= alive_until; t += period) {
      double sample_sm = 0;
      double sample_mem = 0;
      const Micros begin = std::max(Micros{0}, t - period);  // nothing was sampled before time 0
      timeline.for_each_segment(begin, t, [&](const Segment& s) {
        if (s.util_percent == 0 || s.sum_percent == 0) return;
        for (const JobShare& j : s.jobs) {
          if (j.pid != pid || j.percent == 0) continue;
          const double part = static_cast<double>(j.percent) / s.sum_percent * static_cast<double>(s.end - s.start);
          sample_sm += s.util_percent * part;
          sample_mem += memory_util_percent(s.util_percent) * part;
        }
      });
      if (sample_sm <= 0) continue;
      if (active++ == 0) r.window_start = begin;
      sm += sample_sm / static_cast<double>(t - begin);
      mem += sample_mem / static_cast<double>(t - begin);
      r.time = t;
    }
    if (active == 0) continue;
    r.sm_percent = static_cast<unsigned>(std::lround(sm / active));
    r.memory_percent = static_cast<unsigned>(std::lround(mem / active));
    records.push_back(r);
  }
  return records;
}

}  // namespace gpumeter::sim
