#include "ledger/ledger.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>


#include "ledger/share_fit.h"

namespace gpumeter {

namespace {

const LedgerProcess* find_pid(const std::vector<LedgerProcess>& v, unsigned pid) {
  for (const auto& p : v) {
    if (p.pid == pid) return &p;
  }
  return nullptr;
}

// Averages the samples stamped inside (start, end].
template <typename T, typename F>
std::optional<double> average_in(const std::vector<T>& samples, std::int64_t start, std::int64_t end, F value) {
  double sum = 0;
  int n = 0;
  for (const auto& s : samples) {
    if (s.timestamp_us > start && s.timestamp_us <= end) {
      sum += value(s);
      ++n;
    }
  }
  if (n == 0) return std::nullopt;
  return sum / n;
}

}  // namespace

OwnerLabels unattributed_owner() {
  OwnerLabels o;
  o.project = kUnattributedProject;
  return o;
}

OwnerLabels idle_owner() {
  OwnerLabels o;
  o.project = kIdleProject;
  return o;
}

bool allocation_owns(const OwnerLabels& allocation, const OwnerLabels& process) {
  bool any = false;
  for (const auto member : {&OwnerLabels::namespace_, &OwnerLabels::pod, &OwnerLabels::container, &OwnerLabels::hpc_job}) {
    const std::string& value = allocation.*member;
    if (value.empty()) continue;
    if (value != process.*member) return false;
    any = true;
  }
  return any;
}

void GpuLedger::note_allocation(const AllocationState& state) {
  const std::vector<OwnerLabels>& latest =
      pending_allocation_.empty() ? *allocated_ : *pending_allocation_.back().owners;
  if (state.owners == latest) return;
  // A source's clock may put a change before one already noted; changes stay in order.
  const std::int64_t at = pending_allocation_.empty() ? state.since_us
                                                      : std::max(state.since_us, pending_allocation_.back().at_us);
  pending_allocation_.push_back({at, std::make_shared<const std::vector<OwnerLabels>>(state.owners)});
}

std::vector<std::pair<GpuLedger::Period, GpuLedger::OwnerSet>> GpuLedger::split_at_allocation_changes(
    const std::vector<Period>& periods) {
  std::vector<std::pair<Period, OwnerSet>> out;
  out.reserve(periods.size());
  std::size_t next = 0;
  for (const Period& p : periods) {
    Period rest = p;
    for (; next < pending_allocation_.size() && pending_allocation_[next].at_us < rest.end_us; ++next) {
      const std::int64_t at = pending_allocation_[next].at_us;
      if (at > rest.start_us) {
        Period before = rest;
        before.end_us = at;
        out.emplace_back(before, allocated_);
        rest.start_us = at;
      }
      allocated_ = pending_allocation_[next].owners;
    }
    out.emplace_back(rest, allocated_);
  }
  pending_allocation_.erase(pending_allocation_.begin(), pending_allocation_.begin() + static_cast<std::ptrdiff_t>(next));
  return out;
}

void GpuLedger::note_gap(std::int64_t us) {
  if (us <= 0) return;
  gap_seconds_ += weight_ * static_cast<double>(us) / 1e6;
  ++gaps_;
}

void GpuLedger::add_process_records(const std::vector<ProcessSample>& records,
                                    const std::vector<LedgerProcess>& processes) {
  std::vector<ProcessSample> sorted = records;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const ProcessSample& x, const ProcessSample& y) { return x.timestamp_us < y.timestamp_us; });
  for (const auto& s : sorted) {
    auto prev = last_process_sample_us_.find(s.pid);
    const bool seen = prev != last_process_sample_us_.end();
    if (seen && s.timestamp_us <= prev->second) continue;  // repeated or out of order
    ProcessWindow w{s.pid, 0, s.timestamp_us, std::clamp(s.sm_ratio, 0.0, 1.0), false};
    if (s.covers_from_us > 0) {
      // The driver's average of the process's samples stamped after the query's
      // lastSeenTimeStamp. The first of them measured the period that began at the process's
      // previous sample, up to one sample period before lastSeenTimeStamp: the window starts
      // there when that sample is this process's previous record, so its windows tile. Windows
      // of one process never overlap, so a share is never counted twice.
      w.from_us = s.covers_from_us;
      if (seen) {
        w.from_us = prev->second >= s.covers_from_us - period_or_default() ? prev->second
                                                                           : std::max(w.from_us, prev->second);
      }
      w.carries = true;
    } else {
      // Unknown window: back to the same process's previous record, or one device period for
      // its first, never more than kMaxProcessSampleSpan, so a long silence is not spread over.
      w.from_us = seen ? prev->second : s.timestamp_us - period_or_default();
      w.from_us = std::max(w.from_us, s.timestamp_us - kMaxProcessSampleSpanUs);
    }
    // A query window reaching back before the process started: the driver's average holds
    // nothing of it for that time, and the process must not be charged for it.
    const LedgerProcess* lp = find_pid(processes, s.pid);
    if (lp == nullptr) lp = find_pid(previous_, s.pid);
    if (lp != nullptr && lp->start_us && *lp->start_us > w.from_us) w.from_us = *lp->start_us;
    if (w.from_us >= w.to_us) continue;
    last_process_sample_us_[s.pid] = s.timestamp_us;
    pending_process_.push_back(w);
  }
}

