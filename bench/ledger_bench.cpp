// Attribution and ledger cost at 500 processes per node (8 GPUs, 63 processes on a GPU), per
// collection at a 1 s interval (five 200 ms sample periods):
//   - GpuLedger::advance for one GPU;
//   - UsageTracker::on_reading for one GPU, owners from an in-memory resolver (no /proc);
//   - UsageTracker::contribute for the node (once per snapshot) and the render of the
//     resulting exposition (families, both formats, both gzip prefixes);
//   - UsageTracker::checkpoint for the node (once per checkpoint interval), to a temp dir;
//   - HostOwnerResolver::resolve on a procfs tree written by `gpumeter sim procfs`, for a
//     cached process (every collection) and a new one (once per process), the part of a
//     cached lookup that touches procfs (a stat() of /proc/<pid>), and what a changed process,
//     pod or job set costs again (the owner labels with the project rules), when
//     --sim-root=DIR (DIR/proc, DIR/etc/passwd) and --config=FILE are given.
// Every process has its own owner, as in deploy/scenarios/bench-8x-500proc.yaml with a procfs
// tree; the ledger, tracker and node benchmarks also run with every owner unresolvable (the
// last argument 0), as the agent is with an empty procfs, so the two can be subtracted.

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "attribution/owner_builder.h"
#include "config/config.h"
#include "fixture_snapshot.h"
#include "ledger/host_owner_resolver.h"
#include "ledger/ledger.h"
#include "ledger/usage_tracker.h"
#include "render/families.h"
#include "render/prepared_exposition.h"

