#pragma once
// The exact usage ledger of one GPU: integrates allocation, busy time, memory and energy per
// owner at the agent's sampling rate, independent of any scrape.
//
// Time comes from the driver's sample buffers where the GPU has them (NVML keeps ~20 s of
// utilization samples and 119 power samples, 4 s to 2 min of them, each the average over its
// period), so every period is integrated once, with its own average, whatever the polling
// jitter; a period no power sample covers gets the power the GPU's sampled periods say it
// draws at that utilization. A GPU without sample buffers is integrated from polled values over
// the wall time between collections.
//
// For each period of length d with the set M of members present (processes, each owned by
// one OwnerLabels), device utilization U, power P and idle power I:
//   allocated:  d / |M| to each member's owner; d to __idle__ when M is empty
//   busy:       a member's exact busy time E (LedgerProcess::busy_seconds) as it is; the rest,
//               max(U·d, ΣE) − ΣE (nothing when every member is measured exactly: ΣE is then
//               the GPU's busy time), split in proportion to the members' SM shares; only busy
//               time with no share at all (or no member) goes to __unattributed__ (a lone
//               member takes it all where the GPU has no per-process utilization at all)
//   memory:     each member's memory · d
//   energy:     min(P, I)·d / |M| to each member, the rest (P − I)·d by busy share; P·d to
//               __idle__ when M is empty
//   idle energy: the min(P, I)·d part of each member's energy (and of __idle__'s)
// A period inside one of the tick's fault spans is charged the same way, to each owner with its
// `fault` label set (__idle__'s and __unattributed__'s too).
// so per GPU, Σ allocated = covered seconds, Σ busy = ∫U (or the exact busy time where that is
// more), Σ energy = ∫P, exactly.
//
// Under the scheduler policy (GpuLedgerOptions::scheduler) the members are owners, not
// processes: the owners the scheduler allocated the GPU to (LedgerTick::allocation), whether or
// not a process runs, plus the owners of processes outside every allocation. A process inside
// an allocation (allocation_owns) is charged to the allocation's owner. With n owners present:
//   allocated:       d / n to each; d to __idle__ when nobody is present
//   idle_allocated:  d / n to an allocation none of whose processes is present
//   busy, memory:    from the processes, as above, to their (allocation's) owner
//   energy:          min(P, I)·d / n to each owner, the rest by busy share
// and the GPU's foreign seconds count the time a process outside every allocation ran on a
// GPU that was allocated to someone.
//
// A per-process record is the process's average since the previous query (the window the
// driver was asked about), so SM shares come from record windows, not from device periods;
// docs/ledger.md gives the rules and what they leave approximate.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "ledger/power_fit.h"
#include "model/owner.h"
#include "model/reading.h"
#include "model/snapshot.h"
#include "util/result.h"

