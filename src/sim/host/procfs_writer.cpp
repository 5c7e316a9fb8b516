#include "sim/host/procfs_writer.h"

#include <fcntl.h>
#include <signal.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <system_error>

#include <fmt/format.h>

#include "sim/host/tree_files.h"
#include "sim/scenario/scenario_clock.h"

namespace gpumeter::sim {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t kCommLength = 15;  // TASK_COMM_LEN - 1
constexpr const char* kDefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

Micros job_end(const Scenario& s, const Job& j) { return std::min(j.end, s.duration); }

Micros saturating_add(Micros a, Micros b) { return a >= kForever - b ? kForever : a + b; }

// The kernel keeps any byte but NUL in comm; the status file escapes control characters. Replaced
// here so that every file stays one parseable line per field.
std::string printable(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return out;
}

std::string cgroup_path(const Job& job) { return job.cgroup.empty() ? "/" : job.cgroup; }

std::int64_t wall_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::optional<unsigned> numeric_name(const std::string& name) {
  if (name.empty() || name.size() > 9) return std::nullopt;
  unsigned v = 0;
  for (char c : name) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<unsigned>(c - '0');
  }
  return v;
}

class ScenarioHostClock final : public HostClock {
 public:
  ScenarioHostClock(const Scenario& scenario, const SimEnv& env, std::optional<std::int64_t> fallback_epoch_ns)
      : clock_(scenario_clock(env, env.time_scale.value_or(scenario.time_scale), fallback_epoch_ns.value_or(0))),
        frozen_(env.epoch_file.empty() && !env.epoch && !fallback_epoch_ns) {}

  Micros now() override { return frozen_ ? 0 : clock_.now(); }
  bool started() const override { return frozen_ || clock_.epoch_ns().has_value(); }
  std::optional<std::int64_t> epoch_unix_us() const override {
    if (frozen_) return std::nullopt;
    return clock_.unix_micros(0);
  }

