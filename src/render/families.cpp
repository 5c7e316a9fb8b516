#include "render/families.h"

#include <algorithm>
#include <string>
#include <utility>

#include "render/families_internal.h"

namespace gpumeter {

namespace family_builders {
namespace {

Labels owner_labels(Labels l, const OwnerLabels& o) {
  l.emplace_back("project", o.project);
  l.emplace_back("user", o.user);
  l.emplace_back("namespace", o.namespace_);
  l.emplace_back("pod", o.pod);
  l.emplace_back("container", o.container);
  l.emplace_back("hpc_job", o.hpc_job);
  if (!o.fault.empty()) l.emplace_back("fault", o.fault);
  return l;
}

// A ledger entry's labels: its GPU's, its MIG device's where it bills one, then its owner's.
Labels ledger_labels(const DeviceIdentity& id, const LedgerEntry& e) {
  Labels l = device_labels(id);
  if (!e.mig.mig_uuid.empty()) {
    l.emplace_back(kMigLabels[0], e.mig.mig_uuid);
    l.emplace_back(kMigLabels[1], e.mig.gpu_instance);
    l.emplace_back(kMigLabels[2], e.mig.compute_instance);
    l.emplace_back(kMigLabels[3], e.mig.mig_profile);
  }
  return owner_labels(std::move(l), e.owner);
}

// The events collector's: every GPU, down ones too.
void add_events_families(FamilyList& fams, const Snapshot& snap) {
  auto& xid = fams.add("gpu_xid_errors_total", kCounter,
                       "Xid error events reported by the driver since the agent started, by Xid code.");
  for (const auto& g : snap.gpus) {
    for (const auto& [code, count] : g.xid_counts) {
      add_sample(xid, with(device_labels(g.identity), "xid", std::to_string(code)), static_cast<double>(count));
    }
  }
}

// The processes collector's: per-process series (bounded by the tracker), with owner labels.
void add_processes_families(FamilyList& fams, const Snapshot& snap) {
  auto& pmem = fams.add("gpu_process_memory_used_bytes", kGauge,
                        "Device memory used by the process in bytes (0 for a while after it exits).");
  auto& putil = fams.add("gpu_process_utilization_ratio", kGauge,
                         "The process's share of the GPU's SM time over the last collection, 0..1.");
  for (const auto& g : snap.gpus) {
    // A down GPU's processes are whatever its last collection saw: not served as current.
    if (!g.up) continue;
    for (const auto& p : g.processes) {
      if (!p.series) continue;
      Labels l = owner_labels(with(device_labels(g.identity), "pid", std::to_string(p.pid)), p.owner);
      if (p.memory_bytes) add_sample(pmem, l, *p.memory_bytes);
      if (p.utilization_ratio) add_sample(putil, std::move(l), *p.utilization_ratio);
    }
  }
}

// The ledger collector's counters, one series per owner (and MIG device) of each GPU.
struct LedgerSpec {
  const char* name;
  const char* help;
  double LedgerEntry::*field;
};

constexpr LedgerSpec kLedgerFamilies[] = {
    {"gpu_allocated_seconds_total",
     "Seconds of the GPU allocated to the owner: each second is split evenly among the "
     "processes present or, under the scheduler allocation policy, among the owners it is "
     "allocated to, used or not, and those of processes outside the allocation; seconds with "
     "none go to project=\"__idle__\".",
     &LedgerEntry::allocated_seconds},
    {"gpu_busy_seconds_total",
     "Integral of GPU utilization in seconds (on a MIG device: of its SM activity, in GPU-seconds), "
     "split by each owner's SM share; what cannot be placed goes to project=\"__unattributed__\".",
     &LedgerEntry::busy_seconds},
    {"gpu_memory_byte_seconds_total", "Integral of the owner's device memory in byte-seconds.",
     &LedgerEntry::memory_byte_seconds},
    {"gpu_attributed_energy_joules_total",
     "GPU energy in joules charged to the owner: idle power split as "
     "gpu_allocated_seconds_total splits each second, the rest by busy share.",
     &LedgerEntry::energy_joules},
};

void add_ledger_families(FamilyList& fams, const Snapshot& snap) {
  for (const LedgerSpec& spec : kLedgerFamilies) {
    auto& f = fams.add(spec.name, kCounter, spec.help);
    for (const auto& g : snap.gpus) {
      if (!g.ledger) continue;
      for (const auto& e : g.ledger->owners) add_sample(f, ledger_labels(g.identity, e), e.*(spec.field));
    }
    pad_mig_labels(f);
  }
}

// The ledger collector's account of the time it covered, and the scheduler policy's own counters.
void add_ledger_coverage_families(FamilyList& fams, const Snapshot& snap) {
  // Scheduler policy only: under the process policy nobody holds a GPU without a process.
  auto& idle_allocated = fams.add("gpu_idle_allocated_seconds_total", kCounter,
                                  "Seconds of the GPU allocated to the owner by the scheduler while none of its "
                                  "processes was on it (part of gpu_allocated_seconds_total).");
  auto& covered = fams.add("gpumeter_ledger_covered_seconds_total", kCounter,
                           "Seconds of this GPU's time the ledger has integrated; equals the sum of "
                           "gpu_allocated_seconds_total over its owners.");
  auto& gaps = fams.add("gpumeter_ledger_gap_seconds_total", kCounter,
                        "Seconds of this GPU's time the ledger could not integrate (agent down or GPU "
                        "unreachable for longer than the driver's sample buffer).");
  auto& idle_energy = fams.add("gpu_attributed_idle_energy_joules_total", kCounter,
                               "The part of gpu_attributed_energy_joules_total drawn at the board's idle power "
                               "(ledger.idle_power_watts) while the owner held the GPU; the rest is its active "
                               "energy. Only on GPUs whose model has an idle power.");
  auto& foreign = fams.add("gpumeter_ledger_foreign_seconds_total", kCounter,
                           "Seconds a process outside every allocation ran on this GPU while the scheduler had "
                           "allocated it to someone; it shares the time with the allocation's owners.");
  for (const auto& g : snap.gpus) {
    if (!g.ledger) continue;
    add_sample(covered, device_labels(g.identity), g.ledger->covered_seconds);
    add_sample(gaps, device_labels(g.identity), g.ledger->gap_seconds);
    if (g.ledger->idle_power) {
      for (const auto& e : g.ledger->owners)
        add_sample(idle_energy, ledger_labels(g.identity, e), e.idle_energy_joules);
    }
    if (!g.ledger->scheduler) continue;
    add_sample(foreign, device_labels(g.identity), g.ledger->foreign_seconds);
    for (const auto& e : g.ledger->owners) {
      if (e.owner.project == kIdleProject || e.owner.project == kUnattributedProject) continue;
      add_sample(idle_allocated, ledger_labels(g.identity, e), e.idle_allocated_seconds);
    }
  }
  pad_mig_labels(idle_allocated);
  pad_mig_labels(idle_energy);
}

// The agent's build and each backend's state and counters.
void add_agent_families(FamilyList& fams, const Snapshot& snap) {
  auto& build = fams.add("gpumeter_build_info", kGauge, "Version and revision of the gpumeter agent, always 1.");
  add_sample(build, {{"version", snap.build.version}, {"revision", snap.build.revision}}, 1);

  auto& backend = fams.add("gpumeter_backend_up", kGauge,
                           "1 if the GPU backend's vendor library is loaded and initialized, 0 if it is down. "
                           "Absent backends have no series here.");
  auto& absent = fams.add("gpumeter_backend_absent", kGauge,
                          "1 for a GPU backend the node has no use for: none of its vendor's GPUs, or none of "
                          "its library (NVML not found; no AMD GPU for ROCm SMI).");
  auto& released = fams.add("gpumeter_backend_released_until_timestamp_seconds", kGauge,
                            "When an operator's release of the GPUs ends (POST /-/release, SIGUSR1): the vendor "
                            "library is closed and no GPU is read until then. 0 while the backend holds them.");
  for (const auto& b : snap.backends) {
    if (b.absent) {
      add_sample(absent, {{"backend", b.backend}}, 1);
    } else {
      add_sample(backend, {{"backend", b.backend}}, b.up ? 1 : 0);
      add_sample(released, {{"backend", b.backend}}, static_cast<double>(b.released_until_us) / 1e6);
    }
  }
  auto& call_errors = fams.add("gpumeter_backend_call_errors_total", kCounter,
                               "Driver queries that failed and left one value out while the GPU stayed up, by "
                               "call and error.");
  auto& dropped_records = fams.add("gpumeter_backend_dropped_records_total", kCounter,
                                   "Per-process utilization records dropped because they cannot be true, by "
                                   "reason.");
  auto& dropped_samples = fams.add("gpumeter_backend_dropped_samples_total", kCounter,
                                   "Device power samples and readings dropped because no board can draw them, "
                                   "by reason.");
  auto& non_finite = fams.add("gpumeter_backend_non_finite_values_total", kCounter,
                              "Values a driver call answered as NaN or infinity, dropped (left out), by call.");
  auto& not_permitted = fams.add("gpumeter_backend_not_permitted", kGauge,
                                 "1 for each driver call refused for want of privilege and no longer asked: what it "
                                 "reads is missing (on a MIG GPU the agent lacks CAP_SYS_ADMIN; nvmlEventSetWait_v2 "
                                 "then leaves out Xids inside an instance).");
  auto& reinits = fams.add("gpumeter_backend_reinitializations_total", kCounter,
                           "Times the vendor library was initialized again without a restart (e.g. after a "
                           "driver upgrade).");
  for (const auto& b : snap.backends) {
    for (const auto& [key, n] : b.counters.call_errors) {
      const auto& [gpu, call, error] = key;
      add_sample(call_errors, {{"backend", b.backend}, {"gpu", std::to_string(gpu)}, {"call", call}, {"error", error}},
                 static_cast<double>(n));
    }
    // A series per (gpu, `label`) of the backend's counts.
    auto per_gpu = [&](MetricFamily& family, const auto& counts, const char* label) {
      for (const auto& [key, n] : counts) {
        add_sample(family, {{"backend", b.backend}, {"gpu", std::to_string(key.first)}, {label, key.second}},
                   static_cast<double>(n));
      }
    };
    per_gpu(dropped_records, b.counters.dropped_records, "reason");
    per_gpu(dropped_samples, b.counters.dropped_samples, "reason");
    per_gpu(non_finite, b.counters.non_finite_values, "call");
    for (const auto& [gpu, call] : b.counters.not_permitted) {
      add_sample(not_permitted, {{"backend", b.backend}, {"gpu", std::to_string(gpu)}, {"call", call}}, 1);
    }
    if (b.up || b.counters.reinitializations > 0) {
      add_sample(reinits, {{"backend", b.backend}}, static_cast<double>(b.counters.reinitializations));
    }
  }
}

// Every collector's last run. Device collectors carry gpu/uuid; the others carry them empty so
// the family keeps one label set.
void add_collector_health_families(FamilyList& fams, const Snapshot& snap) {
  auto& success =
      fams.add("gpumeter_collector_success", kGauge, "1 if the collector's last finished run succeeded, 0 otherwise.");
  auto& duration = fams.add("gpumeter_collector_duration_seconds", kGauge,
                            "Duration of the collector's last finished run in seconds.");
  for (const auto& g : snap.gpus) {
    const std::string gpu = std::to_string(g.identity.index);
    const bool timed = std::any_of(g.runs.begin(), g.runs.end(),
                                   [](const CollectorRun& run) { return collector_info(run.collector).per_device; });
    if (!timed) {  // a backend that does not time its device collectors: the collection as a whole
      Labels l = {{"collector", "device"}, {"gpu", gpu}, {"uuid", g.identity.uuid}};
      add_sample(success, l, g.collect_success ? 1 : 0);
      add_sample(duration, std::move(l), g.collect_duration_seconds);
    }
    for (const CollectorRun& run : g.runs) {
      Labels l = {{"collector", std::string(collector_name(run.collector))}, {"gpu", gpu}, {"uuid", g.identity.uuid}};
      add_sample(success, l, run.success ? 1 : 0);
      add_sample(duration, std::move(l), run.duration_seconds);
    }
  }
  for (const auto& c : snap.collectors) {
    Labels l = {{"collector", c.collector}, {"gpu", ""}, {"uuid", ""}};
    add_sample(success, l, c.success ? 1 : 0);
    if (c.duration_seconds) add_sample(duration, std::move(l), *c.duration_seconds);
  }
}

// The attribution pipeline's own health: only with attribution on.
void add_attribution_health_families(FamilyList& fams, const Snapshot& snap) {
  const AttributionStatus& at = snap.attribution;
  if (!at.enabled) return;
  auto& dropped = fams.add("gpumeter_series_dropped_total", kCounter,
                           "Series removed by cardinality limits, by kind: process (beyond the per-process "
                           "limit), owner (ledger owners idle longer than the retention), hpc_job (job ids "
                           "beyond 64 in one mapping file) or slurm_job (jobs beyond the Slurm cgroup reader's "
                           "bounds).");
  for (const auto& [kind, n] : at.series_dropped) add_sample(dropped, {{"kind", kind}}, static_cast<double>(n));
  if (at.kubelet_up) {
    auto& kup =
        fams.add("gpumeter_kubelet_up", kGauge, "1 if the last kubelet pod-resources List succeeded, 0 otherwise.");
    add_sample(kup, {}, *at.kubelet_up ? 1 : 0);
    if (at.kubelet_last_success_unix > 0) {
      auto& age = fams.add("gpumeter_kubelet_data_age_seconds", kGauge,
                           "Age of the kubelet pod-resources data used to name pods, in seconds.");
      add_sample(age, {}, std::max(0.0, snap.taken_unix - at.kubelet_last_success_unix));
    }
  }
  if (at.checkpoint_enabled) {
    auto& ok = fams.add("gpumeter_ledger_checkpoint_success", kGauge,
                        "1 if the last save of the ledger state succeeded, 0 otherwise.");
    add_sample(ok, {}, at.checkpoint_success ? 1 : 0);
    auto& last = fams.add("gpumeter_ledger_checkpoint_timestamp_seconds", kGauge,
                          "Unix time of the last successful save of the ledger state.");
    if (at.checkpoint_last_success_unix > 0) add_sample(last, {}, at.checkpoint_last_success_unix);
    auto& dur = fams.add("gpumeter_ledger_checkpoint_duration_seconds", kGauge,
                         "Duration of the last save of the ledger state in seconds.");
    add_sample(dur, {}, at.checkpoint_duration_seconds);
    auto& failed =
        fams.add("gpumeter_ledger_checkpoint_failures_total", kCounter, "Saves of the ledger state that failed.");
    add_sample(failed, {}, static_cast<double>(at.checkpoint_failures));
    if (at.state_dropped_values > 0) {
      auto& bad = fams.add("gpumeter_ledger_state_dropped_values", kGauge,
                           "Amounts in the ledger state file read at start that could not be true (NaN, infinite or "
                           "negative): each restarted at 0 and is named in the log; the rest was resumed.");
      add_sample(bad, {}, static_cast<double>(at.state_dropped_values));
    }
  }
  auto& steps = fams.add("gpumeter_ledger_clock_steps_total", kCounter,
                         "Steps of the wall clock (NTP, a VM restore) the ledger followed, counted once per GPU.");
  add_sample(steps, {}, static_cast<double>(at.clock_steps));
}

}  // namespace
}  // namespace family_builders

// Each collector's families together, in the exposition's order. That order is older than the
// collectors: the fan speed (device) and the clock events (clocks) sit apart from the rest of
// their collectors' families.
std::vector<MetricFamily> build_families(const Snapshot& snap) {
  using namespace family_builders;
  FamilyList fams;
  add_identity_families(fams, snap);
  add_device_families(fams, snap);
  add_clocks_families(fams, snap);
  add_device_fan_families(fams, snap);
  add_pcie_families(fams, snap);
  add_clock_event_families(fams, snap);
  add_ecc_families(fams, snap);
  add_profiling_families(fams, snap);
  add_nvlink_families(fams, snap);
  add_mig_families(fams, snap);
  add_events_families(fams, snap);
  add_processes_families(fams, snap);
  add_ledger_families(fams, snap);
  add_ledger_coverage_families(fams, snap);
  add_agent_families(fams, snap);
  add_collector_health_families(fams, snap);
  add_attribution_health_families(fams, snap);
  return std::move(fams).take();
}

MetricFamily snapshot_age_family(double age_seconds) {
  return MetricFamily{kSnapshotAgeFamily,
                      "Seconds between the assembly of the served snapshot and this scrape.",
                      MetricType::kGauge,
                      {MetricSample{{}, age_seconds}}};
}

}  // namespace gpumeter