namespace gpumeter {

struct LedgerTotals {
  double allocated_seconds = 0;
  double busy_seconds = 0;
  double memory_byte_seconds = 0;
  double energy_joules = 0;
  // The part of energy_joules drawn at the board's idle power (GpuLedgerOptions::
  // idle_power_watts) while the owner held the GPU; the rest is its active energy.
  double idle_energy_joules = 0;
  std::int64_t last_active_us = 0;  // wall clock of the last period the owner was charged
  // Scheduler policy: the part of allocated_seconds when none of the owner's processes was on
  // the GPU (an allocation held idle).
  double idle_allocated_seconds = 0;
  bool operator==(const LedgerTotals&) const = default;
  // Adds the amounts; last_active_us is the caller's.
  LedgerTotals& operator+=(const LedgerTotals& o) {
    allocated_seconds += o.allocated_seconds;
    busy_seconds += o.busy_seconds;
    memory_byte_seconds += o.memory_byte_seconds;
    energy_joules += o.energy_joules;
    idle_energy_joules += o.idle_energy_joules;
    idle_allocated_seconds += o.idle_allocated_seconds;
    return *this;
  }
};

// A stretch of time [from_us, to_us) (the system clock) in which a GPU was faulty: it did not
// answer because it was lost, or an error that kills work had struck it (docs/ledger.md,
// "Faulty GPUs"). to_us is INT64_MAX while it lasts.
struct FaultSpan {
  std::int64_t from_us = 0;
  std::int64_t to_us = 0;
  bool operator==(const FaultSpan&) const = default;
};

struct LedgerProcess {
  unsigned pid = 0;
  OwnerLabels owner;
  double memory_bytes = 0;
  // When the process started (the system clock, µs), where the host says: no record window
  // reaches back before it.
  std::optional<std::int64_t> start_us;
  // Busy seconds measured exactly by the host since the previous tick (a DRM client's engine
  // time, attribution/drm_fdinfo.h): charged as they are, ahead of the sampled shares, which
  // split only the rest of the GPU's busy time. Set (even to 0) only on processes whose whole
  // busy time it is, e.g. graphics clients the backend does not list.
  std::optional<double> busy_seconds;
  bool operator==(const LedgerProcess&) const = default;
};

// The owners a scheduler allocated a GPU to, from since_us (the system clock, µs) on: the
// instant the source saw the change, or its best estimate of it.
struct AllocationState {
  std::vector<OwnerLabels> owners;  // sorted, each once
  std::int64_t since_us = 0;
  bool operator==(const AllocationState&) const = default;
};

// Whether a process with owner `process` runs inside the allocation of owner `allocation`: each
// scheduler label the allocation has (namespace, pod, container, hpc_job) is the process's too,
// and it has at least one.
bool allocation_owns(const OwnerLabels& allocation, const OwnerLabels& process);

// One collection of one GPU, with owners already resolved.
struct LedgerTick {
  std::int64_t wall_us = 0;  // system clock when the collection finished
  std::vector<LedgerProcess> processes;
  bool utilization_samples_supported = false;
  std::vector<TimedSample> utilization_samples;
  bool power_samples_supported = false;
  std::vector<TimedSample> power_samples;
  bool process_samples_supported = false;
  std::vector<ProcessSample> process_samples;
  std::int64_t process_samples_asked_us = 0;  // UsageReading::process_samples_asked_us
  std::optional<double> utilization_ratio;    // polled
  std::optional<double> power_watts;          // polled
  std::optional<double> energy_joules;        // the device's energy counter
  // The wall clock, and with it the driver's sample clock, stepped by this much since the
  // previous tick (UsageReading::clock_step_us): the ledger's times move with it first.
  std::int64_t clock_step_us = 0;
  // Scheduler policy: the GPU's allocation as the scheduler sources say now. Unset: unchanged.
  std::optional<AllocationState> allocation;
  // The part of the GPU this ledger bills, 0..1: 1 for a whole GPU; on a GPU in MIG mode, an
  // instance's slices of the GPU's (3/7 for a 3g instance), or the part no instance holds for
  // the GPU's own ledger. Seconds (allocated, busy, covered, gap, foreign) are GPU-seconds: each
  // second of this tick's time counts `weight`. Memory and energy are not scaled.
  double weight = 1;
  // When the GPU was faulty: a period whose middle lies in one is charged to its owners with
  // `fault` set, so a bill can keep it apart.
  std::vector<FaultSpan> faults;
};

// What a tick found out about the ledger's own clock.
struct AdvanceResult {
  // > 0: the cursor was this far ahead of the GPU's clock (the wall clock went back while the
  // agent was down, by an unknown amount): integration restarted from the GPU's now, and the
  // time in between counts as one gap of unknown length.
  std::int64_t cursor_ahead_us = 0;
  // > 0: this tick showed that the GPU's per-process records average active samples only (a
  // listed process's newest record was this old, docs/ledger.md): said once per ledger.
  std::int64_t active_only_record_age_us = 0;
};

// A hole between consecutive utilization samples longer than this many device periods means
// samples were lost (the buffer overflowed while the agent was down or the GPU hung): it is a
// gap, not one sample stretched over it. One and a half tolerates a driver's timing jitter.
inline constexpr double kHoleDevicePeriods = 1.5;
// The longest a process's SM share is carried past its last record, in device periods: the
// driver stamps each record with the process's own last sample time, so the next query's
// window starts up to one device period later.
inline constexpr double kCarryDevicePeriods = 1.5;

struct GpuLedgerOptions {
  double idle_power_watts = 0;
  // Polled mode (no sample buffers): longer stretches between collections are not integrated,
  // nobody knows who used the GPU then; they are counted as gap seconds. With sample buffers
  // the samples themselves say what is missing (a hole of more than kHoleDevicePeriods).
  std::int64_t max_gap_us = 10'000'000;
  // The scheduler allocation policy (see the top of this file); false: the process policy.
  bool scheduler = false;
};

// An owner's totals as a snapshot's ledger entry, on the MIG device `mig` (empty: the GPU).
LedgerEntry ledger_entry(const OwnerLabels& owner, const LedgerTotals& t, const MigUnitLabels& mig = {});

// The owner of processes that cannot be resolved (gone before they could be looked up).
OwnerLabels unattributed_owner();
OwnerLabels idle_owner();

class GpuLedger {
 public:
  explicit GpuLedger(GpuLedgerOptions options = {}) : options_(options) {}