std::vector<std::int64_t> GpuLedger::carry_ends() const {
  // Each window is carried up to the next query's window start: the earliest query window
  // starting at or after its end (one query's records share their start, whichever process
  // they are of), or its process's own next record; bounded, since a process that stopped gets
  // no more records. A record whose window is unknown (no covers_from_us) is carried only up
  // to a known start. Sorted starts make it a search per window, not a scan.
  std::vector<std::int64_t> carrying;
  std::vector<std::pair<unsigned, std::int64_t>> own;
  for (const auto& v : pending_process_) {
    if (v.carries) carrying.push_back(v.from_us);
    own.emplace_back(v.pid, v.from_us);
  }
  std::sort(carrying.begin(), carrying.end());
  std::sort(own.begin(), own.end());
  const auto bound = static_cast<std::int64_t>(kCarryDevicePeriods * static_cast<double>(period_or_default()));
  std::vector<std::int64_t> out;
  out.reserve(pending_process_.size());
  for (const auto& w : pending_process_) {
    std::optional<std::int64_t> next;
    if (auto it = std::lower_bound(carrying.begin(), carrying.end(), w.to_us); it != carrying.end()) next = *it;
    if (auto it = std::lower_bound(own.begin(), own.end(), std::make_pair(w.pid, w.to_us));
        it != own.end() && it->first == w.pid && (!next || it->second < *next)) {
      next = it->second;
    }
    out.push_back(!w.carries && !next ? w.to_us : std::min(w.to_us + bound, next.value_or(w.to_us + bound)));
  }
  return out;
}

double GpuLedger::share_seconds(const ProcessWindow& w, std::int64_t carry_to_us, std::int64_t start_us,
                                std::int64_t end_us) {
  auto overlap = [&](std::int64_t from, std::int64_t to) {
    return static_cast<double>(std::max<std::int64_t>(0, std::min(to, end_us) - std::max(from, start_us)));
  };
  double us = overlap(w.from_us, w.to_us);
  if (w.to_us < end_us) us += overlap(w.to_us, carry_to_us);
  return w.sm * us / 1e6;
}

void GpuLedger::learn_device_period(const std::vector<TimedSample>& fresh) {
  // The median spacing: one lost sample, or one late by a driver's jitter, must not change it.
  // A single spacing teaches it only when nothing better is known.
  std::vector<std::int64_t> spacings;
  for (size_t i = 1; i < fresh.size(); ++i) {
    const std::int64_t d = fresh[i].timestamp_us - fresh[i - 1].timestamp_us;
    if (d > 0) spacings.push_back(d);
  }
  if (spacings.empty() || (spacings.size() < 2 && device_period_us_ > 0)) return;
  auto mid = spacings.begin() + static_cast<std::ptrdiff_t>(spacings.size() / 2);
  std::nth_element(spacings.begin(), mid, spacings.end());
  device_period_us_ = *mid;
}

void GpuLedger::rebase(std::int64_t step_us) {
  if (step_us == 0) return;
  if (started_) cursor_us_ += step_us;
  for (auto& [o, t] : owners_) {
    if (t.last_active_us != 0) t.last_active_us += step_us;
  }
  for (auto& s : pending_power_) s.timestamp_us += step_us;
  for (auto& w : pending_process_) {
    w.from_us += step_us;
    w.to_us += step_us;
  }
  for (auto& [pid, ts] : last_process_sample_us_) ts += step_us;
  for (auto& c : pending_allocation_) c.at_us += step_us;
}

