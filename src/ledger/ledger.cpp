#include "ledger/ledger.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

namespace gpumeter {

LedgerEntry ledger_entry(const OwnerLabels& owner, const LedgerTotals& t, const MigUnitLabels& mig) {
  LedgerEntry e;
  e.owner = owner;
  e.allocated_seconds = t.allocated_seconds;
  e.busy_seconds = t.busy_seconds;
  e.memory_byte_seconds = t.memory_byte_seconds;
  e.energy_joules = t.energy_joules;
  e.idle_allocated_seconds = t.idle_allocated_seconds;
  e.idle_energy_joules = t.idle_energy_joules;
  e.mig = mig;
  return e;
}

const LedgerProcess* GpuLedger::find_pid(const std::vector<LedgerProcess>& v, unsigned pid) {
  for (const auto& p : v) {
    if (p.pid == pid) return &p;
  }
  return nullptr;
}

const LedgerProcess* GpuLedger::known_process(const std::vector<LedgerProcess>& now, unsigned pid) const {
  const LedgerProcess* p = find_pid(now, pid);
  return p != nullptr ? p : find_pid(previous_, pid);
}

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
  for (const auto member :
       {&OwnerLabels::namespace_, &OwnerLabels::pod, &OwnerLabels::container, &OwnerLabels::hpc_job}) {
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
  const std::int64_t at =
      pending_allocation_.empty() ? state.since_us : std::max(state.since_us, pending_allocation_.back().at_us);
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
  pending_allocation_.erase(pending_allocation_.begin(),
                            pending_allocation_.begin() + static_cast<std::ptrdiff_t>(next));
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
        w.from_us =
            prev->second >= s.covers_from_us - period_or_default() ? prev->second : std::max(w.from_us, prev->second);
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
    const LedgerProcess* lp = known_process(processes, s.pid);
    if (lp != nullptr && lp->start_us && *lp->start_us > w.from_us) w.from_us = *lp->start_us;
    if (w.from_us >= w.to_us) continue;
    last_process_sample_us_[s.pid] = s.timestamp_us;
    pending_process_.push_back(w);
  }
}

std::int64_t GpuLedger::learn_record_semantics(const LedgerTick& tick) {
  if (active_only_records_ || tick.utilization_samples.empty()) return 0;
  // The driver's now when the records were asked for; else the device's newest sample. Not the
  // reading's end: on a loaded host that can be long after the query.
  std::int64_t device_now = tick.process_samples_asked_us;
  for (const auto& s : tick.utilization_samples) device_now = std::max(device_now, s.timestamp_us);
  const auto stale_us = static_cast<std::int64_t>(kStaleRecordPeriods * static_cast<double>(period_or_default()));
  for (const auto& r : tick.process_samples) {
    // Still listed, so it did not stop: its newest sample is old because it was idle.
    if (find_pid(tick.processes, r.pid) != nullptr && device_now - r.timestamp_us > stale_us) {
      active_only_records_ = true;
      return device_now - r.timestamp_us;
    }
  }
  return 0;
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
  for (auto& s : pending_power_) {
    s.from_us += step_us;
    s.to_us += step_us;
  }
  if (last_power_us_ != 0) last_power_us_ += step_us;
  for (auto& w : pending_process_) {
    w.from_us += step_us;
    w.to_us += step_us;
  }
  for (auto& [pid, ts] : last_process_sample_us_) ts += step_us;
  for (auto& c : pending_allocation_) c.at_us += step_us;
}

void GpuLedger::start_at(std::int64_t cursor_us, const LedgerTick& tick) {
  pending_exact_.clear();  // spent before the ledger's time starts
  cursor_us_ = cursor_us;
  previous_ = tick.processes;
  energy_counter_ = tick.energy_joules;
}