  AdvanceResult advance(const LedgerTick& tick);
  // The wall clock stepped by `step_us` (+ forward): every time the ledger keeps (the cursor,
  // owners' last activity, pending records) moves with it, so the next samples, stamped on
  // the new clock, continue where the old ones stopped: nothing frozen, nothing counted twice,
  // and owners are not pruned by a step forward.
  void rebase(std::int64_t step_us);
  // A collection failed. Polled values are not stretched over it: the next tick restarts the
  // integration and counts the time since the last one as gap. (Sample buffers cover a
  // failure by themselves; what they lost shows as a hole in the samples.)
  void interrupt() { interrupted_ = true; }

  const std::map<OwnerLabels, LedgerTotals>& owners() const { return owners_; }
  // Device-level integrals over the covered time: the invariants' right-hand sides.
  double covered_seconds() const { return covered_seconds_; }
  double busy_seconds() const { return busy_seconds_; }
  double energy_joules() const { return energy_joules_; }
  double gap_seconds() const { return gap_seconds_; }
  // Scheduler policy: covered time when a process outside every allocation ran on the GPU while
  // it was allocated to someone.
  double foreign_seconds() const { return foreign_seconds_; }
  // The allocation in effect at the cursor.
  const std::vector<OwnerLabels>& allocated() const { return *allocated_; }
  std::uint64_t gaps() const { return gaps_; }
  // End of the covered time (sample clock, µs), 0 before the first tick.
  std::int64_t cursor_us() const { return cursor_us_; }
  // Spacing of the device's utilization samples, 0 until two have been seen.
  std::int64_t device_period_us() const { return device_period_us_; }
  bool started() const { return started_; }

  // Drops owners not charged since `before_wall_us` (retention). Returns how many.
  std::size_t prune(std::int64_t before_wall_us);
  void set_options(GpuLedgerOptions o) { options_ = o; }
  const GpuLedgerOptions& options() const { return options_; }

  nlohmann::json to_json() const;
  // Reads a ledger back. A structural fault (a key missing, a mode unknown, an owner listed
  // twice) fails it. An amount that cannot be true (a NaN saved as null, an infinity, a negative
  // number) restarts at 0, which Prometheus reads as a counter reset, and is described in
  // `dropped`: one bad number never costs the rest of the ledger.
  static Result<GpuLedger> from_json(const nlohmann::json& j, GpuLedgerOptions options,
                                     std::vector<std::string>* dropped = nullptr);

 private:
  enum class Mode { kNone, kSamples, kPolled };
  struct Period {
    std::int64_t start_us, end_us;
    double utilization;  // 0..1
    // Average over the period: the power samples' over the part they cover, else the estimate
    // (estimate_missing_power); unset when neither is known.
    std::optional<double> power_w;
  };
  using OwnerSet = std::shared_ptr<const std::vector<OwnerLabels>>;
  // Whether the middle of period `p` lies in one of the tick's fault spans.
  static bool faulty(const Period& p, const LedgerTick& tick);
  // Divides the periods' time, busy time and energy among the owners present (ledger_integrate.cpp).
  void integrate(const std::vector<Period>& periods, const LedgerTick& tick, std::optional<double> energy_total);
  struct Member;
  // Members of each period: processes with a record whose window covers part of the period,
  // and processes listed at both ends of the collection interval (an idle process has no
  // records). A process's SM share in a period comes from its record windows over it, with its
  // last share carried over the hole before the next query's window.
  // A member's presence is the part of the period it was there: 1 for a process listed at both
  // ends of the collection interval, else the part its record windows cover (a process that
  // started or stopped inside the period is there for part of it only).
  std::vector<std::vector<Member>> period_members(const std::vector<Period>& periods, const LedgerTick& tick) const;
  struct PeriodBusy;
  // Each period's busy time, with the pending exact busy time spread over the periods in
  // proportion to their length (and then dropped: it is integrated).
  PeriodBusy period_busy(const std::vector<Period>& periods, const std::vector<std::vector<Member>>& period_members,
                         const LedgerTick& tick);
  // Fits the members' SM seconds to what the sampled shares split of each period (`shared`).
  static void fit_member_shares(std::vector<std::vector<Member>>& period_members, const std::vector<double>& shared,
                                double weight);
  struct Holder;
  // Who holds a period with `members` under `allocation`; `holder_of` gets each member's holder,
  // `foreign` the part of the period a process outside the allocation was there.
  std::vector<Holder> period_holders(const std::vector<Member>& members, const std::vector<OwnerLabels>& allocation,
                                     std::vector<std::size_t>& holder_of, double& foreign) const;
  // Divides one period's time, busy time (`busy`, of which the sampled shares split `rest`) and
  // energy among its holders into `delta`. Returns the period's energy.
  double charge_period(const Period& p, std::vector<Member>& members, const std::vector<OwnerLabels>& allocation,
                       const std::vector<double>& exact, double busy, double rest, const LedgerTick& tick,
                       std::map<OwnerLabels, LedgerTotals>& delta);
  // Scales the owners' energy in `delta` to the energy counter's increase where there is one,
  // and adds the tick's energy to the device's.
  void settle_energy(std::map<OwnerLabels, LedgerTotals>& delta, double tick_energy,
                     std::optional<double> energy_total);
  static const LedgerProcess* find_pid(const std::vector<LedgerProcess>& v, unsigned pid);
  // The process of the pid in `now`, else in the previous tick's list.
  const LedgerProcess* known_process(const std::vector<LedgerProcess>& now, unsigned pid) const;
  // The periods cut at each pending allocation change inside them, each with the allocation in
  // effect over it; changes at or before a period's start take effect first.
  std::vector<std::pair<Period, OwnerSet>> split_at_allocation_changes(const std::vector<Period>& periods);
  void note_allocation(const AllocationState& state);
  void charge(const OwnerLabels& owner, const LedgerTotals& delta, std::int64_t wall_us);
  void note_gap(std::int64_t us);
  // Starts the ledger's time at `cursor_us` with the tick's processes and energy counter: exact
  // busy time noted before it is not charged.
  void start_at(std::int64_t cursor_us, const LedgerTick& tick);
  // Starts again at `cursor_us` after a gap of unknown length, forgetting every pending record.
  void restart_at(std::int64_t cursor_us, const LedgerTick& tick);