void GpuLedger::restart_at(std::int64_t cursor_us, const LedgerTick& tick) {
  cursor_us_ = cursor_us;
  previous_ = tick.processes;
  energy_counter_ = tick.energy_joules;
  pending_process_.clear();
  pending_exact_.clear();
  last_process_sample_us_.clear();
  std::erase_if(pending_power_, [&](const TimedSample& s) { return s.timestamp_us <= cursor_us_; });
  ++gaps_;  // of unknown length: nobody knows how long the agent was down
}

AdvanceResult GpuLedger::advance(const LedgerTick& tick) {
  AdvanceResult result;
  weight_ = tick.weight;
  rebase(tick.clock_step_us);
  if (options_.scheduler && tick.allocation) note_allocation(*tick.allocation);
  // Pending samples: a buffer read can run ahead of another by one period; keep what is not
  // used yet for the next tick instead of losing it.
  for (const auto& s : tick.power_samples) pending_power_.push_back(s);
  add_process_records(tick.process_samples, tick.processes);
  for (const auto& p : tick.processes) {
    if (p.busy_seconds && *p.busy_seconds > 0) pending_exact_[p.pid] += *p.busy_seconds;
  }
  if (tick.power_watts) last_power_w_ = tick.power_watts;
  const bool interrupted = std::exchange(interrupted_, false);

  std::vector<std::vector<Period>> runs(1);  // integrable stretches, split by gaps
  std::optional<double> energy_total;
  std::int64_t new_cursor = tick.wall_us;
  if (tick.utilization_samples_supported) {
    if (mode_ == Mode::kSamples && !tick.utilization_samples.empty()) {
      // A cursor ahead of the newest sample by more than the driver's jitter: the clock went
      // back by an amount nobody measured (while the agent was down). Waiting for the clock
      // to catch up would freeze the ledger for as long; it restarts from the GPU's now.
      std::int64_t newest = tick.utilization_samples.front().timestamp_us;
      for (const auto& s : tick.utilization_samples) newest = std::max(newest, s.timestamp_us);
      const auto jitter_us = static_cast<std::int64_t>(kHoleDevicePeriods * static_cast<double>(period_or_default()));
      if (cursor_us_ - newest > jitter_us) {
        result.cursor_ahead_us = cursor_us_ - newest;
        std::vector<TimedSample> seen = tick.utilization_samples;
        std::sort(seen.begin(), seen.end(),
                  [](const TimedSample& x, const TimedSample& y) { return x.timestamp_us < y.timestamp_us; });
        learn_device_period(seen);
        restart_at(newest, tick);
        return result;
      }
    }
    std::vector<TimedSample> fresh;
    for (const auto& s : tick.utilization_samples) {
      if (s.timestamp_us > cursor_us_ || mode_ != Mode::kSamples) fresh.push_back(s);
    }
    std::stable_sort(fresh.begin(), fresh.end(),
                     [](const TimedSample& x, const TimedSample& y) { return x.timestamp_us < y.timestamp_us; });
    learn_device_period(fresh);
    if (mode_ != Mode::kSamples) {
      // First tick (or a switch from polling): start at the newest sample; history from
      // before the agent ran is not charged.
      pending_exact_.clear();  // spent before the ledger's time starts
      if (fresh.empty()) return result;
      mode_ = Mode::kSamples;
      started_ = true;
      cursor_us_ = fresh.back().timestamp_us;
      previous_ = tick.processes;
      energy_counter_ = tick.energy_joules;
      return result;
    }
    if (fresh.empty()) return result;  // nothing new yet; the next tick picks it up
    // Each sample is the average over its own period, so consecutive samples tile time. A
    // longer hole means samples fell out of the buffer: count it as gap and start again after
    // it rather than stretch one sample over it.
    const std::int64_t hole_us =
        device_period_us_ > 0 ? static_cast<std::int64_t>(kHoleDevicePeriods * static_cast<double>(device_period_us_))
                              : options_.max_gap_us;
    std::int64_t start = cursor_us_;
    for (const auto& s : fresh) {
      if (s.timestamp_us - start > hole_us) {
        note_gap(s.timestamp_us - start);
        runs.emplace_back();
      } else {
        Period p{start, s.timestamp_us, std::clamp(s.value, 0.0, 1.0), std::nullopt};
        p.power_w = average_in(pending_power_, start, s.timestamp_us, [](const TimedSample& x) { return x.value; });
        runs.back().push_back(p);
      }
      start = s.timestamp_us;
    }
    new_cursor = start;  // after a gap at the newest sample, coverage starts there
    if (!tick.power_samples_supported && tick.energy_joules && runs.size() == 1) {
      // No power buffer: spread the energy counter's increase over the periods (not when part
      // of the time since the last reading is a gap: the increase covers the gap too).
      if (energy_counter_ && *tick.energy_joules >= *energy_counter_) {
        energy_total = *tick.energy_joules - *energy_counter_;
      }
    }
  } else {
    if (mode_ != Mode::kPolled) {
      pending_exact_.clear();  // spent before the ledger's time starts
      mode_ = Mode::kPolled;
      started_ = true;
      cursor_us_ = tick.wall_us;
      previous_ = tick.processes;
      energy_counter_ = tick.energy_joules;
      return result;
    }
    const std::int64_t d = tick.wall_us - cursor_us_;
    if (d <= -kClockStepThresholdUs) {
      // The cursor is in the future (the clock went back while the agent was down; a step
      // seen live has moved the cursor already).
      result.cursor_ahead_us = -d;
      restart_at(tick.wall_us, tick);
      return result;
    }
    if (d <= 0) {
      interrupted_ = interrupted;  // still owed to the next tick that moves time
      return result;
    }
    if (d > options_.max_gap_us || interrupted) {
      note_gap(d);
      pending_exact_.clear();
      cursor_us_ = tick.wall_us;
      previous_ = tick.processes;
      energy_counter_ = tick.energy_joules;
      return result;
    }
    runs.back().push_back({cursor_us_, tick.wall_us, std::clamp(tick.utilization_ratio.value_or(0.0), 0.0, 1.0),
                           tick.power_watts});
    // A counter that went backwards was reset (driver reload): fall back to power × time.
    if (tick.energy_joules && energy_counter_ && *tick.energy_joules >= *energy_counter_) {
      energy_total = *tick.energy_joules - *energy_counter_;
    }
  }
  if (runs.size() > 1) pending_exact_.clear();  // part of it may have been spent in the gap
  for (size_t i = 0; i < runs.size(); ++i) {
    if (i > 0) previous_.clear();  // who was present across a gap is unknown
    if (!runs[i].empty()) integrate(runs[i], tick, energy_total);
  }
  cursor_us_ = new_cursor;
  previous_ = tick.processes;
  energy_counter_ = tick.energy_joules;
  std::erase_if(pending_power_, [&](const TimedSample& s) { return s.timestamp_us <= cursor_us_; });
  // A window is kept while its carry may still reach past the cursor.
  const auto carry_us = static_cast<std::int64_t>(kCarryDevicePeriods * static_cast<double>(period_or_default()));
  std::erase_if(pending_process_, [&](const ProcessWindow& w) { return w.to_us + carry_us <= cursor_us_; });
  // Processes silent for a long time start afresh.
  std::erase_if(last_process_sample_us_,
                [&](const auto& kv) { return kv.second < cursor_us_ - 10 * kMaxProcessSampleSpanUs; });
  return result;
}