void GpuLedger::restart_at(std::int64_t cursor_us, const LedgerTick& tick) {
  start_at(cursor_us, tick);
  pending_process_.clear();
  last_process_sample_us_.clear();
  std::erase_if(pending_power_, [&](const PowerSpan& s) { return s.to_us <= cursor_us_; });
  last_power_us_ = 0;  // samples after the restart are stamped on a clock that went back
  ++gaps_;             // of unknown length: nobody knows how long the agent was down
}

AdvanceResult GpuLedger::advance(const LedgerTick& tick) {
  AdvanceResult result;
  weight_ = tick.weight;
  rebase(tick.clock_step_us);
  take_pending(tick, result);
  const bool interrupted = std::exchange(interrupted_, false);
  std::optional<TickPeriods> periods =
      tick.utilization_samples_supported ? sampled_periods(tick, result) : polled_periods(tick, interrupted, result);
  if (periods) integrate_runs(*periods, tick);
  return result;
}

void GpuLedger::take_pending(const LedgerTick& tick, AdvanceResult& result) {
  if (options_.scheduler && tick.allocation) note_allocation(*tick.allocation);
  // Pending samples: a buffer read can run ahead of another by one period; keep what is not
  // used yet for the next tick instead of losing it.
  add_power_samples(tick.power_samples);
  result.active_only_record_age_us = learn_record_semantics(tick);
  add_process_records(tick.process_samples, tick.processes);
  for (const auto& p : tick.processes) {
    if (p.busy_seconds && *p.busy_seconds > 0) pending_exact_[p.pid] += *p.busy_seconds;
  }
  if (tick.power_watts) last_power_w_ = tick.power_watts;
}

bool GpuLedger::restart_if_ahead(const LedgerTick& tick, AdvanceResult& result) {
  // A cursor ahead of the newest sample by more than the driver's jitter: the clock went
  // back by an amount nobody measured (while the agent was down). Waiting for the clock
  // to catch up would freeze the ledger for as long; it restarts from the GPU's now.
  std::int64_t newest = tick.utilization_samples.front().timestamp_us;
  for (const auto& s : tick.utilization_samples) newest = std::max(newest, s.timestamp_us);
  const auto jitter_us = static_cast<std::int64_t>(kHoleDevicePeriods * static_cast<double>(period_or_default()));
  if (cursor_us_ - newest <= jitter_us) return false;
  result.cursor_ahead_us = cursor_us_ - newest;
  std::vector<TimedSample> seen = tick.utilization_samples;
  std::sort(seen.begin(), seen.end(),
            [](const TimedSample& x, const TimedSample& y) { return x.timestamp_us < y.timestamp_us; });
  learn_device_period(seen);
  restart_at(newest, tick);
  return true;
}

std::optional<GpuLedger::TickPeriods> GpuLedger::sampled_periods(const LedgerTick& tick, AdvanceResult& result) {
  if (mode_ == Mode::kSamples && !tick.utilization_samples.empty() && restart_if_ahead(tick, result)) {
    return std::nullopt;
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
    if (fresh.empty() && !idle_without_samples(tick)) return std::nullopt;
    mode_ = Mode::kSamples;
    started_ = true;
    if (fresh.empty()) {  // a buffer silent while the GPU idles: start at the GPU's now
      start_at(tick.wall_us - silent_margin_us(), tick);
      silent_idle_ = true;
      return std::nullopt;
    }
    start_at(fresh.back().timestamp_us, tick);
    return std::nullopt;
  }
  if (fresh.empty()) return silent_idle_periods(tick);  // else nothing new yet: the next tick picks it up
  TickPeriods out = sample_runs(fresh);
  estimate_missing_power(out);
  if (tick.energy_joules && out.runs.size() == 1) {
    // The energy counter is the reference: the periods' energy (from power samples, which the
    // sensor takes only part of the time on A100 and H100, or from polled power) is scaled to
    // its increase, so that the owners' energy adds up to the counter. Not when part of the
    // time since the last reading is a gap: the increase covers the gap too.
    if (energy_counter_ && *tick.energy_joules >= *energy_counter_) {
      out.energy_total = *tick.energy_joules - *energy_counter_;
    }
  }
  return out;
}