  // What one tick gives to integrate: stretches of periods split by gaps, the energy counter's
  // increase over them (unset: power × time), and where the cursor moves to.
  struct TickPeriods {
    std::vector<std::vector<Period>> runs = std::vector<std::vector<Period>>(1);
    std::optional<double> energy_total;
    std::int64_t new_cursor = 0;
  };
  // Queues what the tick brings for the periods it covers: the allocation, power samples,
  // per-process records and exact busy time.
  void take_pending(const LedgerTick& tick, AdvanceResult& result);
  // Sample mode: restarts from the newest sample when the cursor is ahead of it by more than
  // the driver's jitter, and says so in `result`. Returns whether it restarted.
  bool restart_if_ahead(const LedgerTick& tick, AdvanceResult& result);
  // The periods of a tick with sample buffers; nullopt when there is nothing to integrate (the
  // first tick, nothing new, a restart).
  std::optional<TickPeriods> sampled_periods(const LedgerTick& tick, AdvanceResult& result);
  // The period (from_us, to_us] at `utilization`, its power the power buffer's average over it
  // (unset where the buffer has no sample there).
  Period buffered_period(std::int64_t from_us, std::int64_t to_us, double utilization) const;
  // The utilization samples after the cursor (sorted) as periods, split at each hole.
  TickPeriods sample_runs(const std::vector<TimedSample>& fresh);
  // Learns the GPU's power against its utilization from the periods with power samples, and
  // gives each period without one the estimate (ledger/power_fit.h).
  void estimate_missing_power(TickPeriods& periods);
  // A tick without new samples on a GPU that reads idle: the sample buffer may have stopped
  // filling (some drivers do while the GPU idles), so the time since the cursor, but the last
  // kHoleDevicePeriods, is idle, not gap. nullopt when there is nothing to integrate.
  std::optional<TickPeriods> silent_idle_periods(const LedgerTick& tick);
  // The GPU answered and read idle (polled utilization 0) on a tick whose buffer had nothing new.
  static bool idle_without_samples(const LedgerTick& tick) {
    return tick.utilization_samples_supported && tick.utilization_ratio && *tick.utilization_ratio <= 0;
  }
  // What the buffer may still deliver of the time before a tick.
  std::int64_t silent_margin_us() const {
    return static_cast<std::int64_t>(kHoleDevicePeriods * static_cast<double>(period_or_default()));
  }
  // The period of a tick without sample buffers: the wall time since the cursor; nullopt when
  // there is nothing to integrate (the first tick, no time passed, a gap, a restart).
  std::optional<TickPeriods> polled_periods(const LedgerTick& tick, bool interrupted, AdvanceResult& result);
  // Integrates each run and moves the cursor, dropping what is used up of the pending records.
  void integrate_runs(const TickPeriods& periods, const LedgerTick& tick);

