#pragma once
// The simulated node's host side for `gpumeter sim procfs`: a fake procfs tree
// (<dir>/proc/<pid>/{cgroup,stat,status,environ,comm,cmdline}) and <dir>/etc/passwd for the
// scenario's processes, so an agent given --path.procfs=<dir>/proc can attribute simulated
// pids to owners. The tree follows the scenario clock: a pid's entry exists from `lead`
// scenario time before its job starts until `lead` after it ends, so an agent that sees a pid
// in NVML always finds its entry, even when it reads /proc a little late.
//
// Every change is atomic for a reader: an entry is written into <dir>/proc/.<pid>.tmp/ and
// renamed into place (or exchanged with the entry it replaces), and removed by renaming it
// away first, so <dir>/proc/<pid> is always either absent or complete.
//
// Processes of jobs on AMD GPUs also get fd/ and fdinfo/ (sim/host/drm_files.h): their DRM files
// while the job runs, with a graphics client's engine time rewritten every `drm_period`.
//
// When the scenario has Slurm allocations, the tree also holds the HPC job-mapping directory
// <dir>/run/gpumeter-hpc-jobs/ (see slurm_tree.h), and, when asked, the jobs' cgroup trees
// under <dir>/sys/fs/cgroup with a batch script process per job (see slurm_cgroup_tree.h),
// kept in step by the same sync().

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/host/drm_files.h"
#include "sim/host/slurm_cgroup_tree.h"
#include "sim/host/slurm_tree.h"
#include "sim/scenario/env_config.h"
#include "sim/scenario/scenario.h"
#include "util/result.h"

namespace gpumeter::sim {

inline constexpr Micros kDefaultHostLead = 5 * kMicrosPerSecond;
inline constexpr Micros kDefaultDrmPeriod = 100'000;  // 100 ms

// Clock ticks per second in /proc/<pid>/stat (USER_HZ on every Linux architecture).
inline constexpr std::uint64_t kClockTicksPerSecond = 100;
// The simulated node booted about a day before scenario time 0, so start times are plausible.
// With a known epoch the boot is put on the whole simulated unix second a day before it, so
// that `btime` in /proc/stat (whole seconds, as the kernel writes it) plus a process's start
// ticks gives the simulated unix time of the job's start to the tick.
inline constexpr Micros kBootBeforeScenario = 86400 * kMicrosPerSecond;
struct SimulatedBoot {
  std::optional<std::int64_t> btime;             // simulated unix seconds; unset: no /proc/stat written
  Micros before_scenario = kBootBeforeScenario;  // from the boot to scenario time 0
};
// The boot of a node whose scenario time 0 is at simulated unix time epoch_unix_us.
SimulatedBoot boot_for_epoch(std::optional<std::int64_t> epoch_unix_us);

// One pid's entry, owned by one job during [from, to). Jobs that reuse a pid at different
// times get disjoint windows: where their lead margins would overlap, the gap between the
// first one's end and the next one's start is split at its midpoint.
struct ProcessWindow {
  unsigned pid = 0;
  std::size_t job = 0;  // index into Scenario::jobs
  Micros from = 0;
  Micros to = kForever;
  std::uint64_t start_ticks = 0;  // stat field 22: clock ticks after boot when the job started
};

// Every pid's windows, sorted by pid then time.
std::vector<ProcessWindow> process_windows(const Scenario& scenario, Micros lead,
                                           Micros boot_before_scenario = kBootBeforeScenario);

// The file contents of one entry.
std::string proc_comm(const Job& job);  // the job name cut to 15 bytes, as the kernel does
std::string proc_cgroup(const Job& job);
std::string proc_stat(const Job& job, const ProcessWindow& w);
std::string proc_status(const Scenario& scenario, const Job& job, const ProcessWindow& w);
std::string proc_environ(const Scenario& scenario, const Job& job);
std::string proc_cmdline(const Job& job);
std::string etc_passwd(const Scenario& scenario);
std::string proc_stat_file(std::int64_t btime);  // /proc/stat: its btime line is what readers need
std::string home_of(const Scenario& scenario, unsigned uid);

// The procfs tree under one directory, kept in step with scenario time by sync().
class ProcfsTree {
 public:
  // Creates <dir>/proc and <dir>/etc, writes <dir>/etc/passwd (and <dir>/proc/stat when the
  // boot time is known) and takes over what an earlier writer left in <dir>/proc (its entries
  // are replaced or removed by the first sync()). With a Slurm cgroup layout other than kNone
  // and Slurm allocations in the scenario, the tree also writes their cgroups and batch scripts.
  static Result<std::unique_ptr<ProcfsTree>> open(const std::filesystem::path& dir, const Scenario& scenario,
                                                  Micros lead, SimulatedBoot boot = {},
                                                  SlurmCgroupLayout slurm_cgroups = SlurmCgroupLayout::kNone,
                                                  Micros drm_period = kDefaultDrmPeriod);