namespace gpumeter {
namespace {

constexpr int kPeriods = 5;  // 200 ms sample periods in a 1 s collection
constexpr std::int64_t kPeriodUs = 200'000;
constexpr std::int64_t kT0 = 1'700'000'000'000'000;
constexpr unsigned kGpus = 8;
constexpr unsigned kProcessesPerGpu = 63;  // 500 on 8 GPUs: 63 on four, 62 on the others
constexpr double kProcessShare = 0.01;     // each process asks 1 %
constexpr double kMemoryBytes = 1024.0 * 1024 * 1024;

unsigned pid_of(unsigned gpu, unsigned k) { return 100'000 + 13 * (k * kGpus + gpu); }

// An owner with label values as long as the scenario's (a Kubernetes pod or a Slurm job).
OwnerLabels owner_of(unsigned pid) {
  static const char* projects[] = {"nlp", "vision", "speech", "climate", "genomics", "recsys", "robotics", "search"};
  OwnerLabels o;
  o.project = projects[pid % 8];
  o.user = std::to_string(1000 + pid % 40);
  if (pid % 2 == 0) {
    o.namespace_ = "team-" + o.project;
    o.pod = o.project + "-worker-" + std::to_string(pid) + "-x7k2q";
    o.container = "trainer";
  } else {
    o.hpc_job = std::to_string(700'000 + pid);
  }
  return o;
}

// Moves every timestamp of a collection one collection later.
void shift(std::vector<TimedSample>& v, std::int64_t by) {
  for (auto& s : v) s.timestamp_us += by;
}
void shift(std::vector<ProcessSample>& v, std::int64_t by) {
  for (auto& s : v) s.timestamp_us += by;
}

constexpr std::int64_t kCollectionUs = kPeriods * kPeriodUs;

LedgerTick make_tick(unsigned gpu, unsigned n, std::int64_t start_us, bool resolvable = true) {
  LedgerTick t;
  t.wall_us = start_us + kCollectionUs;
  const double util = n * kProcessShare;
  for (unsigned k = 0; k < n; ++k) {
    const unsigned pid = pid_of(gpu, k);
    t.processes.push_back({pid, resolvable ? owner_of(pid) : unattributed_owner(), kMemoryBytes});
  }
  t.utilization_samples_supported = t.power_samples_supported = t.process_samples_supported = true;
  for (int i = 1; i <= kPeriods; ++i) {
    const std::int64_t ts = start_us + i * kPeriodUs;
    t.utilization_samples.push_back({ts, util});
    t.power_samples.push_back({ts, 70 + 620 * util});
    for (const auto& p : t.processes) t.process_samples.push_back({p.pid, ts, kProcessShare, 0.6 * kProcessShare});
  }
  t.utilization_ratio = util;
  t.power_watts = 70 + 620 * util;
  return t;
}

DeviceReading make_reading(unsigned gpu, unsigned n, std::int64_t start_us) {
  const LedgerTick t = make_tick(gpu, n, start_us);
  DeviceReading r;
  r.device.utilization_ratio = t.utilization_ratio;
  r.device.power_watts = t.power_watts;
  r.usage.processes.emplace();
  for (const auto& p : t.processes) r.usage.processes->push_back({p.pid, p.memory_bytes, kProcessCompute});
  r.usage.utilization_samples_supported = r.usage.power_samples_supported = r.usage.process_samples_supported = true;
  r.usage.utilization_samples = t.utilization_samples;
  r.usage.power_samples = t.power_samples;
  r.usage.process_samples = t.process_samples;
  return r;
}

void next_collection(DeviceReading& r) {
  shift(r.usage.utilization_samples, kCollectionUs);
  shift(r.usage.power_samples, kCollectionUs);
  shift(r.usage.process_samples, kCollectionUs);
}

// Owners from memory: the tracker's own cost without any /proc read. With `resolvable` false
// every process is unattributed, as when its /proc entry cannot be read.
class FakeResolver final : public OwnerResolver {
 public:
  explicit FakeResolver(bool resolvable) {
    if (!resolvable) return;
    for (unsigned g = 0; g < kGpus; ++g) {
      for (unsigned k = 0; k < kProcessesPerGpu; ++k) owners_.emplace(pid_of(g, k), owner_of(pid_of(g, k)));
    }
  }
  OwnerLabels resolve(unsigned pid, const DeviceIdentity&) override {
    auto it = owners_.find(pid);
    return it == owners_.end() ? unattributed_owner() : it->second;
  }
  void retain(const std::vector<unsigned>&) override {}
  void contribute(AttributionStatus&) const override {}

 private:
  std::unordered_map<unsigned, OwnerLabels> owners_;
};

// The render fixture's fully populated H100, replicated to 8 GPUs (as in render_bench).
Snapshot node_of_8() {
  Snapshot s = testing::fixture_snapshot();
  const GpuSnapshot h100 = s.gpus.at(0);
  s.gpus.clear();
  for (unsigned i = 0; i < kGpus; ++i) {
    GpuSnapshot g = h100;
    g.identity.index = i;
    g.identity.uuid += "-" + std::to_string(i);
    g.processes.clear();
    g.ledger = nullptr;
    s.gpus.push_back(std::move(g));
  }
  return s;
}

std::string owners_label(bool resolvable) { return resolvable ? "own owner each" : "owners unresolvable"; }

void BM_LedgerAdvance(benchmark::State& state) {
  const auto n = static_cast<unsigned>(state.range(0));
  const bool resolvable = state.range(1) != 0;
  GpuLedger ledger(GpuLedgerOptions{70, 10'000'000});
  LedgerTick tick = make_tick(0, n, kT0, resolvable);
  ledger.advance(tick);  // the first tick only sets the cursor
  for (auto _ : state) {
    tick.wall_us += kCollectionUs;
    shift(tick.utilization_samples, kCollectionUs);
    shift(tick.power_samples, kCollectionUs);
    shift(tick.process_samples, kCollectionUs);
    ledger.advance(tick);
  }
  state.counters["owners"] = static_cast<double>(ledger.owners().size());
  state.SetLabel("per GPU, " + std::to_string(n) + " processes, " + owners_label(resolvable));
}
BENCHMARK(BM_LedgerAdvance)
    ->Args({8, 1})
    ->Args({kProcessesPerGpu, 1})
    ->Args({kProcessesPerGpu, 0})
    ->Unit(benchmark::kNanosecond);

void BM_OnReading(benchmark::State& state) {
  const auto n = static_cast<unsigned>(state.range(0));
  const bool resolvable = state.range(1) != 0;
  FakeResolver resolver(resolvable);
  Logger log(LogLevel::kError);
  UsageTracker tracker({}, resolver, log);
  const Snapshot node = node_of_8();
  DeviceReading r = make_reading(0, n, kT0);
  tracker.on_reading(0, node.gpus[0].identity, r);
  for (auto _ : state) {
    next_collection(r);
    tracker.on_reading(0, node.gpus[0].identity, r);
  }
  state.SetLabel("per GPU, " + std::to_string(n) + " processes, " + owners_label(resolvable) + ", from memory");
}
BENCHMARK(BM_OnReading)
    ->Args({8, 1})
    ->Args({kProcessesPerGpu, 1})
    ->Args({kProcessesPerGpu, 0})
    ->Unit(benchmark::kNanosecond);

// A tracker that has seen two collections of every GPU of the node.
struct TrackedNode {
  FakeResolver resolver;
  Logger log{LogLevel::kError};
  UsageTracker tracker{UsageTrackerOptions{}, resolver, log};
  Snapshot node = node_of_8();
  explicit TrackedNode(bool resolvable) : resolver(resolvable) {
    for (unsigned g = 0; g < kGpus; ++g) {
      DeviceReading r = make_reading(g, kProcessesPerGpu, kT0);
      tracker.on_reading(g, node.gpus[g].identity, r);
      next_collection(r);
      tracker.on_reading(g, node.gpus[g].identity, r);
    }
  }
};

void BM_ContributeNode(benchmark::State& state) {
  const bool resolvable = state.range(0) != 0;
  TrackedNode t(resolvable);
  for (auto _ : state) {
    Snapshot s = t.node;
    t.tracker.contribute(s);
    benchmark::DoNotOptimize(s);
  }
  state.SetLabel("per snapshot, 8 GPUs x 63 processes (504), " + owners_label(resolvable));
}
BENCHMARK(BM_ContributeNode)->Arg(1)->Arg(0)->Unit(benchmark::kMicrosecond);

void BM_RenderNode(benchmark::State& state) {
  const bool resolvable = state.range(0) != 0;
  TrackedNode t(resolvable);
  Snapshot s = t.node;
  t.tracker.contribute(s);
  size_t bytes = 0;
  for (auto _ : state) {
    auto prepared = prepare_exposition(build_families(s), s.taken_unix);
    for (auto f : {ExpositionFormat::kText004, ExpositionFormat::kOpenMetrics100}) (void)prepared->gzip(f);
    bytes = prepared->text(ExpositionFormat::kText004).size();
    benchmark::DoNotOptimize(prepared);
  }
  state.counters["text_bytes"] = static_cast<double>(bytes);
  state.SetLabel("per snapshot, 8 GPUs x 63 processes (504), " + owners_label(resolvable) +
                 ": families + both formats + gzip");
}
BENCHMARK(BM_RenderNode)->Arg(1)->Arg(0)->Unit(benchmark::kMicrosecond);

void BM_CheckpointNode(benchmark::State& state) {
  namespace fs = std::filesystem;
  const bool resolvable = state.range(0) != 0;
  const fs::path dir = fs::temp_directory_path() / ("gpumeter-ledger-bench-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  // Removed after the tracker, whose destructor saves the ledger once more.
  struct RemoveDir {
    fs::path path;
    ~RemoveDir() { fs::remove_all(path); }
  } remove_dir{dir};
  FakeResolver resolver(resolvable);
  Logger log(LogLevel::kError);
  UsageTrackerOptions o;
  o.state_file = (dir / "ledger.json").string();
  UsageTracker tracker(o, resolver, log);
  // A checkpoint writes only over a state file it has read (none here: a fresh ledger).
  if (auto loaded = tracker.load_state(); !loaded) {
    state.SkipWithError(loaded.error().message.c_str());
    return;
  }
  const Snapshot node = node_of_8();
  for (unsigned g = 0; g < kGpus; ++g) {
    DeviceReading r = make_reading(g, kProcessesPerGpu, kT0);
    tracker.on_reading(g, node.gpus[g].identity, r);
    next_collection(r);
    tracker.on_reading(g, node.gpus[g].identity, r);
  }
  std::size_t bytes = 0;
  for (auto _ : state) {
    auto written = tracker.checkpoint();
    if (!written) {
      state.SkipWithError(written.error().message.c_str());
      break;
    }
    bytes = *written;
  }
  state.counters["file_bytes"] = static_cast<double>(bytes);
  state.SetLabel("per checkpoint, 8 GPUs x 63 processes (504), " + owners_label(resolvable) +
                 ": JSON, write, fsync, rename");
}
BENCHMARK(BM_CheckpointNode)->Arg(1)->Arg(0)->Unit(benchmark::kMicrosecond);

// HostOwnerResolver on a `gpumeter sim procfs` tree with the benchmark's config file.
struct ResolverSetup {
  std::string sim_root;
  std::string config_file;
};
ResolverSetup g_resolver_setup;

std::vector<unsigned> pids_in(const std::string& proc) {
  std::vector<unsigned> pids;
  for (const auto& e : std::filesystem::directory_iterator(proc)) {
    const std::string name = e.path().filename().string();
    if (!name.empty() && name.find_first_not_of("0123456789") == std::string::npos) pids.push_back(std::stoul(name));
  }
  std::sort(pids.begin(), pids.end());
  return pids;
}

std::optional<Config> bench_config(benchmark::State& state) {
  auto config = load_config(g_resolver_setup.config_file);
  if (!config) {
    state.SkipWithError(config.error().message.c_str());
    return std::nullopt;
  }
  return std::move(config).value();
}

void BM_Resolve(benchmark::State& state, bool cached) {
  auto config = bench_config(state);
  if (!config) return;
  HostOwnerResolverOptions o;
  o.procfs = g_resolver_setup.sim_root + "/proc";
  o.rootfs = g_resolver_setup.sim_root;
  o.environment = config->attribution.environment;
  o.hpc_job_mapping_dir = config->attribution.hpc_job_mapping_dir;
  o.rules = config->project.resolver;
  Logger log(LogLevel::kError);
  HostOwnerResolver resolver(o, log);
  const std::vector<unsigned> pids = pids_in(o.procfs);
  if (pids.empty()) {
    state.SkipWithError("no processes in the procfs tree");
    return;
  }
  DeviceIdentity gpu;
  gpu.uuid = "GPU-bench";
  size_t unattributed = 0;
  for (unsigned pid : pids) unattributed += resolver.resolve(pid, gpu).project == kUnattributedProject;
  if (unattributed > 0) {
    state.SkipWithError("some processes of the procfs tree cannot be resolved");
    return;
  }
  size_t i = 0;
  const std::vector<unsigned> none;
  for (auto _ : state) {
    if (!cached) resolver.retain(none);  // forget it: the next lookup reads the process afresh
    benchmark::DoNotOptimize(resolver.resolve(pids[i], gpu));
    if (++i == pids.size()) i = 0;
  }
  state.counters["processes"] = static_cast<double>(pids.size());
  state.SetLabel(cached ? "per process and collection (cached: a stat() of /proc/<pid>, the owner kept)"
                        : "per new process (stat, status, cgroup, environ read and parsed)");
}

// The part of a cached lookup that touches procfs: one stat() of the process's directory.
void BM_EntryId(benchmark::State& state) {
  auto config = bench_config(state);
  if (!config) return;
  const std::string proc = g_resolver_setup.sim_root + "/proc";
  ProcfsReader reader(proc, g_resolver_setup.sim_root, config->attribution.environment);
  const std::vector<unsigned> pids = pids_in(proc);
  size_t i = 0;
  for (auto _ : state) {
    auto id = reader.entry_id(pids[i]);
    if (!id) {
      state.SkipWithError(id.error().message.c_str());
      break;
    }
    benchmark::DoNotOptimize(id);
    if (++i == pids.size()) i = 0;
  }
  state.SetLabel("per process and collection: stat() of /proc/<pid>");
}

// What a process whose pod or jobs changed costs again: its owner labels and the project rules.
void BM_BuildOwner(benchmark::State& state) {
  auto config = bench_config(state);
  if (!config) return;
  const std::string proc = g_resolver_setup.sim_root + "/proc";
  ProcfsReader reader(proc, g_resolver_setup.sim_root, config->attribution.environment);
  std::vector<ProcessInfo> infos;
  for (unsigned pid : pids_in(proc)) {
    auto info = reader.read(pid);
    if (!info) {
      state.SkipWithError(info.error().message.c_str());
      return;
    }
    infos.push_back(std::move(info).value());
  }
  const std::vector<std::string> no_jobs;
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(build_owner(infos[i], nullptr, no_jobs, config->project.resolver));
    if (++i == infos.size()) i = 0;
  }
  state.SetLabel("per changed process: owner labels + project rules");
}

}  // namespace
}  // namespace gpumeter

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a.starts_with("--sim-root=")) {
      gpumeter::g_resolver_setup.sim_root = std::string(a.substr(11));
    } else if (a.starts_with("--config=")) {
      gpumeter::g_resolver_setup.config_file = std::string(a.substr(9));
    } else {
      std::fprintf(stderr, "ledger_bench: unknown argument %s (expected --sim-root=DIR --config=FILE)\n", argv[i]);
      return 2;
    }
  }
  if (!gpumeter::g_resolver_setup.sim_root.empty() && !gpumeter::g_resolver_setup.config_file.empty()) {
    benchmark::RegisterBenchmark("BM_Resolve/cached", gpumeter::BM_Resolve, true)->Unit(benchmark::kNanosecond);
    benchmark::RegisterBenchmark("BM_Resolve/new", gpumeter::BM_Resolve, false)->Unit(benchmark::kNanosecond);
    benchmark::RegisterBenchmark("BM_EntryId", gpumeter::BM_EntryId)->Unit(benchmark::kNanosecond);
    benchmark::RegisterBenchmark("BM_BuildOwner", gpumeter::BM_BuildOwner)->Unit(benchmark::kNanosecond);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
