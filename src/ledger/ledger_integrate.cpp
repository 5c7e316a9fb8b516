// How one tick's periods are divided among the owners present over them (ledger.h, "GpuLedger").

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "ledger/ledger.h"
#include "ledger/share_fit.h"

namespace gpumeter {

// A process present over a period: its SM seconds in it, and the part of it it was there.
struct GpuLedger::Member {
  const LedgerProcess* proc;
  unsigned pid;
  double sm_seconds;
  double presence;
};

std::vector<std::vector<GpuLedger::Member>> GpuLedger::period_members(const std::vector<Period>& periods,
                                                                      const LedgerTick& tick) const {
  // Where each window's share is carried to: the same for every period, so found once.
  const std::vector<std::int64_t> carry_to = carry_ends();
  std::vector<std::vector<Member>> out(periods.size());
  for (size_t i = 0; i < periods.size(); ++i) {
    const Period& p = periods[i];
    if (p.end_us <= p.start_us) continue;
    std::vector<Member>& members = out[i];
    auto member = [&](unsigned pid) {
      return std::find_if(members.begin(), members.end(), [&](const Member& m) { return m.pid == pid; });
    };
    const double period_us = static_cast<double>(p.end_us - p.start_us);
    for (const auto& w : pending_process_) {
      const std::int64_t overlap = std::min(w.to_us, p.end_us) - std::max(w.from_us, p.start_us);
      if (overlap <= 0) continue;
      auto it = member(w.pid);
      if (it == members.end()) {
        it = members.insert(members.end(), Member{known_process(tick.processes, w.pid), w.pid, 0.0, 0.0});
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
      members.push_back({known_process(tick.processes, pid), pid, 0.0, 0.0});
    }
  }
  return out;
}

// Each period's busy time: the exact part of each member (in the order of the period's members)
// and their sum, the period's busy time, and what the sampled shares split (busy − exact).
struct GpuLedger::PeriodBusy {
  std::vector<std::vector<double>> exact;
  std::vector<double> exact_sum, busy, shared;
};

// Who holds a period: an owner, the part of the period it holds, the part of it one of its
// processes was there, and whether it holds it by the scheduler's allocation.
struct GpuLedger::Holder {
  const OwnerLabels* owner;
  double presence;
  double process_presence;
  bool allocation;
};

bool GpuLedger::faulty(const Period& p, const LedgerTick& tick) {
  const std::int64_t mid = p.start_us + (p.end_us - p.start_us) / 2;
  return std::any_of(tick.faults.begin(), tick.faults.end(),
                     [&](const FaultSpan& f) { return mid >= f.from_us && mid < f.to_us; });
}

void GpuLedger::integrate(const std::vector<Period>& input, const LedgerTick& tick,
                          std::optional<double> energy_total) {
  std::vector<Period> periods;
  std::vector<OwnerSet> allocations;  // in effect over each period
  for (auto& [p, a] : split_at_allocation_changes(input)) {
    periods.push_back(p);
    allocations.push_back(std::move(a));
  }
  std::map<OwnerLabels, LedgerTotals> delta;
  double tick_energy = 0;
  std::vector<std::vector<Member>> period_members = this->period_members(periods, tick);
  const PeriodBusy busy = period_busy(periods, period_members, tick);
  if (active_only_records_) active_member_shares(period_members, periods, busy.shared, tick.weight);
  fit_member_shares(period_members, busy.shared, tick.weight);
  for (size_t i = 0; i < periods.size(); ++i) {
    if (!faulty(periods[i], tick)) {
      tick_energy += charge_period(periods[i], period_members[i], *allocations[i], busy.exact[i], busy.busy[i],
                                   busy.shared[i], tick, delta);
      continue;
    }
    std::map<OwnerLabels, LedgerTotals> part;
    tick_energy += charge_period(periods[i], period_members[i], *allocations[i], busy.exact[i], busy.busy[i],
                                 busy.shared[i], tick, part);
    for (auto& [o, t] : part) {
      OwnerLabels f = o;
      f.fault = kFaultValue;
      delta[f] += t;
    }
  }
  settle_energy(delta, tick_energy, energy_total);
  for (const auto& [o, t] : delta) charge(o, t, tick.wall_us);
}

GpuLedger::PeriodBusy GpuLedger::period_busy(const std::vector<Period>& periods,
                                             const std::vector<std::vector<Member>>& period_members,
                                             const LedgerTick& tick) {
  // Exact busy time (LedgerProcess::busy_seconds) by member, spread over the periods in
  // proportion to their length; the sampled shares split only what is left of each period's busy
  // time, which is at least the exact time in it (the engine counters are exact, the polled
  // utilization is not).
  PeriodBusy out;
  out.exact.resize(periods.size());
  out.exact_sum.assign(periods.size(), 0.0);
  out.busy.assign(periods.size(), 0.0);
  out.shared.assign(periods.size(), 0.0);
  double total_us = 0;
  for (const Period& p : periods) total_us += static_cast<double>(std::max<std::int64_t>(0, p.end_us - p.start_us));
  for (size_t i = 0; i < periods.size(); ++i) {
    const double d = static_cast<double>(periods[i].end_us - periods[i].start_us) / 1e6;
    out.exact[i].assign(period_members[i].size(), 0.0);
    if (d > 0 && total_us > 0) {
      for (size_t k = 0; k < period_members[i].size(); ++k) {
        auto e = pending_exact_.find(period_members[i][k].pid);
        if (e == pending_exact_.end()) continue;
        out.exact[i][k] = e->second * d * 1e6 / total_us;
        out.exact_sum[i] += out.exact[i][k];
      }
    }
    // Every member measured exactly (graphics clients only): their engine time is the GPU's busy
    // time, and the polled utilization, an instant, would only add its sampling error.
    bool all_exact = !period_members[i].empty();
    for (const Member& m : period_members[i]) {
      if (m.proc == nullptr || !m.proc->busy_seconds) all_exact = false;
    }
    const double polled = periods[i].utilization * d * tick.weight;
    out.busy[i] = d > 0 ? (all_exact ? out.exact_sum[i] : std::max(polled, out.exact_sum[i])) : 0.0;
    out.shared[i] = out.busy[i] - out.exact_sum[i];
  }
  pending_exact_.clear();
  return out;
}

namespace {

// The members' SM seconds as a grid: the pids with some in any period, and grid[j][period].
struct SmGrid {
  std::vector<unsigned> pids;
  std::vector<std::vector<double>> seconds;

  size_t row(unsigned pid) const {
    return static_cast<size_t>(std::find(pids.begin(), pids.end(), pid) - pids.begin());
  }
};

template <typename Member>
SmGrid sm_grid(const std::vector<std::vector<Member>>& period_members) {
  SmGrid g;
  for (const auto& members : period_members) {
    for (const auto& m : members) {
      if (m.sm_seconds > 0 && std::find(g.pids.begin(), g.pids.end(), m.pid) == g.pids.end()) g.pids.push_back(m.pid);
    }
  }
  g.seconds.assign(g.pids.size(), std::vector<double>(period_members.size(), 0.0));
  for (size_t i = 0; i < period_members.size(); ++i) {
    for (const auto& m : period_members[i]) {
      if (m.sm_seconds > 0) g.seconds[g.row(m.pid)][i] = m.sm_seconds;
    }
  }
  return g;
}

// Writes `fitted` (a grid over g's pids) back to the members that had SM seconds.
template <typename Member>
void set_sm_seconds(std::vector<std::vector<Member>>& period_members, const SmGrid& g,
                    const std::vector<std::vector<double>>& fitted) {
  for (size_t i = 0; i < period_members.size(); ++i) {
    for (auto& m : period_members[i]) {
      if (m.sm_seconds > 0) m.sm_seconds = fitted[g.row(m.pid)][i];
    }
  }
}

}  // namespace

void GpuLedger::active_member_shares(std::vector<std::vector<Member>>& period_members,
                                     const std::vector<Period>& periods, const std::vector<double>& shared,
                                     double weight) {
  if (weight <= 0) return;
  SmGrid g = sm_grid(period_members);
  std::vector<double> busy(periods.size(), 0.0);
  std::vector<double> seconds(periods.size(), 0.0);
  for (size_t i = 0; i < periods.size(); ++i) {
    seconds[i] = static_cast<double>(periods[i].end_us - periods[i].start_us) / 1e6;
    if (seconds[i] > 0) busy[i] = shared[i] / (weight * seconds[i]);
    for (auto& row : g.seconds) row[i] = seconds[i] > 0 ? row[i] / seconds[i] : 0.0;  // levels
  }
  std::vector<std::vector<double>> fitted = active_levels(g.seconds, busy);
  for (auto& row : fitted) {
    for (size_t i = 0; i < periods.size(); ++i) row[i] *= seconds[i];
  }
  set_sm_seconds(period_members, g, fitted);
}

void GpuLedger::fit_member_shares(std::vector<std::vector<Member>>& period_members, const std::vector<double>& shared,
                                  double weight) {
  // Each period's busy time split so that both the device's samples and each process's records
  // hold (ledger/share_fit.h): the window-average shares alone would move busy time between
  // processes whenever the mix changes inside a window.
  const SmGrid g = sm_grid(period_members);
  std::vector<double> target(period_members.size(), 0.0);
  for (size_t i = 0; i < period_members.size(); ++i) {
    target[i] = weight > 0 ? shared[i] / weight : 0.0;  // SM seconds are not weighted
  }
  set_sm_seconds(period_members, g, fit_shares(g.seconds, target));
}

std::vector<GpuLedger::Holder> GpuLedger::period_holders(const std::vector<Member>& members,
                                                         const std::vector<OwnerLabels>& allocation,
                                                         std::vector<std::size_t>& holder_of, double& foreign) const {
  // Who holds the period. Process policy: each member, for the part of it it was there.
  // Scheduler policy: owners, each once: every owner of the allocation for all of it, and the
  // owner of each process outside the allocation for the part its processes were there.
  static const OwnerLabels unattributed = unattributed_owner();
  std::vector<Holder> holders;
  holder_of.assign(members.size(), 0);
  foreign = 0;  // the part a process outside the allocation was there
  if (!options_.scheduler) {
    for (std::size_t k = 0; k < members.size(); ++k) {
      const OwnerLabels& o = members[k].proc != nullptr ? members[k].proc->owner : unattributed;
      holders.push_back({&o, members[k].presence, members[k].presence, false});
      holder_of[k] = k;
    }
    return holders;
  }
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
  return holders;
}

double GpuLedger::charge_period(const Period& p, std::vector<Member>& members,
                                const std::vector<OwnerLabels>& allocation, const std::vector<double>& exact,
                                double busy, double rest, const LedgerTick& tick,
                                std::map<OwnerLabels, LedgerTotals>& delta) {
  const double d = static_cast<double>(p.end_us - p.start_us) / 1e6;
  if (d <= 0) return 0;
  const double ds = d * tick.weight;  // GPU-seconds (LedgerTick::weight)
  const double power = p.power_w.value_or(last_power_w_.value_or(0.0));
  if (p.power_w) last_power_w_ = p.power_w;
  const double energy = power * d;
  busy_seconds_ += busy;
  covered_seconds_ += ds;
  std::vector<std::size_t> holder_of;
  double foreign = 0;
  const std::vector<Holder> holders = period_holders(members, allocation, holder_of, foreign);
  if (holders.empty()) {
    auto& t = delta[idle_owner()];
    t.allocated_seconds += ds;
    t.energy_joules += energy;
    t.idle_energy_joules += std::min(power, options_.idle_power_watts) * d;
    if (busy > 0) delta[unattributed_owner()].busy_seconds += busy;
    return energy;
  }
  foreign_seconds_ += ds * foreign;
  // Each holder's part of the period: its presence, shared evenly with the others present
  // (d / n when all are there throughout); what nobody covers is idle. `rest` is what the
  // sampled shares split.
  double present = 0;
  for (const auto& h : holders) present += h.presence;
  const double crowd = std::max(1.0, present);
  if (!tick.process_samples_supported && members.size() == 1) members[0].sm_seconds = rest;
  double sm_sum = 0;
  for (const auto& m : members) sm_sum += m.sm_seconds;
  // The driver rounds every record to a whole percent, so the shares rarely add up to U:
  // splitting U·d in proportion keeps that rounding inside the members instead of sending
  // it to __unattributed__.
  const double idle_part = std::min(power, options_.idle_power_watts) * d;
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
    t.idle_energy_joules += idle_part * part;
    if (busy <= 0) t.energy_joules += dynamic * part;  // power above idle with no utilization: shared
  }
  for (std::size_t k = 0; k < members.size(); ++k) {
    const Member& m = members[k];
    auto& t = delta[*holders[holder_of[k]].owner];
    if (m.proc != nullptr) t.memory_byte_seconds += m.proc->memory_bytes * d * m.presence;
    const double mine = exact[k] + (split ? rest * m.sm_seconds / sm_sum : 0.0);
    if (mine > 0) {
      t.busy_seconds += mine;
      t.energy_joules += dynamic * mine / busy;
    }
  }
  if (allocated < 1.0 - 1e-12) {
    auto& idle = delta[idle_owner()];
    idle.allocated_seconds += ds * (1.0 - allocated);
    idle.energy_joules += (busy <= 0 ? energy : idle_part) * (1.0 - allocated);
    idle.idle_energy_joules += idle_part * (1.0 - allocated);
  }
  if (rest > 0 && !split) {
    // Busy time no process claims any share of: it and its energy are unattributed.
    auto& u = delta[unattributed_owner()];
    u.busy_seconds += rest;
    u.energy_joules += dynamic * rest / busy;
  }
  return energy;
}

void GpuLedger::settle_energy(std::map<OwnerLabels, LedgerTotals>& delta, double tick_energy,
                              std::optional<double> energy_total) {
  const double scale = energy_total && tick_energy > 0 ? *energy_total / tick_energy : 1.0;
  if (energy_total && tick_energy <= 0 && *energy_total > 0) {
    // The counter moved while the power basis said nothing: charge it like allocation.
    double alloc = 0;
    for (const auto& [o, t] : delta) alloc += t.allocated_seconds;
    // With no power basis there is no idle part to tell: it is all the owners' active energy.
    for (auto& [o, t] : delta) {
      t.energy_joules = alloc > 0 ? *energy_total * t.allocated_seconds / alloc : 0;
      t.idle_energy_joules = 0;
    }
    energy_joules_ += *energy_total;
  } else {
    for (auto& [o, t] : delta) {
      t.energy_joules *= scale;
      t.idle_energy_joules *= scale;
    }
    energy_joules_ += tick_energy * scale;
  }
}

void GpuLedger::charge(const OwnerLabels& owner, const LedgerTotals& d, std::int64_t wall_us) {
  auto& t = owners_[owner];
  t += d;
  t.last_active_us = std::max(t.last_active_us, wall_us);
}

}  // namespace gpumeter