  bool wait_until(Micros t) override {
    if (frozen_ || t == kForever) {
      wait_for_stop_signal(-1);  // time stands still: only a stop signal ends the wait
      return false;
    }
    // A held clock: time stands at 0 until the epoch file is written, looked for every 10 ms.
    while (!clock_.epoch_ns()) {
      if (wait_for_stop_signal(10'000'000)) return false;
    }
    const std::int64_t target_ns = clock_.wall_ns_at(t);
    for (;;) {
      const std::int64_t remaining = target_ns - wall_now_ns();
      if (remaining <= 0) return true;
      // At most a second at a time, so a wall clock that is stepped is noticed soon.
      if (wait_for_stop_signal(std::min<std::int64_t>(remaining, 1'000'000'000))) return false;
    }
  }

 private:
  ScenarioClock clock_;
  bool frozen_;
};

}  // namespace

SimulatedBoot boot_for_epoch(std::optional<std::int64_t> epoch_unix_us) {
  SimulatedBoot b;
  if (!epoch_unix_us) return b;
  constexpr std::int64_t kSecond = kMicrosPerSecond;
  const std::int64_t epoch_s =
      *epoch_unix_us >= 0 ? *epoch_unix_us / kSecond : -((-*epoch_unix_us + kSecond - 1) / kSecond);
  b.btime = epoch_s - kBootBeforeScenario / kSecond;
  b.before_scenario = *epoch_unix_us - *b.btime * kSecond;
  return b;
}

std::string proc_stat_file(std::int64_t btime) {
  // proc(5). Readers of a process's start time need btime; the rest is plausible filler.
  return fmt::format(
      "cpu  0 0 0 0 0 0 0 0 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\nintr 0\nctxt 0\nbtime {}\nprocesses 0\n"
      "procs_running 1\nprocs_blocked 0\nsoftirq 0 0 0 0 0 0 0 0 0 0 0\n",
      btime);
}

std::vector<ProcessWindow> process_windows(const Scenario& scenario, Micros lead, Micros boot_before_scenario) {
  struct Run {
    unsigned pid;
    std::size_t job;
    Micros start, end;
  };
  std::vector<Run> runs;
  for (std::size_t j = 0; j < scenario.jobs.size(); ++j) {
    const Job& job = scenario.jobs[j];
    const Micros end = job_end(scenario, job);
    if (job.start >= end) continue;
    std::set<unsigned> pids(job.pids.begin(), job.pids.end());
    for (unsigned pid : pids) runs.push_back({pid, j, job.start, end});
  }
  std::sort(runs.begin(), runs.end(), [](const Run& a, const Run& b) {
    return a.pid != b.pid ? a.pid < b.pid : a.start != b.start ? a.start < b.start : a.job < b.job;
  });
  std::vector<ProcessWindow> out;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const Run& r = runs[i];
    ProcessWindow w;
    w.pid = r.pid;
    w.job = r.job;
    w.from = r.start - lead;
    w.to = r.end == kForever ? kForever : saturating_add(r.end, lead);
    w.start_ticks = static_cast<std::uint64_t>(boot_before_scenario + r.start) * kClockTicksPerSecond /
                    static_cast<std::uint64_t>(kMicrosPerSecond);
    if (!out.empty() && out.back().pid == r.pid) {
      // Runs of one pid never overlap (the parser checks it); split a gap narrower than two leads.
      ProcessWindow& prev = out.back();
      const Run& p = runs[i - 1];
      if (prev.to > w.from) {
        const Micros mid = p.end + (r.start - p.end) / 2;
        prev.to = mid;
        w.from = mid;
      }
      // A new process always starts later than the one that had its pid before.
      if (w.start_ticks <= prev.start_ticks) w.start_ticks = prev.start_ticks + 1;
    }
    out.push_back(w);
  }
  return out;
}

std::string proc_comm(const Job& job) { return printable(job.name.substr(0, kCommLength)); }

std::string proc_cgroup(const Job& job) {
  const std::string path = cgroup_path(job);
  if (job.cgroup_version == 2) return fmt::format("0::{}\n", path);
  // A cgroup v1 (legacy hierarchy) host: one line per mounted hierarchy, highest id first, as
  // systemd-based distributions number them.
  static constexpr const char* kControllers[] = {"devices",    "hugetlb",          "cpuset",  "pids",
                                                 "perf_event", "net_cls,net_prio", "freezer", "blkio",
                                                 "memory",     "cpu,cpuacct",      "rdma",    "name=systemd"};
  std::string out;
  unsigned id = static_cast<unsigned>(std::size(kControllers));
  for (const char* c : kControllers) out += fmt::format("{}:{}:{}\n", id--, c, path);
  return out;
}

std::string proc_stat(const Job& job, const ProcessWindow& w) {
  // proc(5): 52 fields. The values other than pid, comm, state and starttime are plausible
  // constants for a sleeping multi-threaded CUDA process.
  const unsigned pid = w.pid;
  return fmt::format(
      "{pid} ({comm}) S 1 {pid} {pid} 0 -1 4194560 185392 0 1327 0 {utime} {stime} 0 0 20 0 {threads} 0 "
      "{start} 36783267840 1048576 18446744073709551615 94633443180544 94633443184405 140726130571232 0 0 0 "
      "0 16781312 1266 0 0 0 17 {cpu} 0 0 0 0 0 94633443198384 94633443199040 94633469894656 "
      "140726130577745 140726130577800 140726130577800 140726130581477 0\n",
      fmt::arg("pid", pid), fmt::arg("comm", proc_comm(job)), fmt::arg("utime", 0), fmt::arg("stime", 0),
      fmt::arg("threads", 32), fmt::arg("start", w.start_ticks), fmt::arg("cpu", pid % 64));
}

std::string home_of(const Scenario& scenario, unsigned uid) {
  if (uid == 0) return "/root";
  for (const auto& [name, u] : scenario.users) {
    if (u == uid) return "/home/" + name;
  }
  return "/";
}

std::string proc_status(const Scenario&, const Job& job, const ProcessWindow& w) {
  const unsigned pid = w.pid;
  const unsigned uid = job.uid;
  const unsigned gid = job.uid;  // user-private groups, as /etc/passwd is written
  return fmt::format(
      "Name:\t{comm}\n"
      "Umask:\t0022\n"
      "State:\tS (sleeping)\n"
      "Tgid:\t{pid}\n"
      "Ngid:\t0\n"
      "Pid:\t{pid}\n"
      "PPid:\t1\n"
      "TracerPid:\t0\n"
      "Uid:\t{uid}\t{uid}\t{uid}\t{uid}\n"
      "Gid:\t{gid}\t{gid}\t{gid}\t{gid}\n"
      "FDSize:\t256\n"
      "Groups:\t{gid}\n"
      "NStgid:\t{pid}\n"
      "NSpid:\t{pid}\n"
      "NSpgid:\t{pid}\n"
      "NSsid:\t{pid}\n"
      "VmPeak:\t35921160 kB\n"
      "VmSize:\t35921160 kB\n"
      "VmLck:\t       0 kB\n"
      "VmPin:\t       0 kB\n"
      "VmHWM:\t 4194304 kB\n"
      "VmRSS:\t 4194304 kB\n"
      "RssAnon:\t 3932160 kB\n"
      "RssFile:\t  262144 kB\n"
      "RssShmem:\t       0 kB\n"
      "VmData:\t 8388608 kB\n"
      "VmStk:\t     132 kB\n"
      "VmExe:\t       4 kB\n"
      "VmLib:\t  524288 kB\n"
      "VmPTE:\t   16384 kB\n"
      "VmSwap:\t       0 kB\n"
      "HugetlbPages:\t       0 kB\n"
      "CoreDumping:\t0\n"
      "THP_enabled:\t1\n"
      "Threads:\t32\n"
      "SigQ:\t0/2062543\n"
      "SigPnd:\t0000000000000000\n"
      "ShdPnd:\t0000000000000000\n"
      "SigBlk:\t0000000000000000\n"
      "SigIgn:\t0000000001001000\n"
      "SigCgt:\t00000001800044e2\n"
      "CapInh:\t0000000000000000\n"
      "CapPrm:\t{cap}\n"
      "CapEff:\t{cap}\n"
      "CapBnd:\t000001ffffffffff\n"
      "CapAmb:\t0000000000000000\n"
      "NoNewPrivs:\t0\n"
      "Seccomp:\t0\n"
      "Seccomp_filters:\t0\n"
      "Speculation_Store_Bypass:\tthread vulnerable\n"
      "Cpus_allowed:\tffffffff,ffffffff\n"
      "Cpus_allowed_list:\t0-63\n"
      "Mems_allowed:\t00000000,00000003\n"
      "Mems_allowed_list:\t0-1\n"
      "voluntary_ctxt_switches:\t48213\n"
      "nonvoluntary_ctxt_switches:\t1024\n",
      fmt::arg("comm", proc_comm(job)), fmt::arg("pid", pid), fmt::arg("uid", uid), fmt::arg("gid", gid),
      fmt::arg("cap", uid == 0 ? "000001ffffffffff" : "0000000000000000"));
}

std::string proc_environ(const Scenario& scenario, const Job& job) {
  auto has = [&](std::string_view key) {
    return std::any_of(job.env.begin(), job.env.end(), [&](const auto& kv) { return kv.first == key; });
  };
  std::string out;
  if (!has("PATH")) out += fmt::format("PATH={}", kDefaultPath) + '\0';
  if (!has("HOME")) out += fmt::format("HOME={}", home_of(scenario, job.uid)) + '\0';
  for (const auto& [key, value] : job.env) out += key + "=" + value + '\0';
  return out;
}

std::string proc_cmdline(const Job& job) { return job.name + '\0'; }

std::string etc_passwd(const Scenario& scenario) {
  std::string out = "root:x:0:0:root:/root:/bin/bash\n";
  for (const auto& [name, uid] : scenario.users) {
    out += fmt::format("{name}:x:{uid}:{uid}::/home/{name}:/bin/bash\n", fmt::arg("name", name), fmt::arg("uid", uid));
  }
  return out;
}

ProcfsTree::ProcfsTree(fs::path dir, const Scenario& scenario, Micros lead, Micros boot_before_scenario)
    : proc_(dir / "proc"), scenario_(scenario), lead_(lead) {
  rebase(boot_before_scenario);
}

void ProcfsTree::rebase(Micros boot_before_scenario) {
  windows_ = process_windows(scenario_, lead_, boot_before_scenario);
  edges_.clear();
  for (const ProcessWindow& w : windows_) {
    edges_.push_back(w.from);
    if (w.to != kForever) edges_.push_back(w.to);
  }
  std::sort(edges_.begin(), edges_.end());
  edges_.erase(std::unique(edges_.begin(), edges_.end()), edges_.end());
}

Result<std::unique_ptr<ProcfsTree>> ProcfsTree::open(const fs::path& dir, const Scenario& given, Micros lead,
                                                     SimulatedBoot boot, SlurmCgroupLayout slurm_cgroups,
                                                     Micros drm_period) {
  // The batch scripts are processes like the scenario's: the same windows, entries and lead.
  std::unique_ptr<Scenario> with_batch;
  if (std::vector<Job> batch = slurm_batch_jobs(given, slurm_cgroups); !batch.empty()) {
    with_batch = std::make_unique<Scenario>(given);
    for (Job& j : batch) with_batch->jobs.push_back(std::move(j));
  }
  const Scenario& scenario = with_batch ? *with_batch : given;
  std::unique_ptr<ProcfsTree> tree(new ProcfsTree(dir, scenario, lead, boot.before_scenario));
  tree->with_batch_scripts_ = std::move(with_batch);
  tree->drm_ = std::make_unique<DrmFiles>(tree->scenario_, drm_period);
  std::error_code ec;
  for (const fs::path& d : {dir / "proc", dir / "etc"}) {
    fs::create_directories(d, ec);
    if (ec) return fs_error("cannot create", d, ec);
  }
  if (auto r = write_file_atomic(dir / "etc" / "passwd", etc_passwd(scenario)); !r) return r.error();
  if (boot.btime) {
    if (auto r = write_file_atomic(dir / "proc" / "stat", proc_stat_file(*boot.btime)); !r) return r.error();
  }
  // Take over what an earlier run left: its entries are replaced or removed by the first sync,
  // its unfinished temporary directories go now.
  for (auto it = fs::directory_iterator(tree->proc_, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (auto pid = numeric_name(name)) {
      tree->present_[*pid] = kUnknownJob;
    } else if (name.size() > 1 && name[0] == '.' && (name.ends_with(".tmp") || name.ends_with(".old"))) {
      std::error_code rm;
      fs::remove_all(it->path(), rm);
      if (rm) return fs_error("cannot remove", it->path(), rm);
    }
  }
  if (ec) return fs_error("cannot list", tree->proc_, ec);
  if (std::any_of(scenario.allocations.begin(), scenario.allocations.end(),
                  [](const Allocation& a) { return !a.slurm_job.empty(); })) {
    auto hpc = HpcJobsTree::open(dir, scenario);
    if (!hpc) return hpc.error();
    tree->hpc_jobs_ = std::move(hpc).value();
    if (slurm_cgroups != SlurmCgroupLayout::kNone) {
      auto cgroups = SlurmCgroupTree::open(dir, scenario, slurm_cgroups);
      if (!cgroups) return cgroups.error();
      tree->slurm_cgroups_ = std::move(cgroups).value();
    }
  }
  return tree;
}

Result<void> ProcfsTree::write_entry(const ProcessWindow& w, bool replace) {
  const Job& job = scenario_.jobs[w.job];
  return publish_directory(proc_ / std::to_string(w.pid),
                           {{"cgroup", proc_cgroup(job)},
                            {"stat", proc_stat(job, w)},
                            {"status", proc_status(scenario_, job, w)},
                            {"environ", proc_environ(scenario_, job)},
                            {"comm", proc_comm(job) + "\n"},
                            {"cmdline", proc_cmdline(job)}},
                           replace);
}

Result<void> ProcfsTree::remove_entry(unsigned pid) {
  drm_written_.erase(pid);
  return remove_directory(proc_ / std::to_string(pid));
}

Result<void> ProcfsTree::sync_drm(Micros t) {
  for (const auto& [pid, job] : present_) {
    if (job == kUnknownJob) continue;
    std::map<unsigned, OpenFile>& written = drm_written_[pid];
    std::map<unsigned, OpenFile> wanted;
    for (OpenFile& f : drm_->files(pid, job, t)) wanted.emplace(f.fd, std::move(f));
    const fs::path entry = proc_ / std::to_string(pid);
    // Closed: the link goes first, so a reader that finds a link finds its fdinfo.
    for (auto it = written.begin(); it != written.end();) {
      if (wanted.count(it->first) != 0) {
        ++it;
        continue;
      }
      std::error_code ec;
      fs::remove(entry / "fd" / std::to_string(it->first), ec);
      if (ec) return fs_error("cannot remove", entry / "fd" / std::to_string(it->first), ec);
      fs::remove(entry / "fdinfo" / std::to_string(it->first), ec);
      it = written.erase(it);
    }
    for (auto& [fd, f] : wanted) {
      auto w = written.find(fd);
      if (w != written.end() && w->second == f) continue;
      std::error_code ec;
      fs::create_directories(entry / "fd", ec);
      if (!ec) fs::create_directories(entry / "fdinfo", ec);
      if (ec) return fs_error("cannot create", entry / "fdinfo", ec);
      if (auto r = write_file_atomic(entry / "fdinfo" / std::to_string(fd), f.fdinfo); !r) return r;
      if (w == written.end() || w->second.target != f.target) {
        const fs::path link = entry / "fd" / std::to_string(fd);
        const fs::path tmp = beside(link, "tmp");
        fs::remove(tmp, ec);
        fs::create_symlink(f.target, tmp, ec);
        if (!ec) fs::rename(tmp, link, ec);
        if (ec) return fs_error("cannot link", link, ec);
      }
      written[fd] = f;
    }
  }
  return {};
}

Result<void> ProcfsTree::sync(Micros t) {
  t = std::max<Micros>(t, 0);
  std::map<unsigned, const ProcessWindow*> wanted;
  for (const ProcessWindow& w : windows_) {
    if (w.from <= t && t < w.to) wanted[w.pid] = &w;
  }
  for (auto it = present_.begin(); it != present_.end();) {
    if (wanted.count(it->first) == 0) {
      if (auto r = remove_entry(it->first); !r) return r;
      it = present_.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& [pid, w] : wanted) {
    auto it = present_.find(pid);
    if (it != present_.end() && it->second == w->job) continue;
    if (auto r = write_entry(*w, it != present_.end()); !r) return r;
    present_[pid] = w->job;
    drm_written_.erase(pid);  // a new entry: its files are written again
  }
  if (auto r = sync_drm(t); !r) return r;
  if (hpc_jobs_) {
    if (auto r = hpc_jobs_->sync(t); !r) return r;
  }
  if (slurm_cgroups_) return slurm_cgroups_->sync(t);
  return {};
}

Micros ProcfsTree::next_change_after(Micros t) const {
  t = std::max<Micros>(t, 0);
  auto it = std::upper_bound(edges_.begin(), edges_.end(), t);
  const Micros next = it == edges_.end() ? kForever : *it;
  const Micros hpc = hpc_jobs_ ? hpc_jobs_->next_change_after(t) : kForever;
  const Micros cgroups = slurm_cgroups_ ? slurm_cgroups_->next_change_after(t) : kForever;
  auto e = std::upper_bound(drm_->edges().begin(), drm_->edges().end(), t);
  const Micros drm = std::min(e == drm_->edges().end() ? kForever : *e, drm_->next_rewrite_after(t));
  return std::min({next, hpc, cgroups, drm});
}

Result<std::unique_ptr<HostClock>> make_scenario_clock(const Scenario& scenario, const std::string& scenario_path,
                                                       const EnvLookup& getenv,
                                                       std::optional<std::int64_t> fallback_epoch_ns) {
  auto env = read_sim_env([&](const char* name) -> const char* {
    if (std::strcmp(name, "GPUMETER_SIM_SCENARIO") == 0) return scenario_path.c_str();
    return getenv(name);
  });
  if (!env) return env.error();
  return std::unique_ptr<HostClock>(new ScenarioHostClock(scenario, *env, fallback_epoch_ns));
}

void block_stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

bool wait_for_stop_signal(std::int64_t timeout_ns) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  if (timeout_ns < 0) {
    for (;;) {
      if (sigwaitinfo(&set, nullptr) > 0) return true;
      if (errno != EINTR) return false;
    }
  }
  const std::int64_t deadline = wall_now_ns() + timeout_ns;
  for (;;) {
    const std::int64_t left = std::max<std::int64_t>(0, deadline - wall_now_ns());
    timespec ts{static_cast<time_t>(left / 1'000'000'000), static_cast<long>(left % 1'000'000'000)};
    if (sigtimedwait(&set, nullptr, &ts) > 0) return true;
    if (errno != EINTR || left == 0) return false;
  }
}

Result<void> follow(ProcfsTree& tree, HostClock& clock, const std::function<void(Micros)>& after_sync) {
  Micros t = clock.now();
  for (;;) {
    if (auto r = tree.sync(t); !r) return r;
    if (after_sync) after_sync(t);
    const Micros next = tree.next_change_after(t);
    if (!clock.wait_until(next)) return {};
    // The clock is at `next` or later; never sync earlier than the edge that was waited for.
    t = std::max(clock.now(), next);
  }
}

}  // namespace gpumeter::sim
