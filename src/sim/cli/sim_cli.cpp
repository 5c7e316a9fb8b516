#include "sim/cli/sim_cli.h"

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "kubelet/pod_resources_server.h"
#include "sim/amd/sysfs_writer.h"
#include "sim/cli/reset_command.h"
#include "sim/host/procfs_writer.h"
#include "sim/scenario/scenario_parse.h"
#include "sim/host/sim_kubelet.h"
#include "sim/truth/truth.h"
#include "sim/cli/truth_format.h"
#include "sim/cli/truth_format_mig.h"
#include "sim/scenario/units.h"
#include "transcript/replay.h"

namespace gpumeter::sim {

namespace {

struct TruthArgs {
  std::string scenario;
  std::string from = "0";
  std::string to;
  std::string format = "table";
  std::string policy = "process";
};

std::string describe_duration(Micros d) {
  if (d == kForever) return "unbounded";
  return fmt::format("{} s", to_seconds(d));
}

// A flag's scenario time (`--from`, `--to`, `--at`); nullopt after printing why.
std::optional<Micros> read_scenario_time(const char* command, const char* flag, const std::string& value,
                                         std::ostream& err) {
  auto t = parse_duration(value);
  if (!t) {
    err << fmt::format("gpumeter sim {}: {}: expected scenario seconds (or e.g. 1h30m), got '{}'\n", command, flag,
                       value);
  }
  return t;
}

// The truth over [from, to) under the policy, in the format asked for. Scenarios with `mig:` add
// the per-instance truth: a "mig" object, a table after the others.
void print_truth(const Scenario& scenario, Micros from, Micros to, const TruthArgs& args, std::ostream& out) {
  const bool mig = !scenario.mig.gpus.empty();
  const bool scheduler = args.policy == "scheduler";
  nlohmann::ordered_json json;
  std::string table;
  if (scheduler) {
    SchedulerTruth truth = compute_scheduler_truth(scenario, from, to);
    if (args.format == "json") {
      json = scheduler_truth_to_json(scenario, truth);
    } else {
      table = scheduler_truth_to_table(scenario, truth);
    }
  } else {
    Truth truth = compute_truth(scenario, from, to);
    if (args.format == "json") {
      json = truth_to_json(scenario, truth);
    } else {
      table = truth_to_table(truth);
    }
  }
  if (mig) {
    MigTruth truth = compute_mig_truth(scenario, from, to, scheduler);
    if (args.format == "json") {
      json["mig"] = mig_truth_to_json(truth);
    } else {
      table += mig_truth_to_table(truth);
    }
  }
  if (args.format == "json") {
    out << json.dump(2) << "\n";
  } else {
    out << table;
  }
}

int run_truth(const TruthArgs& args, std::ostream& out, std::ostream& err) {
  if (args.scenario.empty()) {
    err << "gpumeter sim truth: --scenario is required\n";
    return kBadInput;
  }
  if (args.format != "table" && args.format != "json") {
    err << fmt::format("gpumeter sim truth: --format must be table or json, got '{}'\n", args.format);
    return kBadInput;
  }
  if (args.policy != "process" && args.policy != "scheduler") {
    err << fmt::format("gpumeter sim truth: --policy must be process or scheduler, got '{}'\n", args.policy);
    return kBadInput;
  }
  auto from = read_scenario_time("truth", "--from", args.from, err);
  if (!from) return kBadInput;
  auto scenario = load_scenario(args.scenario);
  if (!scenario) {
    err << "gpumeter sim truth: " << scenario.error().message << "\n";
    return kBadInput;
  }
  std::optional<Micros> to;
  if (!args.to.empty()) {
    to = read_scenario_time("truth", "--to", args.to, err);
    if (!to) return kBadInput;
  } else if (scenario->duration != kForever) {
    to = scenario->duration;
  } else {
    err << "gpumeter sim truth: --to is required: the scenario has no duration\n";
    return kBadInput;
  }
  if (*from >= *to) {
    err << fmt::format("gpumeter sim truth: --from ({} s) must be earlier than --to ({} s)\n", to_seconds(*from),
                       to_seconds(*to));
    return kBadInput;
  }
  print_truth(*scenario, *from, *to, args, out);
  return kOk;
}

std::string_view call_error_name(CallErrorCode e) {
  switch (e) {
    case CallErrorCode::unknown:
      return "unknown";
    case CallErrorCode::not_supported:
      return "not_supported";
    case CallErrorCode::no_permission:
      return "no_permission";
    case CallErrorCode::timeout:
      return "timeout";
  }
  return "unknown";
}

std::string describe_quirk(const Quirk& q) {
  std::string what;
  switch (q.kind) {
    case QuirkKind::call_error:
      what = fmt::format("call_error: {} fails with {}", q.call, call_error_name(q.error));
      break;
    case QuirkKind::process_record_layout:
      what = fmt::format("process_record_layout: _v3 process records of {} bytes", q.record_bytes);
      break;
    case QuirkKind::garbage_process_records:
      what = "garbage_process_records";
      break;
    case QuirkKind::gpm_non_finite:
      what = "gpm_non_finite: nvmlGpmMetricsGet answers NaN";
      break;
    case QuirkKind::silent_while_idle:
      what = "silent_while_idle: no utilization samples while the GPU idles";
      break;
    case QuirkKind::impossible_power_samples:
      what = "impossible_power_samples: every tenth power sample reads 4294967295 mW";
      break;
    case QuirkKind::gpm_batch_collapse:
      what = "gpm_batch_collapse: nvmlGpmMetricsGet answers every metric of a batch with the first one's value";
      break;
    case QuirkKind::active_only_process_samples:
      what = "active_only_process_samples: per-process samples only of periods the process was active in";
      break;
    case QuirkKind::no_capability:
      what =
          "no_capability: without CAP_SYS_ADMIN, MIG GPU instances, parent memory and processes answer "
          "NO_PERMISSION, and Xids inside an instance are withheld";
      break;
  }
  const std::string gpus = q.gpu ? fmt::format("GPU {}", *q.gpu) : std::string("every GPU");
  const std::string until =
      q.duration == kForever ? std::string("on") : fmt::format("to {} s", to_seconds(q.at + q.duration));
  return fmt::format("{} on {}, from {} s {}", what, gpus, to_seconds(q.at), until);
}

int run_check(const std::string& path, std::ostream& out, std::ostream& err) {
  if (path.empty()) {
    err << "gpumeter sim check: --scenario is required\n";
    return kBadInput;
  }
  auto replay = transcript::replay_of_scenario(path);
  if (replay && !replay->empty()) {
    auto recording = transcript::describe_recording(*replay);
    if (!recording) {
      err << "gpumeter sim check: " << path << ": " << recording.error().message << "\n";
      return kBadInput;
    }
    out << fmt::format("{}: ok: replays {}: {}\n", path, *replay, *recording);
    return kOk;
  }
  auto scenario = load_scenario(path);
  if (!scenario) {
    err << "gpumeter sim check: " << scenario.error().message << "\n";
    return kBadInput;
  }
  std::map<std::string, unsigned> models;
  for (unsigned g = 0; g < scenario->gpus.size(); ++g) ++models[scenario->model_of(g).name];
  std::string model_list;
  for (const auto& [name, count] : models)
    model_list += fmt::format("{}{} x {}", model_list.empty() ? "" : ", ", count, name);
  const std::string allocations =
      scenario->allocations.empty() ? "" : fmt::format("{} allocations, ", scenario->allocations.size());
  out << fmt::format("{}: ok: {} GPUs ({}), {} jobs, {}{} faults, {} quirks, duration {}\n", path,
                     scenario->gpus.size(), model_list.empty() ? "none" : model_list, scenario->jobs.size(),
                     allocations, scenario->fault_count(), scenario->quirks.size(),
                     describe_duration(scenario->duration));
  for (const Quirk& q : scenario->quirks) out << "  quirk: " << describe_quirk(q) << "\n";
  return kOk;
}

struct HostArgs {
  std::string scenario;
  std::string out;     // procfs: the tree's root
  std::string socket;  // kubelet: the socket path
  std::string lead = "5s";
  std::string at;
  std::string slurm_cgroup = "none";  // procfs: the Slurm cgroup layout to write
  bool follow = false;
  std::string interval = "100ms";  // sysfs: how often --follow rewrites the values
};

std::int64_t wall_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool epoch_set(const EnvLookup& getenv) {
  for (const char* name : {"GPUMETER_SIM_EPOCH", "GPUMETER_SIM_EPOCH_FILE"}) {
    if (const char* e = getenv(name); e != nullptr && *e != '\0') return true;
  }
  return false;
}

// The scenario, lead and clock both host-side commands start from; nullopt after printing why.
struct HostSetup {
  Scenario scenario;
  Micros lead = kDefaultHostLead;
  std::unique_ptr<HostClock> clock;
};

std::optional<HostSetup> host_setup(const char* command, const HostArgs& args, bool live, const EnvLookup& getenv,
                                    std::ostream& err) {
  HostSetup h;
  auto lead = parse_duration(args.lead);
  if (!lead) {
    err << fmt::format("gpumeter sim {}: --lead: expected a scenario duration such as 5s, got '{}'\n", command,
                       args.lead);
    return std::nullopt;
  }
  h.lead = *lead;
  auto scenario = load_scenario(args.scenario);
  if (!scenario) {
    err << fmt::format("gpumeter sim {}: {}\n", command, scenario.error().message);
    return std::nullopt;
  }
  h.scenario = std::move(scenario).value();
  // Running live without an epoch: scenario time 0 is now. The agent's library must be given
  // the same epoch, or it starts its own clock at its first nvmlInit.
  std::optional<std::int64_t> fallback;
  if (live && !epoch_set(getenv)) {
    fallback = wall_now_ns();
    err << fmt::format(
        "gpumeter sim {}: GPUMETER_SIM_EPOCH is not set; scenario time 0 is now ({:.3f}); give the agent "
        "GPUMETER_SIM_EPOCH={:.3f} so that both follow one clock\n",
        command, static_cast<double>(*fallback) / 1e9, static_cast<double>(*fallback) / 1e9);
  }
  auto clock = make_scenario_clock(h.scenario, args.scenario, getenv, fallback);
  if (!clock) {
    err << fmt::format("gpumeter sim {}: {}\n", command, clock.error().message);
    return std::nullopt;
  }
  h.clock = std::move(clock).value();
  return h;
}

// `--at` into `at` (left empty when not given); false after printing why.
bool read_at(const char* command, const HostArgs& args, std::optional<Micros>& at, std::ostream& err) {
  if (args.at.empty()) return true;
  if (args.follow) {
    err << fmt::format("gpumeter sim {}: --at and --follow cannot be combined\n", command);
    return false;
  }
  at = read_scenario_time(command, "--at", args.at, err);
  return at.has_value();
}

// `--interval`, more than 0; nullopt after printing why.
std::optional<Micros> read_interval(const char* command, const HostArgs& args, std::ostream& err) {
  auto interval = parse_duration(args.interval);
  if (!interval || *interval <= 0) {
    err << fmt::format("gpumeter sim {}: --interval: expected a scenario duration such as 100ms, got '{}'\n", command,
                       args.interval);
    return std::nullopt;
  }
  return interval;
}

// `sim procfs` without --follow: the tree at scenario time t, and a line on what it holds.
int write_procfs_once(ProcfsTree& tree, Micros t, const HostArgs& args, SlurmCgroupLayout layout, std::ostream& out,
                      std::ostream& err) {
  if (auto r = tree.sync(t); !r) {
    err << "gpumeter sim procfs: " << r.error().message << "\n";
    return kRuntimeError;
  }
  out << fmt::format("{}/proc: {} processes at scenario time {} s\n", args.out, tree.present().size(),
                     to_seconds(std::max<Micros>(t, 0)));
  if (const HpcJobsTree* hpc = tree.hpc_jobs()) {
    out << fmt::format("{}/{}: {} GPUs allocated to Slurm jobs\n", args.out, kHpcJobsDir, hpc->present().size());
  }
  if (const SlurmCgroupTree* cgroups = tree.slurm_cgroups()) {
    out << fmt::format("{}/{}: {} Slurm job cgroups ({})\n", args.out, kCgroupRoot, cgroups->present().size(),
                       to_string(layout));
  }
  return kOk;
}

// `sim procfs --follow`: the tree kept in step with the scenario clock until a stop signal.
int follow_procfs(ProcfsTree& tree, const HostSetup& setup, const SimulatedBoot& boot, const HostArgs& args,
                  std::ostream& err) {
  if (!setup.clock->started()) {
    // A held clock: no process is written until the epoch is, so that their start times count
    // from it (the boot stays where the tree was opened, a day before).
    err << "gpumeter sim procfs: holding scenario time at 0 until the epoch file is written\n";
    if (!setup.clock->wait_until(0)) return kOk;
    if (const auto epoch = setup.clock->epoch_unix_us(); epoch && boot.btime) {
      tree.rebase(*epoch - *boot.btime * kMicrosPerSecond);
    }
  }
  err << fmt::format("gpumeter sim procfs: following {} in {}/proc (lead {} s); SIGINT or SIGTERM stops\n",
                     args.scenario, args.out, to_seconds(setup.lead));
  if (auto r = follow(tree, *setup.clock); !r) {
    err << "gpumeter sim procfs: " << r.error().message << "\n";
    return kRuntimeError;
  }
  return kOk;
}

int run_procfs(const HostArgs& args, const EnvLookup& getenv, std::ostream& out, std::ostream& err) {
  if (args.scenario.empty()) {
    err << "gpumeter sim procfs: --scenario is required\n";
    return kBadInput;
  }
  if (args.out.empty()) {
    err << "gpumeter sim procfs: --out is required\n";
    return kBadInput;
  }
  std::optional<Micros> at;
  if (!read_at("procfs", args, at, err)) return kBadInput;
  const auto layout = parse_slurm_cgroup_layout(args.slurm_cgroup);
  if (!layout) {
    err << fmt::format("gpumeter sim procfs: --slurm-cgroup must be none, v1, v1-whitelist, v2 or v2-sluid, got '{}'\n",
                       args.slurm_cgroup);
    return kBadInput;
  }
  const auto interval = read_interval("procfs", args, err);
  if (!interval) return kBadInput;
  // Before anything else, so that the stop signals are queued for the follow loop.
  if (args.follow) block_stop_signals();
  auto setup = host_setup("procfs", args, args.follow, getenv, err);
  if (!setup) return kBadInput;
  const SimulatedBoot boot = boot_for_epoch(setup->clock->epoch_unix_us());
  auto tree = ProcfsTree::open(args.out, setup->scenario, setup->lead, boot, *layout, *interval);
  if (!tree) {
    err << "gpumeter sim procfs: " << tree.error().message << "\n";
    return kRuntimeError;
  }
  if (args.follow) return follow_procfs(**tree, *setup, boot, args, err);
  return write_procfs_once(**tree, at ? *at : setup->clock->now(), args, *layout, out, err);
}

int run_sysfs(const HostArgs& args, const EnvLookup& getenv, std::ostream& out, std::ostream& err) {
  if (args.scenario.empty()) {
    err << "gpumeter sim sysfs: --scenario is required\n";
    return kBadInput;
  }
  if (args.out.empty()) {
    err << "gpumeter sim sysfs: DIR is required\n";
    return kBadInput;
  }
  std::optional<Micros> at;
  if (!read_at("sysfs", args, at, err)) return kBadInput;
  const auto interval = read_interval("sysfs", args, err);
  if (!interval) return kBadInput;
  if (args.follow) block_stop_signals();
  auto setup = host_setup("sysfs", args, args.follow, getenv, err);
  if (!setup) return kBadInput;
  auto tree = amd::SysfsTree::open(args.out, setup->scenario, args.follow);
  if (!tree) {
    err << "gpumeter sim sysfs: " << tree.error().message << "\n";
    return tree.error().code == EINVAL ? kBadInput : kRuntimeError;
  }
  Micros t = at ? *at : setup->clock->now();
  for (;;) {
    if (auto r = (*tree)->sync(t); !r) {
      err << "gpumeter sim sysfs: " << r.error().message << "\n";
      return kRuntimeError;
    }
    if (!args.follow) {
      out << fmt::format("{}: {} AMD GPUs, {} KFD processes at scenario time {} s\n", args.out, (*tree)->gpu_count(),
                         (*tree)->processes().size(), to_seconds(std::max<Micros>(t, 0)));
      return kOk;
    }
    if (!setup->clock->wait_until(t + *interval)) {
      // Stopped: readers blocked on a hung GPU's files are let go, not left waiting forever.
      if (auto r = (*tree)->release_hangs(); !r) {
        err << "gpumeter sim sysfs: " << r.error().message << "\n";
        return kRuntimeError;
      }
      return kOk;
    }
    t = std::max(setup->clock->now(), t + *interval);
  }
}

int run_kubelet(const HostArgs& args, const EnvLookup& getenv, std::ostream& err) {
  if (args.scenario.empty()) {
    err << "gpumeter sim kubelet: --scenario is required\n";
    return kBadInput;
  }
  if (args.socket.empty()) {
    err << "gpumeter sim kubelet: --socket is required\n";
    return kBadInput;
  }
  // Before the server starts its threads, so that they inherit the mask and the stop signals
  // reach the wait below.
  block_stop_signals();
  auto setup = host_setup("kubelet", args, true, getenv, err);
  if (!setup) return kBadInput;
  const SimKubelet kubelet(setup->scenario, setup->lead);
  HostClock& clock = *setup->clock;
  auto server = kubelet::PodResourcesServer::start(args.socket, [&] { return kubelet.pods_at(clock.now()); });
  if (!server) {
    err << "gpumeter sim kubelet: " << server.error().message << "\n";
    return kRuntimeError;
  }
  err << fmt::format(
      "gpumeter sim kubelet: serving pod-resources v1 List on unix:{} for {} (lead {} s); SIGINT or SIGTERM "
      "stops\n",
      args.socket, args.scenario, to_seconds(setup->lead));
  wait_for_stop_signal(-1);
  (*server)->stop();
  return kOk;
}

const char* process_env(const char* name) { return std::getenv(name); }

// Options are read as strings and checked in the callback, so every bad value exits 2 with a
// message naming the flag, rather than through CLI11's own exit codes.

// `sim truth`: a scenario's ground truth over a window.
void add_truth_command(CLI::App& sim, int& exit_code) {
  auto truth_args = std::make_shared<TruthArgs>();
  CLI::App* truth = sim.add_subcommand("truth", "Print a scenario's exact ground truth over [from, to)");
  truth->add_option("--scenario", truth_args->scenario, "Scenario YAML file");
  truth->add_option("--from", truth_args->from, "Window start in scenario seconds, or e.g. 1h30m (default 0)");
  truth->add_option("--to", truth_args->to, "Window end in scenario seconds (default: the scenario's duration)");
  truth->add_option("--format", truth_args->format, "table or json (default table)");
  truth->add_option("--policy", truth_args->policy,
                    "process (time to the owners of the processes on a GPU) or scheduler (time to the "
                    "owners of its allocations, and of processes outside them) (default process)");
  truth->callback([truth_args, &exit_code] { exit_code = run_truth(*truth_args, std::cout, std::cerr); });
}

// `sim check`: validates a scenario and summarizes it.
void add_check_command(CLI::App& sim, int& exit_code) {
  auto check_path = std::make_shared<std::string>();
  CLI::App* check = sim.add_subcommand("check", "Validate a scenario file and summarize it");
  check->add_option("--scenario", *check_path, "Scenario YAML file");
  check->callback([check_path, &exit_code] { exit_code = run_check(*check_path, std::cout, std::cerr); });
}

// `sim procfs`: the fake procfs tree of the scenario's processes.
void add_procfs_command(CLI::App& sim, int& exit_code) {
  auto procfs_args = std::make_shared<HostArgs>();
  CLI::App* procfs =
      sim.add_subcommand("procfs",
                         "Write a fake procfs tree and /etc/passwd for the scenario's processes, so an agent run with "
                         "--path.procfs=DIR/proc can attribute simulated pids to owners");
  procfs->footer(
      "Writes DIR/proc/<pid>/{cgroup,stat,status,environ,comm,cmdline} for every process present at the\n"
      "current scenario time, and DIR/etc/passwd (root and the scenario's users). Scenario time comes from\n"
      "GPUMETER_SIM_EPOCH and GPUMETER_SIM_TIME_SCALE, as the simulator library computes it (0 when the\n"
      "epoch is unset), or from --at. With --follow it keeps the tree in step with the scenario clock\n"
      "until SIGINT or SIGTERM: each pid's entry appears --lead scenario time before its job starts and\n"
      "goes --lead after it ends; every change is an atomic rename. With --follow and no\n"
      "GPUMETER_SIM_EPOCH, scenario time 0 is the moment it starts. GPUMETER_SIM_EPOCH_FILE holds time\n"
      "at 0 until that file is written (docs/simulator.md).\n"
      "A scenario with Slurm allocations also gets DIR/run/gpumeter-hpc-jobs/<GPU index>, dcgm-exporter's\n"
      "HPC job mapping: the ids of the Slurm jobs allocated that GPU, one per line, over each allocation's\n"
      "span (no lead), written and removed atomically.\n"
      "With --slurm-cgroup v1, v1-whitelist, v2 or v2-sluid it also writes each Slurm job's cgroup under\n"
      "DIR/sys/fs/cgroup over the allocation's span: v1, devices/slurm_node0/uid_<uid>/job_<id>/ as Slurm\n"
      "22.05 writes it (devices.list 'a *:* rwm'); v1-whitelist, devices/slurm/uid_<uid>/job_<id>/devices.list\n"
      "naming the GPUs; v2, system.slice/slurmstepd.scope/job_<id>/ (v2-sluid: /<SLUID>/, Slurm 26.05's\n"
      "default); with the cgroup.procs of its batch script and running steps (v1-whitelist: none), and the\n"
      "batch script as a process in DIR/proc.\n"
      "Processes of jobs on AMD GPUs also get DIR/proc/<pid>/fd/ and fdinfo/: fds 0-2 on /dev/null and,\n"
      "while the job runs, the GPU's render node with amdgpu's DRM fdinfo; a graphics client\n"
      "(client: graphics) on two fds sharing one drm-client-id, with drm-engine-gfx its busy time so far,\n"
      "rewritten every --interval.\n"
      "Exit codes: 0 ok, 1 runtime error (e.g. DIR not writable), 2 bad input.");
  procfs->add_option("--scenario", procfs_args->scenario, "Scenario YAML file");
  procfs->add_option("--out", procfs_args->out, "Directory to write proc/ and etc/passwd into");
  procfs->add_flag("--follow", procfs_args->follow, "Keep the tree in step with the scenario clock");
  procfs->add_option("--lead", procfs_args->lead,
                     "Scenario time an entry exists before its job starts and after it ends (default 5s)");
  procfs->add_option("--at", procfs_args->at, "Write the tree at this scenario time instead of now");
  procfs->add_option("--interval", procfs_args->interval,
                     "With --follow, scenario time between two rewrites of graphics clients' DRM fdinfo "
                     "(default 100ms)");
  procfs->add_option("--slurm-cgroup", procfs_args->slurm_cgroup,
                     "Slurm jobs' cgroup layout to write: none, v1, v1-whitelist, v2 or v2-sluid "
                     "(default none)");
  procfs->callback(
      [procfs_args, &exit_code] { exit_code = run_procfs(*procfs_args, process_env, std::cout, std::cerr); });
}

// `sim sysfs`: the amdgpu sysfs tree of the scenario's AMD GPUs.
void add_sysfs_command(CLI::App& sim, int& exit_code) {
  auto sysfs_args = std::make_shared<HostArgs>();
  CLI::App* sysfs = sim.add_subcommand(
      "sysfs",
      "Write the amdgpu sysfs tree of the scenario's AMD GPUs, which ROCm SMI reads when it is bind-mounted "
      "over /sys/class and /sys/module");
  sysfs->footer(
      "Writes DIR/class/drm/card<N> (absolute links into DIR/devices/...: the device files amdgpu exposes,\n"
      "hwmon, gpu_metrics, ras), DIR/class/kfd/kfd/topology/nodes/* (node 0 is the CPU),\n"
      "DIR/class/kfd/kfd/proc/<pid> for the processes on the AMD GPUs, and DIR/module/amdgpu. Cards are\n"
      "numbered over the AMD GPUs in scenario order. Scenario time comes from GPUMETER_SIM_EPOCH and\n"
      "GPUMETER_SIM_TIME_SCALE as for `sim procfs`, or from --at. With --follow it rewrites the values every\n"
      "--interval of scenario time until SIGINT or SIGTERM, each file by an atomic rename. To let ROCm SMI\n"
      "read it: unshare -m, then mount --bind DIR/class /sys/class and DIR/module /sys/module, and a\n"
      "tmpfs on /dev/shm (docs/rocm-behaviour.md).\n"
      "Exit codes: 0 ok, 1 runtime error (e.g. DIR not writable), 2 bad input (e.g. no AMD GPU).");
  sysfs->add_option("dir", sysfs_args->out, "Directory to write the tree into");
  sysfs->add_option("--scenario", sysfs_args->scenario, "Scenario YAML file");
  sysfs->add_flag("--follow", sysfs_args->follow, "Keep the tree in step with the scenario clock");
  sysfs->add_option("--at", sysfs_args->at, "Write the tree at this scenario time instead of now");
  sysfs->add_option("--interval", sysfs_args->interval,
                    "With --follow, scenario time between two rewrites of the values (default 100ms)");
  sysfs->callback([sysfs_args, &exit_code] { exit_code = run_sysfs(*sysfs_args, process_env, std::cout, std::cerr); });
}

// `sim kubelet`: the pod-resources List of the scenario's Kubernetes jobs.
void add_kubelet_command(CLI::App& sim, int& exit_code) {
  auto kubelet_args = std::make_shared<HostArgs>();
  CLI::App* kubelet =
      sim.add_subcommand("kubelet",
                         "Serve the kubelet pod-resources v1 List for the scenario's Kubernetes jobs on a unix socket, "
                         "following the scenario clock");
  kubelet->footer(
      "Each job with a `kubernetes` reference is listed as its pod and container, holding resource\n"
      "nvidia.com/gpu with the UUIDs of its NVIDIA GPUs as device ids and amd.com/gpu with the PCI\n"
      "addresses of its AMD GPUs (as AMD's device plugin names them), from --lead scenario time before\n"
      "it starts until --lead after it ends (as `gpumeter sim procfs` keeps its pids). A pod's allocation\n"
      "(`allocations:` with `kubernetes`) is listed over exactly its span, with or without a process.\n"
      "An NVIDIA GPU that two containers hold at once somewhere in the scenario is time-sliced: its device\n"
      "ids are the NVIDIA device plugin's replicas, <uuid>::<n>. Scenario time comes from GPUMETER_SIM_EPOCH and\n"
      "GPUMETER_SIM_TIME_SCALE as the simulator library computes it; with no epoch, scenario time 0 is\n"
      "the moment it starts. Runs until SIGINT or SIGTERM, then removes the socket.\n"
      "Exit codes: 0 ok, 1 runtime error (e.g. the socket cannot be created), 2 bad input.");
  kubelet->add_option("--scenario", kubelet_args->scenario, "Scenario YAML file");
  kubelet->add_option("--socket", kubelet_args->socket,
                      "Unix socket to serve on (the agent's kubelet socket, e.g. "
                      "/var/lib/kubelet/pod-resources/kubelet.sock)");
  kubelet->add_option("--lead", kubelet_args->lead,
                      "Scenario time a pod is listed before its job starts and after it ends (default 5s)");
  kubelet->callback([kubelet_args, &exit_code] { exit_code = run_kubelet(*kubelet_args, process_env, std::cerr); });
}

}  // namespace

void setup_sim_command(CLI::App& sim, int& exit_code) {
  sim.require_subcommand(1);
  add_truth_command(sim, exit_code);
  add_check_command(sim, exit_code);
  add_procfs_command(sim, exit_code);
  add_sysfs_command(sim, exit_code);
  add_kubelet_command(sim, exit_code);
  add_reset_command(sim, exit_code);
}

}  // namespace gpumeter::sim