GpuLedger::Period GpuLedger::buffered_period(std::int64_t from_us, std::int64_t to_us, double utilization) const {
  return {from_us, to_us, utilization, power_over(from_us, to_us)};
}

void GpuLedger::add_power_samples(const std::vector<TimedSample>& samples) {
  // Each sample is the average since the one before it (a real driver's spacing follows the
  // GPU's state, docs/nvml-behaviour.md, "Power cadence"), so it stands for that time. The
  // first of a read stands for at most one device period back: samples before it may have left
  // a full buffer unread, and nothing in the read says so. A sample seen before is skipped.
  std::vector<TimedSample> sorted = samples;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const TimedSample& x, const TimedSample& y) { return x.timestamp_us < y.timestamp_us; });
  std::optional<std::int64_t> previous;  // the sample before, in this read
  for (const auto& s : sorted) {
    if (s.timestamp_us > last_power_us_) {
      const std::int64_t from = previous.value_or(std::max(last_power_us_, s.timestamp_us - period_or_default()));
      pending_power_.push_back({from, s.timestamp_us, s.value});
      last_power_us_ = s.timestamp_us;
    }
    previous = s.timestamp_us;
  }
}

std::optional<double> GpuLedger::power_over(std::int64_t from_us, std::int64_t to_us) const {
  double joules = 0, us = 0;
  for (const auto& s : pending_power_) {
    const auto overlap = static_cast<double>(std::min(s.to_us, to_us) - std::max(s.from_us, from_us));
    if (overlap <= 0) continue;
    joules += s.watts * overlap;
    us += overlap;
  }
  if (us <= 0) return std::nullopt;
  return joules / us;
}

void GpuLedger::estimate_missing_power(TickPeriods& periods) {
  // The whole tick teaches the fit first, so a period lost from the power buffer gets the
  // relation its own neighbours show; without any power sample yet, charge_period falls back to
  // the last power known.
  for (const auto& run : periods.runs) {
    for (const Period& p : run) {
      if (p.power_w) power_fit_.add(p.utilization, *p.power_w, static_cast<double>(p.end_us - p.start_us) / 1e6);
    }
  }
  for (auto& run : periods.runs) {
    for (Period& p : run) {
      if (!p.power_w) p.power_w = power_fit_.estimate(p.utilization);
    }
  }
}

std::optional<GpuLedger::TickPeriods> GpuLedger::silent_idle_periods(const LedgerTick& tick) {
  // polarsignals/gpu-metrics-agent#37: utilization buffers can answer NOT_FOUND for minutes
  // while the GPU idles. Only a GPU that answered and read 0 is idle; the last
  // kHoleDevicePeriods are left to samples the buffer may still deliver.
  if (!idle_without_samples(tick)) return std::nullopt;
  const std::int64_t until = tick.wall_us - silent_margin_us();
  if (until <= cursor_us_ || until - cursor_us_ > options_.max_gap_us) return std::nullopt;
  TickPeriods out;
  Period p = buffered_period(cursor_us_, until, 0.0);
  if (!p.power_w) p.power_w = tick.power_watts;
  out.runs.back().push_back(p);
  out.new_cursor = until;
  silent_idle_ = true;
  return out;
}

