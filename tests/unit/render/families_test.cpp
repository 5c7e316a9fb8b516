#include "render/families.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>
#include <tuple>

#include "fixture_snapshot.h"

namespace gpumeter {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

const MetricFamily* find(const std::vector<MetricFamily>& fams, const std::string& name) {
  for (const auto& f : fams) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::string label(const MetricSample& s, const std::string& name) {
  for (const auto& [k, v] : s.labels) {
    if (k == name) return v;
  }
  return "<absent>";
}

// Samples of `family` for the GPU with the given index, as (extra label value, value) pairs.
std::vector<std::pair<std::string, double>> samples_for_gpu(const MetricFamily& f, unsigned gpu,
                                                            const std::string& extra = "") {
  std::vector<std::pair<std::string, double>> out;
  for (const auto& s : f.samples) {
    if (label(s, "gpu") == std::to_string(gpu)) out.emplace_back(extra.empty() ? "" : label(s, extra), s.value);
  }
  return out;
}

TEST(BuildFamilies, FixedOrderOfAllFamilies) {
  auto fams = build_families(testing::fixture_snapshot());
  std::vector<std::string> names;
  for (const auto& f : fams) names.push_back(f.name);
  EXPECT_THAT(
      names,
      ElementsAre("gpu_up", "gpu_info", "gpu_utilization_ratio", "gpu_memory_utilization_ratio",
                  "gpu_memory_total_bytes", "gpu_memory_used_bytes", "gpu_memory_free_bytes", "gpu_temperature_celsius",
                  "gpu_power_watts", "gpu_power_limit_watts", "gpu_energy_joules_total", "gpu_clock_hertz",
                  "gpu_performance_state", "gpu_fan_speed_ratio", "gpu_pcie_link_generation", "gpu_pcie_link_width",
                  "gpu_pcie_replay_errors_total", "gpu_pcie_transmit_bytes_total", "gpu_pcie_receive_bytes_total",
                  "gpu_clock_event_active", "gpu_ecc_errors_total", "gpu_remapped_rows", "gpu_xid_errors_total",
                  "gpumeter_build_info", "gpumeter_backend_up", "gpumeter_backend_released_until_timestamp_seconds",
                  "gpumeter_backend_call_errors_total", "gpumeter_backend_dropped_records_total",
                  "gpumeter_backend_reinitializations_total", "gpumeter_collector_success",
                  "gpumeter_collector_duration_seconds"));
}

TEST(BuildFamilies, EveryFieldOfAnUpGpu) {
  auto fams = build_families(testing::fixture_snapshot());
  auto one = [&](const char* name) {
    auto v = samples_for_gpu(*find(fams, name), 0);
    EXPECT_EQ(v.size(), 1u) << name;
    return v.empty() ? -1.0 : v[0].second;
  };
  EXPECT_EQ(one("gpu_up"), 1);
  EXPECT_EQ(one("gpu_utilization_ratio"), 0.53);
  EXPECT_EQ(one("gpu_memory_utilization_ratio"), 0.21);
  EXPECT_EQ(one("gpu_memory_total_bytes"), 85520809984.0);
  EXPECT_EQ(one("gpu_memory_used_bytes"), 42949672960.0);
  EXPECT_EQ(one("gpu_memory_free_bytes"), 42571137024.0);
  EXPECT_EQ(one("gpu_power_watts"), 312.457);
  EXPECT_EQ(one("gpu_power_limit_watts"), 700);
  EXPECT_EQ(one("gpu_energy_joules_total"), 123456789.123);
  EXPECT_EQ(one("gpu_performance_state"), 0);
  EXPECT_EQ(one("gpu_pcie_link_generation"), 5);
  EXPECT_EQ(one("gpu_pcie_link_width"), 16);
  EXPECT_EQ(one("gpu_pcie_replay_errors_total"), 0);
  EXPECT_EQ(one("gpu_pcie_transmit_bytes_total"), 1234567890123.0);
  EXPECT_EQ(one("gpu_pcie_receive_bytes_total"), 987654321098.0);
  EXPECT_THAT(samples_for_gpu(*find(fams, "gpu_temperature_celsius"), 0, "sensor"),
              ElementsAre(Pair("gpu", 64), Pair("memory", 71)));
  EXPECT_THAT(samples_for_gpu(*find(fams, "gpu_clock_hertz"), 0, "clock"),
              ElementsAre(Pair("graphics", 1980e6), Pair("sm", 1980e6), Pair("memory", 2619e6), Pair("video", 1755e6)));
  EXPECT_THAT(samples_for_gpu(*find(fams, "gpu_clock_event_active"), 0, "reason"),
              ElementsAre(Pair("gpu_idle", 0), Pair("sw_power_cap", 1), Pair("hw_slowdown", 0)));
  EXPECT_THAT(samples_for_gpu(*find(fams, "gpu_ecc_errors_total"), 0, "severity"),
              ElementsAre(Pair("corrected", 12), Pair("uncorrected", 0)));
  EXPECT_THAT(samples_for_gpu(*find(fams, "gpu_remapped_rows"), 0, "kind"),
              ElementsAre(Pair("correctable", 2), Pair("uncorrectable", 0), Pair("pending", 0), Pair("failure", 0)));
}

TEST(BuildFamilies, DeviceLabelsAndInfo) {
  auto fams = build_families(testing::fixture_snapshot());
  const auto* info = find(fams, "gpu_info");
  ASSERT_NE(info, nullptr);
  ASSERT_EQ(info->samples.size(), 3u);  // down GPUs keep their identity
  EXPECT_THAT(
      info->samples[1].labels,
      ElementsAre(Pair("gpu", "1"), Pair("uuid", "GPU-0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d"), Pair("vendor", "nvidia"),
                  Pair("model", "NVIDIA A100-PCIE-40GB"), Pair("pci_bus_id", "00000000:3B:00.0"),
                  Pair("driver_version", "550.54.15"), Pair("vbios_version", "92.00.25.00.08 \"eng\\build\"")));
  // Unknown identity fields stay as empty labels so the family keeps one label set.
  EXPECT_EQ(label(info->samples[2], "vbios_version"), "");
  for (const auto& s : info->samples) EXPECT_EQ(s.value, 1);
  EXPECT_THAT(find(fams, "gpu_power_watts")->samples[0].labels,
              ElementsAre(Pair("gpu", "0"), Pair("uuid", "GPU-6f2d9d6c-1c3e-4b7e-9a43-2b8b0f3c1a10")));
}

TEST(BuildFamilies, DownGpuHasOnlyUpInfoXidAndCollectorSamples) {
  auto fams = build_families(testing::fixture_snapshot());
  std::set<std::string> with_gpu2;
  for (const auto& f : fams) {
    for (const auto& s : f.samples) {
      if (label(s, "gpu") == "2") with_gpu2.insert(f.name);
    }
  }
  EXPECT_EQ(with_gpu2, (std::set<std::string>{"gpu_up", "gpu_info", "gpu_xid_errors_total",
                                              "gpumeter_collector_success", "gpumeter_collector_duration_seconds"}));
  EXPECT_THAT(samples_for_gpu(*find(fams, "gpu_up"), 2), ElementsAre(Pair("", 0)));
  // xid map order is numeric, not the order events arrived in.
  EXPECT_THAT(samples_for_gpu(*find(fams, "gpu_xid_errors_total"), 2, "xid"),
              ElementsAre(Pair("48", 3), Pair("79", 1)));
}

// With attribution on, a down GPU keeps its ledger counters (totals of time already
// integrated, still true) but not the per-process gauges its last collection saw.
TEST(BuildFamilies, DownGpuKeepsLedgerCountersButNoProcessSeries) {
  Snapshot snap = testing::fixture_snapshot();
  ASSERT_FALSE(snap.gpus[2].up);
  OwnerLabels o;
  o.project = "nlp";
  auto ledger = std::make_shared<GpuLedgerSnapshot>();
  ledger->owners.push_back({o, 10, 9.5, 7.2e11, 6000});
  ledger->covered_seconds = 10;
  snap.gpus[2].ledger = ledger;
  snap.gpus[2].processes.push_back({31001, o, 1.6e10, 0.3, true});
  snap.attribution.enabled = true;
  auto fams = build_families(snap);
  std::set<std::string> with_gpu2;
  for (const auto& f : fams) {
    for (const auto& s : f.samples) {
      if (label(s, "gpu") == "2") with_gpu2.insert(f.name);
    }
  }
  EXPECT_EQ(with_gpu2,
            (std::set<std::string>{"gpu_up", "gpu_info", "gpu_xid_errors_total", "gpu_allocated_seconds_total",
                                   "gpu_busy_seconds_total", "gpu_memory_byte_seconds_total",
                                   "gpu_attributed_energy_joules_total", "gpumeter_ledger_covered_seconds_total",
                                   "gpumeter_ledger_gap_seconds_total", "gpumeter_collector_success",
                                   "gpumeter_collector_duration_seconds"}));
  EXPECT_EQ(find(fams, "gpu_process_memory_used_bytes"), nullptr);
  EXPECT_EQ(find(fams, "gpu_process_utilization_ratio"), nullptr);

  snap.gpus[2].up = true;  // the same processes on a GPU that is up are served
  fams = build_families(snap);
  ASSERT_NE(find(fams, "gpu_process_memory_used_bytes"), nullptr);
  EXPECT_THAT(samples_for_gpu(*find(fams, "gpu_process_utilization_ratio"), 2), ElementsAre(Pair("", 0.3)));
}

TEST(BuildFamilies, DownGpuWithStaleReadingIsIgnored) {
  Snapshot s = testing::fixture_snapshot();
  s.gpus[0].up = false;  // the reading is kept but must not be served once the GPU is down
  auto fams = build_families(s);
  EXPECT_TRUE(samples_for_gpu(*find(fams, "gpu_utilization_ratio"), 0).empty());
  EXPECT_EQ(find(fams, "gpu_power_limit_watts"), nullptr);  // GPU 0 was the only one with a limit
}

TEST(BuildFamilies, UpGpuWithoutReadingHasNoReadingMetrics) {
  Snapshot s = testing::fixture_snapshot();
  s.gpus[1].reading = nullptr;
  auto fams = build_families(s);
  EXPECT_THAT(samples_for_gpu(*find(fams, "gpu_up"), 1), ElementsAre(Pair("", 1)));
  EXPECT_TRUE(samples_for_gpu(*find(fams, "gpu_memory_used_bytes"), 1).empty());
  EXPECT_EQ(find(fams, "gpu_fan_speed_ratio"), nullptr);  // only GPU 1 had a fan
}

TEST(BuildFamilies, UnsupportedValuesAreAbsentNotPlaceholders) {
  auto fams = build_families(testing::fixture_snapshot());
  // GPU 1 has no power limit, no memory utilization, no ECC, no remapped rows, no PCIe counters.
  for (const char* name : {"gpu_power_limit_watts", "gpu_memory_utilization_ratio", "gpu_ecc_errors_total",
                           "gpu_remapped_rows", "gpu_pcie_replay_errors_total", "gpu_pcie_transmit_bytes_total"}) {
    EXPECT_TRUE(samples_for_gpu(*find(fams, name), 1).empty()) << name;
  }
  // GPU 0 has no fan: the fan family only holds GPU 1.
  EXPECT_THAT(samples_for_gpu(*find(fams, "gpu_fan_speed_ratio"), 0), ElementsAre());
  EXPECT_THAT(samples_for_gpu(*find(fams, "gpu_fan_speed_ratio"), 1), ElementsAre(Pair("", 0.3)));
}

TEST(BuildFamilies, FamilyWithoutSamplesIsLeftOut) {
  Snapshot s;
  s.build = {"v", "r"};
  auto fams = build_families(s);
  ASSERT_EQ(fams.size(), 1u);
  EXPECT_EQ(fams[0].name, "gpumeter_build_info");
  EXPECT_THAT(fams[0].samples[0].labels, ElementsAre(Pair("version", "v"), Pair("revision", "r")));
}

TEST(BuildFamilies, InvalidCounterValuesAreDroppedGaugesKept) {
  Snapshot s = testing::fixture_snapshot();
  auto r = std::make_shared<DeviceReading>(*s.gpus[0].reading);
  r->device.energy_joules = std::nan("");
  r->pcie.replay_errors = -1;
  r->ecc.errors = {{"corrected", std::nan("")}, {"uncorrected", 3}};
  r->device.power_watts = std::nan("");
  s.gpus[0].reading = r;
  auto fams = build_families(s);
  EXPECT_TRUE(samples_for_gpu(*find(fams, "gpu_energy_joules_total"), 0).empty());
  EXPECT_EQ(find(fams, "gpu_pcie_replay_errors_total"), nullptr);
  EXPECT_THAT(samples_for_gpu(*find(fams, "gpu_ecc_errors_total"), 0, "severity"), ElementsAre(Pair("uncorrected", 3)));
  auto power = samples_for_gpu(*find(fams, "gpu_power_watts"), 0);
  ASSERT_EQ(power.size(), 1u);
  EXPECT_TRUE(std::isnan(power[0].second));
}

TEST(BuildFamilies, SelfMetrics) {
  auto fams = build_families(testing::fixture_snapshot());
  EXPECT_THAT(find(fams, "gpumeter_build_info")->samples[0].labels,
              ElementsAre(Pair("version", "0.1.0"), Pair("revision", "abc1234")));
  const auto* backend = find(fams, "gpumeter_backend_up");
  ASSERT_EQ(backend->samples.size(), 2u);
  EXPECT_THAT(backend->samples[0].labels, ElementsAre(Pair("backend", "nvml")));
  EXPECT_EQ(backend->samples[0].value, 1);
  EXPECT_EQ(backend->samples[1].value, 0);

  const auto* call_errors = find(fams, "gpumeter_backend_call_errors_total");
  ASSERT_NE(call_errors, nullptr);
  ASSERT_EQ(call_errors->samples.size(), 2u);
  EXPECT_THAT(call_errors->samples[1].labels,
              ElementsAre(Pair("backend", "nvml"), Pair("gpu", "1"), Pair("call", "nvmlDeviceGetFanSpeed"),
                          Pair("error", "unknown")));
  EXPECT_EQ(call_errors->samples[1].value, 3);
  const auto* dropped = find(fams, "gpumeter_backend_dropped_records_total");
  ASSERT_NE(dropped, nullptr);
  ASSERT_EQ(dropped->samples.size(), 1u);
  EXPECT_THAT(dropped->samples[0].labels,
              ElementsAre(Pair("backend", "nvml"), Pair("gpu", "0"), Pair("reason", "pid_zero")));
  EXPECT_EQ(dropped->samples[0].value, 12);
  // Only for a backend that is loaded (or was): a library that never loaded has nothing to count.
  const auto* reinits = find(fams, "gpumeter_backend_reinitializations_total");
  ASSERT_NE(reinits, nullptr);
  ASSERT_EQ(reinits->samples.size(), 1u);
  EXPECT_THAT(reinits->samples[0].labels, ElementsAre(Pair("backend", "nvml")));
  EXPECT_EQ(reinits->samples[0].value, 1);

  const auto* success = find(fams, "gpumeter_collector_success");
  const auto* duration = find(fams, "gpumeter_collector_duration_seconds");
  ASSERT_EQ(success->samples.size(), 4u);  // three GPUs and the events collector
  EXPECT_THAT(success->samples[0].labels, ElementsAre(Pair("collector", "device"), Pair("gpu", "0"),
                                                      Pair("uuid", "GPU-6f2d9d6c-1c3e-4b7e-9a43-2b8b0f3c1a10")));
  EXPECT_EQ(success->samples[2].value, 0);  // GPU 2 failed
  EXPECT_THAT(success->samples[3].labels, ElementsAre(Pair("collector", "events"), Pair("gpu", ""), Pair("uuid", "")));
  EXPECT_EQ(duration->samples[2].value, 1.5);
  ASSERT_EQ(duration->samples.size(), 3u);  // the event wait has an outcome, not a duration
}

// A backend that times no device collector (ROCm SMI) still has the collection as a whole as its
// device collector, beside the processes and ledger runs of the usage pass.
TEST(BuildFamilies, ProcessesAndLedgerRunsBesideAnUntimedDeviceCollection) {
  Snapshot s = testing::fixture_snapshot();
  s.gpus[0].runs = {{CollectorId::kProcesses, true, 0.004}, {CollectorId::kLedger, false, 0.0002}};
  s.gpus[1].runs = {{CollectorId::kDevice, true, 0.01}, {CollectorId::kProcesses, true, 0.003}};
  const auto fams = build_families(s);
  const auto* success = find(fams, "gpumeter_collector_success");
  const auto* duration = find(fams, "gpumeter_collector_duration_seconds");
  ASSERT_NE(success, nullptr);
  ASSERT_NE(duration, nullptr);
  std::vector<std::tuple<std::string, std::string, double>> got;
  for (const auto& sample : duration->samples) {
    got.emplace_back(sample.labels[0].second, sample.labels[1].second, sample.value);
  }
  EXPECT_THAT(got, ElementsAre(std::tuple("device", "0", s.gpus[0].collect_duration_seconds),
                               std::tuple("processes", "0", 0.004), std::tuple("ledger", "0", 0.0002),
                               std::tuple("device", "1", 0.01), std::tuple("processes", "1", 0.003),
                               std::tuple("device", "2", 1.5)));
  ASSERT_GE(success->samples.size(), 3u);
  EXPECT_EQ(success->samples[2].value, 0);  // GPU 0's ledger run failed
}

// [a-zA-Z_][a-zA-Z0-9_]*, the metric name syntax without the colons reserved for recording rules.
bool valid_name(const std::string& n) {
  auto ok = [](char c, bool first) {
    return std::isalpha(static_cast<unsigned char>(c)) || c == '_' ||
           (!first && std::isdigit(static_cast<unsigned char>(c)));
  };
  if (n.empty() || !ok(n[0], true)) return false;
  return std::all_of(n.begin() + 1, n.end(), [&](char c) { return ok(c, false); });
}

TEST(BuildFamilies, NamesTypesAndLabelSetsAreConsistent) {
  for (const auto& f : build_families(testing::fixture_snapshot())) {
    EXPECT_TRUE(valid_name(f.name)) << f.name;
    EXPECT_EQ(f.name.ends_with("_total"), f.type == MetricType::kCounter) << f.name;
    EXPECT_FALSE(f.help.empty()) << f.name;
    ASSERT_FALSE(f.samples.empty()) << f.name;
    std::vector<std::string> first;
    for (const auto& [k, v] : f.samples[0].labels) first.push_back(k);
    std::set<std::vector<std::pair<std::string, std::string>>> seen;
    for (const auto& s : f.samples) {
      std::vector<std::string> keys;
      for (const auto& [k, v] : s.labels) keys.push_back(k);
      EXPECT_EQ(keys, first) << f.name;
      EXPECT_TRUE(seen.insert(s.labels).second) << "duplicate series in " << f.name;
    }
  }
}

TEST(SnapshotAgeFamily, IsAnUnlabeledGauge) {
  auto f = snapshot_age_family(2.5);
  EXPECT_EQ(f.name, "gpumeter_snapshot_age_seconds");
  EXPECT_EQ(f.type, MetricType::kGauge);
  ASSERT_EQ(f.samples.size(), 1u);
  EXPECT_TRUE(f.samples[0].labels.empty());
  EXPECT_EQ(f.samples[0].value, 2.5);
}

TEST(Families, LedgerAndProcessSeriesCarryEveryOwnerLabel) {
  Snapshot snap = testing::fixture_snapshot();
  auto ledger = std::make_shared<GpuLedgerSnapshot>();
  OwnerLabels o;
  o.project = "nlp";
  o.user = "dana";
  o.namespace_ = "team-nlp";
  o.pod = "trainer-0";
  o.container = "trainer";
  ledger->owners.push_back({o, 10, 9.5, 7.2e11, 6000});
  OwnerLabels idle;
  idle.project = kIdleProject;
  ledger->owners.push_back({idle, 2, 0, 0, 140});
  ledger->covered_seconds = 12;
  snap.gpus[0].ledger = ledger;
  snap.gpus[0].processes.push_back({31001, o, 7.7e10, 0.95, true});
  snap.attribution.enabled = true;
  snap.attribution.series_dropped = {{"owner", 0}, {"process", 3}};
  auto fams = build_families(snap);

  const MetricFamily* alloc = find(fams, "gpu_allocated_seconds_total");
  ASSERT_NE(alloc, nullptr);
  EXPECT_EQ(alloc->type, MetricType::kCounter);
  ASSERT_EQ(alloc->samples.size(), 2u);
  std::vector<std::string> names;
  for (const auto& [k, v] : alloc->samples[0].labels) names.push_back(k);
  EXPECT_THAT(names, ElementsAre("gpu", "uuid", "project", "user", "namespace", "pod", "container", "hpc_job"));
  EXPECT_EQ(label(alloc->samples[0], "pod"), "trainer-0");
  EXPECT_EQ(label(alloc->samples[1], "project"), "__idle__");
  EXPECT_EQ(label(alloc->samples[1], "user"), "");
  EXPECT_EQ(find(fams, "gpu_busy_seconds_total")->samples[0].value, 9.5);
  EXPECT_EQ(find(fams, "gpu_memory_byte_seconds_total")->samples[0].value, 7.2e11);
  EXPECT_EQ(find(fams, "gpu_attributed_energy_joules_total")->samples[1].value, 140);
  EXPECT_EQ(find(fams, "gpumeter_ledger_covered_seconds_total")->samples[0].value, 12);

  const MetricFamily* pmem = find(fams, "gpu_process_memory_used_bytes");
  ASSERT_NE(pmem, nullptr);
  EXPECT_EQ(label(pmem->samples[0], "pid"), "31001");
  EXPECT_EQ(label(pmem->samples[0], "namespace"), "team-nlp");
  EXPECT_EQ(find(fams, "gpu_process_utilization_ratio")->samples[0].value, 0.95);
  const MetricFamily* dropped = find(fams, "gpumeter_series_dropped_total");
  ASSERT_NE(dropped, nullptr);
  EXPECT_EQ(label(dropped->samples[1], "kind"), "process");
  EXPECT_EQ(dropped->samples[1].value, 3);
  // No series may carry Prometheus's own target labels.
  for (const auto& f : fams) {
    for (const auto& smp : f.samples) {
      for (const auto& [k, v] : smp.labels) {
        EXPECT_NE(k, "job") << f.name;
        EXPECT_NE(k, "instance") << f.name;
      }
    }
  }
}

TEST(Families, NoLedgerFamiliesWithoutAttribution) {
  auto fams = build_families(testing::fixture_snapshot());
  EXPECT_EQ(find(fams, "gpu_allocated_seconds_total"), nullptr);
  EXPECT_EQ(find(fams, "gpumeter_series_dropped_total"), nullptr);
}

// ---- GPM, NVLink and MIG ----

Labels labels_of(const MetricSample& s) { return s.labels; }

TEST(MigFamilies, InstancesCarryTheParentsLabelsAndWhichInstanceTheyAre) {
  auto fams = build_families(testing::mig_fixture_snapshot());
  const MetricFamily* used = find(fams, "gpu_memory_used_bytes");
  ASSERT_NE(used, nullptr);
  ASSERT_EQ(used->samples.size(), 6u);  // two GPUs, four instances
  const MetricSample& parent = used->samples[0];
  EXPECT_EQ(labels_of(parent), (Labels{{"gpu", "0"},
                                       {"uuid", "GPU-6f2d9d6c-1c3e-4b7e-9a43-2b8b0f3c1a10"},
                                       {"mig_uuid", ""},
                                       {"gpu_instance", ""},
                                       {"compute_instance", ""},
                                       {"mig_profile", ""}}));
  const MetricSample* shared = nullptr;
  for (const auto& smp : used->samples) {
    if (label(smp, "mig_profile") == "1c.3g.40gb") shared = &smp;
  }
  ASSERT_NE(shared, nullptr);
  EXPECT_EQ(label(*shared, "gpu"), "0");
  EXPECT_EQ(label(*shared, "uuid"), "GPU-6f2d9d6c-1c3e-4b7e-9a43-2b8b0f3c1a10");
  EXPECT_EQ(label(*shared, "mig_uuid"), "MIG-4a5b6c7d-8e9f-5a0b-9c1d-2e3f4a5b6c7d");
  EXPECT_EQ(label(*shared, "gpu_instance"), "2");
  EXPECT_EQ(label(*shared, "compute_instance"), "2");
  EXPECT_EQ(shared->value, 4294967296.0);
}

TEST(MigFamilies, WithoutInstancesTheFamiliesKeepTheirLabels) {
  // The first fixture has no MIG instance: gpu_memory_used_bytes has only gpu and uuid.
  auto fams = build_families(testing::fixture_snapshot());
  for (const auto& smp : find(fams, "gpu_memory_used_bytes")->samples) {
    EXPECT_EQ(label(smp, "mig_uuid"), "<absent>");
  }
  for (const char* name : {"gpu_sm_active_ratio", "gpu_nvlink_up", "gpu_mig_enabled", "gpu_mig_slices",
                           "gpu_mig_instance_slices", "gpu_pipe_active_ratio"}) {
    EXPECT_EQ(find(fams, name), nullptr) << name << ": no reading has it, so no family";
  }
}

TEST(MigFamilies, ModeSlicesAndInstanceSlices) {
  auto fams = build_families(testing::mig_fixture_snapshot());
  EXPECT_THAT(samples_for_gpu(*find(fams, "gpu_mig_enabled"), 0), ElementsAre(Pair("", 1)));
  EXPECT_THAT(samples_for_gpu(*find(fams, "gpu_mig_enabled"), 1), ElementsAre(Pair("", 0)));
  EXPECT_THAT(samples_for_gpu(*find(fams, "gpu_mig_slices"), 0), ElementsAre(Pair("", 7)));
  EXPECT_THAT(samples_for_gpu(*find(fams, "gpu_mig_instance_slices"), 0, "mig_profile"),
              ElementsAre(Pair("3g.40gb", 3), Pair("2g.20gb", 2), Pair("2c.3g.40gb", 3), Pair("1c.3g.40gb", 3)));
}

TEST(MigFamilies, ProfilingOfWholeGpusAndOfInstances) {
  auto fams = build_families(testing::mig_fixture_snapshot());
  // GPU 0 is a MIG parent without a profiling reading of its own: only its instances.
  EXPECT_THAT(samples_for_gpu(*find(fams, "gpu_sm_active_ratio"), 0, "mig_profile"),
              ElementsAre(Pair("3g.40gb", 0.75), Pair("2g.20gb", 0), Pair("2c.3g.40gb", 0.5), Pair("1c.3g.40gb", 0.5)));
  EXPECT_THAT(samples_for_gpu(*find(fams, "gpu_sm_active_ratio"), 1, "mig_uuid"), ElementsAre(Pair("", 0.875)));
  EXPECT_THAT(samples_for_gpu(*find(fams, "gpu_pipe_active_ratio"), 1, "pipe"),
              ElementsAre(Pair("fp64", 0), Pair("fp32", 0.125), Pair("fp16", 0.3125)));
  EXPECT_THAT(samples_for_gpu(*find(fams, "gpu_pcie_throughput_bytes_per_second"), 1, "direction"),
              ElementsAre(Pair("transmit", 1048576), Pair("receive", 2097152)));
  // NVLink throughput only where the reading has it (GPU 1).
  EXPECT_THAT(samples_for_gpu(*find(fams, "gpu_nvlink_throughput_bytes_per_second"), 1, "direction"),
              ElementsAre(Pair("transmit", 52428800), Pair("receive", 41943040)));
  EXPECT_TRUE(samples_for_gpu(*find(fams, "gpu_nvlink_throughput_bytes_per_second"), 0).empty());
  // The family's own label comes after the MIG labels, on every sample.
  for (const auto& smp : find(fams, "gpu_pipe_active_ratio")->samples) {
    EXPECT_EQ(smp.labels.back().first, "pipe");
    EXPECT_EQ(smp.labels[2].first, "mig_uuid");
  }
}

TEST(MigFamilies, NvlinkPerLinkOnlyWhatTheLinkAnswered) {
  auto fams = build_families(testing::mig_fixture_snapshot());
  EXPECT_THAT(samples_for_gpu(*find(fams, "gpu_nvlink_up"), 1, "link"), ElementsAre(Pair("0", 1), Pair("1", 0)));
  EXPECT_THAT(samples_for_gpu(*find(fams, "gpu_nvlink_speed_bytes_per_second"), 1, "link"),
              ElementsAre(Pair("0", 26562500000.0)));
  EXPECT_THAT(samples_for_gpu(*find(fams, "gpu_nvlink_transmit_bytes_total"), 1, "link"),
              ElementsAre(Pair("0", 1099511627776.0), Pair("1", 0)));
  EXPECT_THAT(samples_for_gpu(*find(fams, "gpu_nvlink_errors_total"), 1, "type"),
              ElementsAre(Pair("replay", 0), Pair("recovery", 1), Pair("crc", 3)));
  EXPECT_EQ(find(fams, "gpu_nvlink_errors_total")->type, MetricType::kCounter);
}

TEST(MigFamilies, NamesTypesAndLabelSetsAreConsistent) {
  for (const auto& f : build_families(testing::mig_fixture_snapshot())) {
    EXPECT_TRUE(valid_name(f.name)) << f.name;
    EXPECT_EQ(f.name.ends_with("_total"), f.type == MetricType::kCounter) << f.name;
    ASSERT_FALSE(f.samples.empty()) << f.name;
    std::set<std::vector<std::pair<std::string, std::string>>> seen;
    for (const auto& smp : f.samples) {
      std::vector<std::string> keys, first;
      for (const auto& [k, v] : smp.labels) keys.push_back(k);
      for (const auto& [k, v] : f.samples[0].labels) first.push_back(k);
      EXPECT_EQ(keys, first) << f.name;
      EXPECT_TRUE(seen.insert(smp.labels).second) << "duplicate series in " << f.name;
    }
  }
}

TEST(AmdFamilies, EccPerBlockPerformanceLevelAndPcieThroughput) {
  Snapshot s = testing::fixture_snapshot();
  GpuSnapshot amd;
  amd.identity.index = 7;
  amd.identity.uuid = "0x4f1a2b3c4d5e6f70";
  amd.identity.vendor = "amd";
  amd.up = true;
  auto r = std::make_shared<DeviceReading>();
  r->ecc.errors = {{"corrected", 5}, {"uncorrected", 1}};
  r->ecc.block_errors = {{"umc", 3, 1}, {"gfx", 2, 0}};
  r->clocks.performance_level = {{"auto", 0}, {"manual", 1}};
  r->pcie.transmit_bytes_per_second = 1e9;
  r->pcie.receive_bytes_per_second = 2e9;
  amd.reading = r;
  s.gpus.push_back(amd);
  auto fams = build_families(s);

  // The blocks' series replace the GPU's sums; the NVIDIA GPU keeps its own, without a block.
  std::set<std::tuple<std::string, std::string, double>> ecc;
  for (const auto& smp : find(fams, "gpu_ecc_errors_total")->samples) {
    if (label(smp, "gpu") == "7") ecc.insert({label(smp, "block"), label(smp, "severity"), smp.value});
  }
  EXPECT_EQ(
      ecc,
      (std::set<std::tuple<std::string, std::string, double>>{
          {"umc", "corrected", 3}, {"umc", "uncorrected", 1}, {"gfx", "corrected", 2}, {"gfx", "uncorrected", 0}}));
  EXPECT_THAT(samples_for_gpu(*find(fams, "gpu_ecc_errors_total"), 0, "block"),
              ElementsAre(Pair("<absent>", 12), Pair("<absent>", 0)));

  EXPECT_THAT(samples_for_gpu(*find(fams, "gpu_performance_level"), 7, "level"),
              ElementsAre(Pair("auto", 0), Pair("manual", 1)));
  EXPECT_TRUE(samples_for_gpu(*find(fams, "gpu_performance_level"), 0).empty());
  EXPECT_THAT(samples_for_gpu(*find(fams, "gpu_pcie_throughput_bytes_per_second"), 7, "direction"),
              ElementsAre(Pair("transmit", 1e9), Pair("receive", 2e9)));
}

}  // namespace
}  // namespace gpumeter