void GpuLedger::integrate(const std::vector<Period>& input, const LedgerTick& tick,
                          std::optional<double> energy_total) {
  std::vector<Period> periods;
  std::vector<OwnerSet> allocations;  // in effect over each period
  for (auto& [p, a] : split_at_allocation_changes(input)) {
    periods.push_back(p);
    allocations.push_back(std::move(a));
  }
  const OwnerLabels unattributed = unattributed_owner();
  std::map<OwnerLabels, LedgerTotals> delta;
  double tick_energy = 0;
  const double idle_w = options_.idle_power_watts;
  const double weight = tick.weight;

  // Members of each period: processes with a record whose window covers part of the period,
  // and processes listed at both ends of the collection interval (an idle process has no
  // records). A process's SM share in a period comes from its record windows over it, with its
  // last share carried over the hole before the next query's window.
  // A member's presence is the part of the period it was there: 1 for a process listed at both
  // ends of the collection interval, else the part its record windows cover (a process that
  // started or stopped inside the period is there for part of it only).
  struct Member {
    const LedgerProcess* proc;
    unsigned pid;
    double sm_seconds;
    double presence;
  };
  // Where each window's share is carried to: the same for every period, so found once.
  const std::vector<std::int64_t> carry_to = carry_ends();
  std::vector<std::vector<Member>> period_members(periods.size());
  for (size_t i = 0; i < periods.size(); ++i) {
    const Period& p = periods[i];
    if (p.end_us <= p.start_us) continue;
    std::vector<Member>& members = period_members[i];
    auto member = [&](unsigned pid) {
      return std::find_if(members.begin(), members.end(), [&](const Member& m) { return m.pid == pid; });
    };
    const double period_us = static_cast<double>(p.end_us - p.start_us);
    for (const auto& w : pending_process_) {
      const std::int64_t overlap = std::min(w.to_us, p.end_us) - std::max(w.from_us, p.start_us);
      if (overlap <= 0) continue;
      auto it = member(w.pid);
      if (it == members.end()) {
        const LedgerProcess* lp = find_pid(tick.processes, w.pid);
        if (lp == nullptr) lp = find_pid(previous_, w.pid);
        it = members.insert(members.end(), Member{lp, w.pid, 0.0, 0.0});
      }
      it->presence = std::min(1.0, it->presence + static_cast<double>(overlap) / period_us);
    }
    for (auto& m : members) {
      // Listed at both ends and started before the period: there for all of it.
      const LedgerProcess* before = find_pid(previous_, m.pid);
      const LedgerProcess* after = find_pid(tick.processes, m.pid);
      if (before != nullptr && after != nullptr && (!after->start_us || *after->start_us <= p.start_us)) {
        m.presence = 1.0;
      }
    }
    for (const auto& now : tick.processes) {
      if (member(now.pid) != members.end()) continue;
      if (find_pid(previous_, now.pid) != nullptr) {
        members.push_back({&now, now.pid, 0.0, 1.0});
      } else if (now.start_us && *now.start_us < p.end_us) {
        // Listed for the first time, with a start time from the host: there since it started.
        const double there = static_cast<double>(p.end_us - std::max(*now.start_us, p.start_us));
        members.push_back({&now, now.pid, 0.0, std::min(1.0, there / period_us)});
      }
    }
    if (!tick.process_samples_supported) {
      // Without per-process records, a process listed last time and gone now stopped at an
      // unknown instant of the reading: half of it is the estimate with the least error.
      for (const auto& before : previous_) {
        if (find_pid(tick.processes, before.pid) != nullptr || member(before.pid) != members.end()) continue;
        members.push_back({&before, before.pid, 0.0, 0.5});
      }
    }
    for (size_t k = 0; k < pending_process_.size(); ++k) {
      auto it = member(pending_process_[k].pid);
      if (it != members.end()) it->sm_seconds += share_seconds(pending_process_[k], carry_to[k], p.start_us, p.end_us);
    }
    // A process with exact busy time is a member where it holds some, whether or not it is
    // known to have been there (listed for the first time, without a start time): presence 0.
    for (const auto& [pid, e] : pending_exact_) {
      if (member(pid) != members.end()) continue;
      const LedgerProcess* lp = find_pid(tick.processes, pid);
      if (lp == nullptr) lp = find_pid(previous_, pid);
      members.push_back({lp, pid, 0.0, 0.0});
    }
  }
  // Exact busy time (LedgerProcess::busy_seconds) by member, spread over the periods in
  // proportion to their length; the sampled shares split only what is left of each period's busy
  // time, which is at least the exact time in it (the engine counters are exact, the polled
  // utilization is not).
  std::vector<std::vector<double>> exact(periods.size());
  std::vector<double> exact_sum(periods.size(), 0.0), period_busy(periods.size(), 0.0), shared(periods.size(), 0.0);
  {
    double total_us = 0;
    for (const Period& p : periods) total_us += static_cast<double>(std::max<std::int64_t>(0, p.end_us - p.start_us));
    for (size_t i = 0; i < periods.size(); ++i) {
      const double d = static_cast<double>(periods[i].end_us - periods[i].start_us) / 1e6;
      exact[i].assign(period_members[i].size(), 0.0);
      if (d > 0 && total_us > 0) {
        for (size_t k = 0; k < period_members[i].size(); ++k) {
          auto e = pending_exact_.find(period_members[i][k].pid);
          if (e == pending_exact_.end()) continue;
          exact[i][k] = e->second * d * 1e6 / total_us;
          exact_sum[i] += exact[i][k];
        }
      }
      // Every member measured exactly (graphics clients only): their engine time is the GPU's busy
      // time, and the polled utilization, an instant, would only add its sampling error.
      bool all_exact = !period_members[i].empty();
      for (const Member& m : period_members[i]) {
        if (m.proc == nullptr || !m.proc->busy_seconds) all_exact = false;
      }
      const double polled = periods[i].utilization * d * tick.weight;
      period_busy[i] = d > 0 ? (all_exact ? exact_sum[i] : std::max(polled, exact_sum[i])) : 0.0;
      shared[i] = period_busy[i] - exact_sum[i];
    }
    pending_exact_.clear();
  }
  // Each period's busy time split so that both the device's samples and each process's records
  // hold (ledger/share_fit.h): the window-average shares alone would move busy time between
  // processes whenever the mix changes inside a window.
  {
    std::vector<unsigned> pids;
    for (const auto& members : period_members) {
      for (const auto& m : members) {
        if (m.sm_seconds > 0 && std::find(pids.begin(), pids.end(), m.pid) == pids.end()) pids.push_back(m.pid);
      }
    }
    std::vector<std::vector<double>> prior(pids.size(), std::vector<double>(periods.size(), 0.0));
    std::vector<double> target(periods.size(), 0.0);
    for (size_t i = 0; i < periods.size(); ++i) {
      target[i] = tick.weight > 0 ? shared[i] / tick.weight : 0.0;  // SM seconds are not weighted
      for (const auto& m : period_members[i]) {
        if (m.sm_seconds <= 0) continue;
        prior[static_cast<size_t>(std::find(pids.begin(), pids.end(), m.pid) - pids.begin())][i] = m.sm_seconds;
      }
    }
    const auto fitted = fit_shares(prior, target);
    for (size_t i = 0; i < periods.size(); ++i) {
      for (auto& m : period_members[i]) {
        if (m.sm_seconds <= 0) continue;
        m.sm_seconds = fitted[static_cast<size_t>(std::find(pids.begin(), pids.end(), m.pid) - pids.begin())][i];
      }
    }
  }

  for (size_t i = 0; i < periods.size(); ++i) {
    const Period& p = periods[i];
    const double d = static_cast<double>(p.end_us - p.start_us) / 1e6;
    if (d <= 0) continue;
    const double ds = d * weight;  // GPU-seconds (LedgerTick::weight)
    const double power = p.power_w.value_or(last_power_w_.value_or(0.0));
    if (p.power_w) last_power_w_ = p.power_w;
    std::vector<Member>& members = period_members[i];

    const double busy = period_busy[i];
    const double energy = power * d;
    busy_seconds_ += busy;
    covered_seconds_ += ds;
    tick_energy += energy;
    // Who holds the period. Process policy: each member, for the part of it it was there.
    // Scheduler policy: owners, each once: every owner of the allocation for all of it, and the
    // owner of each process outside the allocation for the part its processes were there.
    struct Holder {
      const OwnerLabels* owner;
      double presence;          // the part of the period it holds
      double process_presence;  // the part of it one of its processes was there
      bool allocation;
    };
    std::vector<Holder> holders;
    std::vector<std::size_t> holder_of(members.size());
    double foreign = 0;  // the part a process outside the allocation was there
    if (options_.scheduler) {
      const std::vector<OwnerLabels>& allocation = *allocations[i];
      for (const auto& a : allocation) holders.push_back({&a, 1.0, 0.0, true});
      for (std::size_t k = 0; k < members.size(); ++k) {
        const OwnerLabels& o = members[k].proc != nullptr ? members[k].proc->owner : unattributed;
        auto h = std::find_if(holders.begin(), holders.begin() + static_cast<std::ptrdiff_t>(allocation.size()),
                              [&](const Holder& x) { return allocation_owns(*x.owner, o); });
        if (h == holders.begin() + static_cast<std::ptrdiff_t>(allocation.size())) {
          h = std::find_if(h, holders.end(), [&](const Holder& x) { return *x.owner == o; });
          if (h == holders.end()) h = holders.insert(h, Holder{&o, 0.0, 0.0, false});
          if (!allocation.empty()) foreign = std::max(foreign, members[k].presence);
        }
        h->process_presence = std::max(h->process_presence, members[k].presence);
        if (!h->allocation) h->presence = h->process_presence;
        holder_of[k] = static_cast<std::size_t>(h - holders.begin());
      }
    } else {
      for (std::size_t k = 0; k < members.size(); ++k) {
        const OwnerLabels& o = members[k].proc != nullptr ? members[k].proc->owner : unattributed;
        holders.push_back({&o, members[k].presence, members[k].presence, false});
        holder_of[k] = k;
      }
    }
    if (holders.empty()) {
      auto& t = delta[idle_owner()];
      t.allocated_seconds += ds;
      t.energy_joules += energy;
      if (busy > 0) delta[unattributed_owner()].busy_seconds += busy;
      continue;
    }
    foreign_seconds_ += ds * foreign;
    // Each holder's part of the period: its presence, shared evenly with the others present
    // (d / n when all are there throughout); what nobody covers is idle.
    double present = 0;
    for (const auto& h : holders) present += h.presence;
    const double crowd = std::max(1.0, present);
    const double rest = shared[i];  // what the sampled shares split
    if (!tick.process_samples_supported && members.size() == 1) members[0].sm_seconds = rest;
    double sm_sum = 0;
    for (const auto& m : members) sm_sum += m.sm_seconds;
    // The driver rounds every record to a whole percent, so the shares rarely add up to U:
    // splitting U·d in proportion keeps that rounding inside the members instead of sending
    // it to __unattributed__.
    const double idle_part = std::min(power, idle_w) * d;
    const double dynamic = energy - idle_part;
    const bool split = sm_sum > 0 && rest > 0;
    double allocated = 0;
    for (const auto& h : holders) {
      auto& t = delta[*h.owner];
      const double part = h.presence / crowd;
      t.allocated_seconds += ds * part;
      allocated += part;
      if (h.allocation) t.idle_allocated_seconds += ds * part * (1.0 - h.process_presence);
      t.energy_joules += idle_part * part;
      if (busy <= 0) t.energy_joules += dynamic * part;  // power above idle with no utilization: shared
    }
    for (std::size_t k = 0; k < members.size(); ++k) {
      const Member& m = members[k];
      auto& t = delta[*holders[holder_of[k]].owner];
      if (m.proc != nullptr) t.memory_byte_seconds += m.proc->memory_bytes * d * m.presence;
      const double mine = exact[i][k] + (split ? rest * m.sm_seconds / sm_sum : 0.0);
      if (mine > 0) {
        t.busy_seconds += mine;
        t.energy_joules += dynamic * mine / busy;
      }
    }
    if (allocated < 1.0 - 1e-12) {
      auto& idle = delta[idle_owner()];
      idle.allocated_seconds += ds * (1.0 - allocated);
      idle.energy_joules += (busy <= 0 ? energy : idle_part) * (1.0 - allocated);
    }
    if (rest > 0 && !split) {
      // Busy time no process claims any share of: it and its energy are unattributed.
      auto& u = delta[unattributed_owner()];
      u.busy_seconds += rest;
      u.energy_joules += dynamic * rest / busy;
    }
  }
  const double scale = energy_total && tick_energy > 0 ? *energy_total / tick_energy : 1.0;
  if (energy_total && tick_energy <= 0 && *energy_total > 0) {
    // The counter moved while the power basis said nothing: charge it like allocation.
    double alloc = 0;
    for (const auto& [o, t] : delta) alloc += t.allocated_seconds;
    for (auto& [o, t] : delta) t.energy_joules = alloc > 0 ? *energy_total * t.allocated_seconds / alloc : 0;
    energy_joules_ += *energy_total;
  } else {
    for (auto& [o, t] : delta) t.energy_joules *= scale;
    energy_joules_ += tick_energy * scale;
  }
  for (const auto& [o, t] : delta) charge(o, t, tick.wall_us);
}

void GpuLedger::charge(const OwnerLabels& owner, const LedgerTotals& d, std::int64_t wall_us) {
  auto& t = owners_[owner];
  t.allocated_seconds += d.allocated_seconds;
  t.busy_seconds += d.busy_seconds;
  t.memory_byte_seconds += d.memory_byte_seconds;
  t.energy_joules += d.energy_joules;
  t.idle_allocated_seconds += d.idle_allocated_seconds;
  t.last_active_us = std::max(t.last_active_us, wall_us);
}

std::size_t GpuLedger::prune(std::int64_t before_wall_us) {
  return std::erase_if(owners_, [&](const auto& kv) { return kv.second.last_active_us < before_wall_us; });
}

}  // namespace gpumeter