GpuLedger::TickPeriods GpuLedger::sample_runs(const std::vector<TimedSample>& fresh) {
  // Each sample is the average over its own period, so consecutive samples tile time. A
  // longer hole means samples fell out of the buffer: count it as gap and start again after
  // it rather than stretch one sample over it.
  const std::int64_t hole_us =
      device_period_us_ > 0 ? static_cast<std::int64_t>(kHoleDevicePeriods * static_cast<double>(device_period_us_))
                            : options_.max_gap_us;
  TickPeriods out;
  std::int64_t start = cursor_us_;
  if (silent_idle_ && !fresh.empty() && fresh.front().timestamp_us - start > hole_us &&
      fresh.front().timestamp_us - start <= options_.max_gap_us) {
    // The buffer was silent because the GPU idled: up to the first new sample's own period, the
    // time was idle too.
    const std::int64_t idle_until = fresh.front().timestamp_us - period_or_default();
    out.runs.back().push_back(buffered_period(start, idle_until, 0.0));
    start = idle_until;
  }
  silent_idle_ = false;
  for (const auto& s : fresh) {
    if (s.timestamp_us - start > hole_us) {
      note_gap(s.timestamp_us - start);
      out.runs.emplace_back();
    } else {
      out.runs.back().push_back(buffered_period(start, s.timestamp_us, std::clamp(s.value, 0.0, 1.0)));
    }
    start = s.timestamp_us;
  }
  out.new_cursor = start;  // after a gap at the newest sample, coverage starts there
  return out;
}

std::optional<GpuLedger::TickPeriods> GpuLedger::polled_periods(const LedgerTick& tick, bool interrupted,
                                                                AdvanceResult& result) {
  if (mode_ != Mode::kPolled) {
    mode_ = Mode::kPolled;
    started_ = true;
    start_at(tick.wall_us, tick);
    return std::nullopt;
  }
  const std::int64_t d = tick.wall_us - cursor_us_;
  if (d <= -kClockStepThresholdUs) {
    // The cursor is in the future (the clock went back while the agent was down; a step
    // seen live has moved the cursor already).
    result.cursor_ahead_us = -d;
    restart_at(tick.wall_us, tick);
    return std::nullopt;
  }
  if (d <= 0) {
    interrupted_ = interrupted;  // still owed to the next tick that moves time
    return std::nullopt;
  }
  if (d > options_.max_gap_us || interrupted) {
    note_gap(d);
    start_at(tick.wall_us, tick);
    return std::nullopt;
  }
  TickPeriods out;
  out.new_cursor = tick.wall_us;
  out.runs.back().push_back(
      {cursor_us_, tick.wall_us, std::clamp(tick.utilization_ratio.value_or(0.0), 0.0, 1.0), tick.power_watts});
  // A counter that went backwards was reset (driver reload): fall back to power × time.
  if (tick.energy_joules && energy_counter_ && *tick.energy_joules >= *energy_counter_) {
    out.energy_total = *tick.energy_joules - *energy_counter_;
  }
  return out;
}

void GpuLedger::integrate_runs(const TickPeriods& periods, const LedgerTick& tick) {
  const auto& runs = periods.runs;
  if (runs.size() > 1) pending_exact_.clear();  // part of it may have been spent in the gap
  for (size_t i = 0; i < runs.size(); ++i) {
    if (i > 0) previous_.clear();  // who was present across a gap is unknown
    if (!runs[i].empty()) integrate(runs[i], tick, periods.energy_total);
  }
  cursor_us_ = periods.new_cursor;
  previous_ = tick.processes;
  energy_counter_ = tick.energy_joules;
  std::erase_if(pending_power_, [&](const PowerSpan& s) { return s.to_us <= cursor_us_; });
  // A window is kept while its carry may still reach past the cursor.
  const auto carry_us = static_cast<std::int64_t>(kCarryDevicePeriods * static_cast<double>(period_or_default()));
  std::erase_if(pending_process_, [&](const ProcessWindow& w) { return w.to_us + carry_us <= cursor_us_; });
  // Processes silent for a long time start afresh.
  std::erase_if(last_process_sample_us_,
                [&](const auto& kv) { return kv.second < cursor_us_ - 10 * kMaxProcessSampleSpanUs; });
}

std::size_t GpuLedger::prune(std::int64_t before_wall_us) {
  return std::erase_if(owners_, [&](const auto& kv) { return kv.second.last_active_us < before_wall_us; });
}

}  // namespace gpumeter