  // Makes <dir>/proc hold exactly the entries of the windows that contain t (t < 0 counts as 0,
  // as the library reads time 0 before its epoch).
  Result<void> sync(Micros t);

  // The earliest window edge after t, when the next sync() may change something (or the next
  // rewrite of a graphics client's counters); kForever if none.
  Micros next_change_after(Micros t) const;

  // Counts the processes' start times from a boot `boot_before_scenario` before scenario time 0
  // instead of the one the tree was opened with; only before the first sync(). A held clock's
  // tree is opened before its epoch is known (`gpumeter sim procfs --follow`).
  void rebase(Micros boot_before_scenario);

  // The pids present after the last sync(), with the job each belongs to.
  const std::map<unsigned, std::size_t>& present() const { return present_; }

  // The HPC job-mapping files, or null when the scenario has no Slurm allocation.
  const HpcJobsTree* hpc_jobs() const { return hpc_jobs_.get(); }
  // The Slurm jobs' cgroup trees, or null when not written.
  const SlurmCgroupTree* slurm_cgroups() const { return slurm_cgroups_.get(); }

 private:
  ProcfsTree(std::filesystem::path dir, const Scenario& scenario, Micros lead, Micros boot_before_scenario);
  Result<void> write_entry(const ProcessWindow& w, bool replace);
  Result<void> remove_entry(unsigned pid);
  Result<void> sync_drm(Micros t);

  static constexpr std::size_t kUnknownJob = static_cast<std::size_t>(-1);
  std::filesystem::path proc_;
  const Scenario& scenario_;
  Micros lead_;
  std::vector<ProcessWindow> windows_;
  std::vector<Micros> edges_;                // every window's from and to, sorted, unique
  std::map<unsigned, std::size_t> present_;  // pid -> job (kUnknownJob: left by an earlier run)
  std::unique_ptr<HpcJobsTree> hpc_jobs_;
  // The scenario with the Slurm batch scripts added, when they are written (scenario_ is it).
  std::unique_ptr<Scenario> with_batch_scripts_;
  std::unique_ptr<SlurmCgroupTree> slurm_cgroups_;
  std::unique_ptr<DrmFiles> drm_;
  std::map<unsigned, std::map<unsigned, OpenFile>> drm_written_;  // pid -> fd -> what is written
};

// Scenario time for the host-side commands, from the same settings the library reads.
class HostClock {
 public:
  virtual ~HostClock() = default;
  virtual Micros now() = 0;
  // False while a held clock waits for its epoch file (time stands at 0 until then).
  virtual bool started() const = 0;
  // The simulated unix time (µs) of scenario time 0, unset when time stands still at 0; while a
  // held clock waits, the time of the call.
  virtual std::optional<std::int64_t> epoch_unix_us() const = 0;
  // Waits until scenario time t has arrived; false when the command is asked to stop first.
  virtual bool wait_until(Micros t) = 0;
};

// The wall clock as the library maps it: GPUMETER_SIM_EPOCH (or GPUMETER_SIM_EPOCH_FILE, a held
// clock) and GPUMETER_SIM_TIME_SCALE (the scenario's time_scale otherwise), through the library's
// own environment parsing and Session clock. With neither epoch set it is `fallback_epoch_ns` if
// given, else time stands at 0. A held clock stands at 0 until its file is written; its
// epoch_unix_us() is then the time of each call, so a tree opened while held boots a day before
// it opened, and its processes' start times count from the opening, not from the epoch.
// wait_until() returns false as soon as SIGINT or SIGTERM arrives; call block_stop_signals()
// first, before any thread starts.
Result<std::unique_ptr<HostClock>> make_scenario_clock(const Scenario& scenario, const std::string& scenario_path,
                                                       const EnvLookup& getenv,
                                                       std::optional<std::int64_t> fallback_epoch_ns);

// Blocks SIGINT and SIGTERM in the calling thread (and the threads it starts later), so that
// they are taken by wait_for_stop_signal() or a HostClock's wait_until() instead.
void block_stop_signals();
// Waits up to `timeout_ns` (forever when negative) for SIGINT or SIGTERM; true if one came.
bool wait_for_stop_signal(std::int64_t timeout_ns);

// Runs a tree until the clock says stop: sync, wait for the next change, repeat. `after_sync`
// (optional) is called after every sync with the time it synced to.
Result<void> follow(ProcfsTree& tree, HostClock& clock, const std::function<void(Micros)>& after_sync = {});

}  // namespace gpumeter::sim