  GpuLedgerOptions options_;
  bool started_ = false;
  Mode mode_ = Mode::kNone;
  std::int64_t cursor_us_ = 0;
  std::optional<double> energy_counter_;  // last counter reading (polled mode)
  std::vector<LedgerProcess> previous_;   // the process list of the previous tick
  std::optional<double> last_power_w_;
  // A power sample: the average over (from_us, to_us], the time since the sample before it.
  struct PowerSpan {
    std::int64_t from_us = 0, to_us = 0;
    double watts = 0;
  };
  // Queues the power samples of a read, each for the time it stands for.
  void add_power_samples(const std::vector<TimedSample>& samples);
  // The time-weighted average of the pending power samples over (from_us, to_us], unset where
  // none covers any of it.
  std::optional<double> power_over(std::int64_t from_us, std::int64_t to_us) const;
  std::vector<PowerSpan> pending_power_;  // not yet used up by utilization periods
  std::int64_t last_power_us_ = 0;        // the newest power sample's stamp; 0: none yet
  PowerFit power_fit_;                    // power against utilization, from the sampled periods
  // Exact busy seconds by pid (LedgerProcess::busy_seconds) not yet integrated; spread over the
  // next integrated periods, dropped with a gap (nobody knows when in the gap they were spent).
  std::map<unsigned, double> pending_exact_;
  // What one per-process record says: the process's SM share over (from_us, to_us].
  struct ProcessWindow {
    unsigned pid = 0;
    std::int64_t from_us = 0, to_us = 0;
    double sm = 0;
    // A record of a known query window (covers_from_us set): its share is carried over the
    // hole between the process's own last sample and the next query's window start. A record
    // without one is carried only up to a known window start.
    bool carries = false;
  };
  void add_process_records(const std::vector<ProcessSample>& records, const std::vector<LedgerProcess>& processes);
  // A window's SM seconds over [start_us, end_us), its share carried from its end to carry_to_us.
  static double share_seconds(const ProcessWindow& w, std::int64_t carry_to_us, std::int64_t start_us,
                              std::int64_t end_us);
  // Where each pending window's share is carried to, in the order of pending_process_.
  std::vector<std::int64_t> carry_ends() const;
  void learn_device_period(const std::vector<TimedSample>& fresh);
  std::int64_t period_or_default() const { return device_period_us_ > 0 ? device_period_us_ : kDefaultPeriodUs; }

  // Without covers_from_us, a record covers the time since the same process's previous
  // record, at most this long (NVML sends nothing for an idle process).
  static constexpr std::int64_t kMaxProcessSampleSpanUs = 1'000'000;
  static constexpr std::int64_t kDefaultPeriodUs = 200'000;
  // Whether this GPU's driver averages a process's record over its active samples only: seen
  // once a listed process's newest record is stale (share_fit.h, active_levels; the window
  // variant stamps every live process's record within a period of now).
  // Returns the stale record's age when this tick showed it, else 0.
  std::int64_t learn_record_semantics(const LedgerTick& tick);
  // Active-only records: each member's SM share in each period as the device's busy time says
  // it ran (share_fit.h, active_levels).
  static void active_member_shares(std::vector<std::vector<Member>>& period_members, const std::vector<Period>& periods,
                                   const std::vector<double>& shared, double weight);
  bool active_only_records_ = false;
  // A listed process's record older than this many device periods shows active-only records.
  static constexpr double kStaleRecordPeriods = 1.5;
  std::vector<ProcessWindow> pending_process_;  // not yet fully used (carry included)
  std::map<unsigned, std::int64_t> last_process_sample_us_;
  std::int64_t device_period_us_ = 0;  // spacing of the device's utilization samples; 0: not seen yet
  bool interrupted_ = false;           // a collection failed since the last tick
  bool silent_idle_ = false;           // the last tick integrated a silent buffer as idle
  double weight_ = 1;                  // the current tick's LedgerTick::weight, for gaps
  std::map<OwnerLabels, LedgerTotals> owners_;
  double covered_seconds_ = 0;
  double busy_seconds_ = 0;
  double energy_joules_ = 0;
  double gap_seconds_ = 0;
  std::uint64_t gaps_ = 0;
  double foreign_seconds_ = 0;
  // Scheduler policy: the allocation in effect at the cursor, and changes not yet reached.
  OwnerSet allocated_ = std::make_shared<const std::vector<OwnerLabels>>();
  struct AllocationChange {
    std::int64_t at_us;
    OwnerSet owners;
  };
  std::vector<AllocationChange> pending_allocation_;
};

}  // namespace gpumeter
