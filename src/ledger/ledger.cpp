#include "ledger/ledger.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

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

nlohmann::json owner_json(const OwnerLabels& o) {
  return {{"project", o.project}, {"user", o.user},           {"namespace", o.namespace_},
          {"pod", o.pod},         {"container", o.container}, {"hpc_job", o.hpc_job}};
}

struct MalformedField : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The integer at j[key]. get<integer>() casts a floating-point number without a range check
// (undefined for 1e300) and wraps a negative one into an unsigned type; the state file is
// read back from disk, where anything can have happened to it.
template <typename T>
T integer_at(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = j.at(key);
  if (v.is_number_unsigned()) {
    if (const auto u = v.get<std::uint64_t>(); std::in_range<T>(u)) return static_cast<T>(u);
  } else if (v.is_number_integer()) {
    if (const auto i = v.get<std::int64_t>(); std::in_range<T>(i)) return static_cast<T>(i);
  }
  throw MalformedField(std::string("\"") + key + "\" is not an integer in range: " + v.dump());
}

OwnerLabels owner_from_json(const nlohmann::json& j) {
  OwnerLabels o;
  o.project = j.at("project").get<std::string>();
  o.user = j.at("user").get<std::string>();
  o.namespace_ = j.at("namespace").get<std::string>();
  o.pod = j.at("pod").get<std::string>();
  o.container = j.at("container").get<std::string>();
  o.hpc_job = j.at("hpc_job").get<std::string>();
  return o;
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

void GpuLedger::note_gap(std::int64_t us) {
  if (us <= 0) return;
  gap_seconds_ += static_cast<double>(us) / 1e6;
  ++gaps_;
}

void GpuLedger::advance(const LedgerTick& tick) {
  // Pending samples: a buffer read can run ahead of another by one period; keep what is not
  // used yet for the next tick instead of losing it.
  for (const auto& s : tick.power_samples) pending_power_.push_back(s);
  for (const auto& s : tick.process_samples) {
    // What a process sample covers: back to the same process's previous sample, or one device
    // period for its first, never more than kMaxProcessSampleSpan (NVML sends nothing for an
    // idle process, so a long silence is not spread over).
    auto prev = last_process_sample_us_.find(s.pid);
    std::int64_t from = prev != last_process_sample_us_.end() ? prev->second : s.timestamp_us - device_period_us_;
    if (from >= s.timestamp_us) continue;  // repeated or out of order
    from = std::max(from, s.timestamp_us - kMaxProcessSampleSpanUs);
    last_process_sample_us_[s.pid] = s.timestamp_us;
    pending_process_.push_back({s, from});
  }
  if (tick.power_watts) last_power_w_ = tick.power_watts;

  std::vector<Period> periods;
  std::optional<double> energy_total;
  if (tick.utilization_samples_supported) {
    std::vector<TimedSample> fresh;
    for (const auto& s : tick.utilization_samples) {
      if (s.timestamp_us > cursor_us_ || mode_ != Mode::kSamples) fresh.push_back(s);
    }
    if (mode_ != Mode::kSamples) {
      // First tick (or a switch from polling): start at the newest sample; history from
      // before the agent ran is not charged.
      if (fresh.empty()) return;
      mode_ = Mode::kSamples;
      started_ = true;
      cursor_us_ = fresh.back().timestamp_us;
      previous_ = tick.processes;
      energy_counter_ = tick.energy_joules;
      return;
    }
    if (fresh.empty()) return;  // nothing new yet; the next tick picks it up
    if (fresh.front().timestamp_us - cursor_us_ > options_.max_gap_us) {
      note_gap(fresh.front().timestamp_us - cursor_us_);
      cursor_us_ = fresh.front().timestamp_us;
      fresh.erase(fresh.begin());
      previous_.clear();  // who was present across the gap is unknown
    }
    std::int64_t start = cursor_us_;
    if (fresh.size() >= 2) device_period_us_ = fresh.back().timestamp_us - fresh[fresh.size() - 2].timestamp_us;
    for (const auto& s : fresh) {
      Period p{start, s.timestamp_us, std::clamp(s.value, 0.0, 1.0), std::nullopt};
      p.power_w = average_in(pending_power_, start, s.timestamp_us, [](const TimedSample& x) { return x.value; });
      periods.push_back(p);
      start = s.timestamp_us;
    }
    if (!tick.power_samples_supported && tick.energy_joules) {
      // No power buffer: spread the energy counter's increase over the periods.
      if (energy_counter_ && *tick.energy_joules >= *energy_counter_) {
        energy_total = *tick.energy_joules - *energy_counter_;
      }
    }
  } else {
    if (mode_ != Mode::kPolled) {
      mode_ = Mode::kPolled;
      started_ = true;
      cursor_us_ = tick.wall_us;
      previous_ = tick.processes;
      energy_counter_ = tick.energy_joules;
      return;
    }
    const std::int64_t d = tick.wall_us - cursor_us_;
    if (d <= 0) return;
    if (d > options_.max_gap_us) {
      note_gap(d);
      cursor_us_ = tick.wall_us;
      previous_ = tick.processes;
      energy_counter_ = tick.energy_joules;
      return;
    }
    periods.push_back({cursor_us_, tick.wall_us, std::clamp(tick.utilization_ratio.value_or(0.0), 0.0, 1.0),
                       tick.power_watts});
    // A counter that went backwards was reset (driver reload): fall back to power × time.
    if (tick.energy_joules && energy_counter_ && *tick.energy_joules >= *energy_counter_) {
      energy_total = *tick.energy_joules - *energy_counter_;
    }
  }
  integrate(periods, tick, energy_total);
  cursor_us_ = periods.back().end_us;
  previous_ = tick.processes;
  energy_counter_ = tick.energy_joules;
  std::erase_if(pending_power_, [&](const TimedSample& s) { return s.timestamp_us <= cursor_us_; });
  std::erase_if(pending_process_, [&](const CoveringSample& s) { return s.sample.timestamp_us <= cursor_us_; });
  // Processes silent for a long time start afresh.
  std::erase_if(last_process_sample_us_,
                [&](const auto& kv) { return kv.second < cursor_us_ - 10 * kMaxProcessSampleSpanUs; });
}

void GpuLedger::integrate(const std::vector<Period>& periods, const LedgerTick& tick,
                          std::optional<double> energy_total) {
  std::map<OwnerLabels, LedgerTotals> delta;
  double tick_energy = 0;
  const double idle_w = options_.idle_power_watts;
  for (const Period& p : periods) {
    const double d = static_cast<double>(p.end_us - p.start_us) / 1e6;
    if (d <= 0) continue;
    const double power = p.power_w.value_or(last_power_w_.value_or(0.0));
    if (p.power_w) last_power_w_ = p.power_w;

    // Members: processes whose utilization samples cover part of the period, and processes
    // listed at both ends of the collection interval. A process sample covers the time since
    // that process's previous sample (at most kMaxProcessSampleSpan), so process and device
    // samples need not share a grid; a process's SM share is the time-weighted average of the
    // samples covering the period.
    struct Member {
      const LedgerProcess* proc;
      unsigned pid;
      double sm;
    };
    std::vector<Member> members;
    for (const auto& s : pending_process_) {
      const std::int64_t overlap =
          std::min(s.sample.timestamp_us, p.end_us) - std::max(s.covers_from_us, p.start_us);
      if (overlap <= 0) continue;
      auto it = std::find_if(members.begin(), members.end(), [&](const Member& m) { return m.pid == s.sample.pid; });
      if (it == members.end()) {
        const LedgerProcess* lp = find_pid(tick.processes, s.sample.pid);
        if (lp == nullptr) lp = find_pid(previous_, s.sample.pid);
        it = members.insert(members.end(), Member{lp, s.sample.pid, 0.0});
      }
      it->sm += s.sample.sm_ratio * static_cast<double>(overlap) / static_cast<double>(p.end_us - p.start_us);
    }
    for (const auto& now : tick.processes) {
      if (find_pid(previous_, now.pid) == nullptr) continue;
      if (std::any_of(members.begin(), members.end(), [&](const Member& m) { return m.pid == now.pid; })) continue;
      members.push_back({&now, now.pid, 0.0});
    }

    const double busy = p.utilization * d;
    const double energy = power * d;
    busy_seconds_ += busy;
    covered_seconds_ += d;
    tick_energy += energy;
    if (members.empty()) {
      auto& t = delta[idle_owner()];
      t.allocated_seconds += d;
      t.energy_joules += energy;
      if (busy > 0) delta[unattributed_owner()].busy_seconds += busy;
      continue;
    }
    const double n = static_cast<double>(members.size());
    if (!tick.process_samples_supported && members.size() == 1) members[0].sm = p.utilization;
    double sm_sum = 0;
    for (const auto& m : members) sm_sum += m.sm;
    const double attributed = std::min(p.utilization, sm_sum);
    const double idle_part = std::min(power, idle_w) * d;
    const double dynamic = energy - idle_part;
    double unattributed_busy = busy;
    for (const auto& m : members) {
      const OwnerLabels& owner = m.proc != nullptr ? m.proc->owner : unattributed_owner();
      auto& t = delta[owner];
      t.allocated_seconds += d / n;
      if (m.proc != nullptr) t.memory_byte_seconds += m.proc->memory_bytes * d;
      t.energy_joules += idle_part / n;
      if (sm_sum > 0) {
        const double b = attributed * d * (m.sm / sm_sum);
        t.busy_seconds += b;
        unattributed_busy -= b;
        if (busy > 0) t.energy_joules += dynamic * (b / busy);
      } else if (busy <= 0) {
        t.energy_joules += dynamic / n;  // power above idle with no utilization: shared
      }
    }
    if (busy > 0 && unattributed_busy > busy * 1e-9) {
      // What the process shares do not cover: its busy time and the matching energy.
      const double rest = unattributed_busy;
      auto& u = delta[unattributed_owner()];
      u.busy_seconds += rest;
      u.energy_joules += dynamic * (rest / busy);
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
  t.last_active_us = std::max(t.last_active_us, wall_us);
}

std::size_t GpuLedger::prune(std::int64_t before_wall_us) {
  return std::erase_if(owners_, [&](const auto& kv) { return kv.second.last_active_us < before_wall_us; });
}

nlohmann::json GpuLedger::to_json() const {
  nlohmann::json j;
  j["mode"] = mode_ == Mode::kSamples ? "samples" : mode_ == Mode::kPolled ? "polled" : "none";
  j["cursor_us"] = cursor_us_;
  if (energy_counter_) j["energy_counter_joules"] = *energy_counter_;
  j["covered_seconds"] = covered_seconds_;
  j["busy_seconds"] = busy_seconds_;
  j["energy_joules"] = energy_joules_;
  j["gap_seconds"] = gap_seconds_;
  j["gaps"] = gaps_;
  auto& procs = j["processes"] = nlohmann::json::array();
  for (const auto& p : previous_) {
    procs.push_back({{"pid", p.pid}, {"owner", owner_json(p.owner)}, {"memory_bytes", p.memory_bytes}});
  }
  auto& owners = j["owners"] = nlohmann::json::array();
  for (const auto& [o, t] : owners_) {
    owners.push_back({{"owner", owner_json(o)},
                      {"allocated_seconds", t.allocated_seconds},
                      {"busy_seconds", t.busy_seconds},
                      {"memory_byte_seconds", t.memory_byte_seconds},
                      {"energy_joules", t.energy_joules},
                      {"last_active_us", t.last_active_us}});
  }
  return j;
}

Result<GpuLedger> GpuLedger::from_json(const nlohmann::json& j, GpuLedgerOptions options) {
  try {
    GpuLedger l(options);
    const std::string mode = j.at("mode").get<std::string>();
    if (mode == "samples") {
      l.mode_ = Mode::kSamples;
    } else if (mode == "polled") {
      l.mode_ = Mode::kPolled;
    } else if (mode != "none") {
      return Error{1, "unknown ledger mode '" + mode + "'"};
    }
    l.started_ = l.mode_ != Mode::kNone;
    l.cursor_us_ = integer_at<std::int64_t>(j, "cursor_us");
    if (j.contains("energy_counter_joules")) l.energy_counter_ = j.at("energy_counter_joules").get<double>();
    l.covered_seconds_ = j.at("covered_seconds").get<double>();
    l.busy_seconds_ = j.at("busy_seconds").get<double>();
    l.energy_joules_ = j.at("energy_joules").get<double>();
    l.gap_seconds_ = j.at("gap_seconds").get<double>();
    l.gaps_ = integer_at<std::uint64_t>(j, "gaps");
    for (const auto& p : j.at("processes")) {
      l.previous_.push_back(
          {integer_at<unsigned>(p, "pid"), owner_from_json(p.at("owner")), p.at("memory_bytes").get<double>()});
    }
    for (const auto& o : j.at("owners")) {
      LedgerTotals t;
      t.allocated_seconds = o.at("allocated_seconds").get<double>();
      t.busy_seconds = o.at("busy_seconds").get<double>();
      t.memory_byte_seconds = o.at("memory_byte_seconds").get<double>();
      t.energy_joules = o.at("energy_joules").get<double>();
      t.last_active_us = integer_at<std::int64_t>(o, "last_active_us");
      for (double v : {t.allocated_seconds, t.busy_seconds, t.memory_byte_seconds, t.energy_joules}) {
        if (!std::isfinite(v) || v < 0) return Error{1, "a ledger counter is negative or not finite"};
      }
      l.owners_[owner_from_json(o.at("owner"))] = t;
    }
    return l;
  } catch (const nlohmann::json::exception& e) {
    return Error{1, std::string("malformed ledger entry: ") + e.what()};
  } catch (const MalformedField& e) {
    return Error{1, std::string("malformed ledger entry: ") + e.what()};
  }
}

}  // namespace gpumeter
