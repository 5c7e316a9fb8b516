#include "render/compat.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "fixture_snapshot.h"
#include "render/text_writer.h"

namespace gpumeter {
namespace {

const MetricFamily* find(const std::vector<MetricFamily>& fams, std::string_view name) {
  for (const auto& f : fams) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::string label(const Labels& labels, std::string_view name) {
  for (const auto& [k, v] : labels) {
    if (k == name) return v;
  }
  return "<absent>";
}

std::vector<std::string> names(const Labels& labels) {
  std::vector<std::string> out;
  for (const auto& [k, v] : labels) out.push_back(k);
  return out;
}

CompatOptions options(std::vector<CompatSet> sets) {
  CompatOptions o;
  o.sets = std::move(sets);
  o.hostname = "node-7";
  return o;
}

TEST(dcgm_counters, AcceptsDcgmExportersDefaultFileAsTheBuiltInList) {
  const std::string path = GPUMETER_SOURCE_DIR "/tests/fixtures/dcgm-exporter/default-counters.csv";
  auto parsed = load_dcgm_counters(path);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  const DcgmCounters builtin = default_dcgm_counters();
  ASSERT_EQ(parsed->counters.size(), builtin.counters.size());
  for (std::size_t i = 0; i < builtin.counters.size(); ++i) {
    EXPECT_EQ(parsed->counters[i].field, builtin.counters[i].field);
    EXPECT_EQ(parsed->counters[i].type, builtin.counters[i].type) << builtin.counters[i].field;
    EXPECT_EQ(parsed->counters[i].help, builtin.counters[i].help) << builtin.counters[i].field;
  }
  // "DCGM_FI_DEV_DEC_UTIL ," has a blank before its comma in the file.
  EXPECT_EQ(parsed->counters[10].field, "DCGM_FI_DEV_DEC_UTIL");
  EXPECT_GT(parsed->counters[10].line, 0u);
}

TEST(dcgm_counters, AMissingFileOrADirectoryIsAnErrorNamingIt) {
  auto missing = load_dcgm_counters("/nonexistent/counters.csv");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message,
            "/nonexistent/counters.csv: cannot read the counters file: No such file or directory");
  auto dir = load_dcgm_counters(GPUMETER_SOURCE_DIR "/tests/fixtures");
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.error().message, std::string(GPUMETER_SOURCE_DIR) +
                                     "/tests/fixtures: cannot read the counters file: it is a directory, not a file");
}

TEST(dcgm_counters, MalformedLinesNameTheLine) {
  struct Case {
    std::string text;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"# c\nDCGM_FI_DEV_GPU_UTIL, gauge\n",
            "f.csv:2: expected 'DCGM_FIELD, type, help' (two commas), got 'DCGM_FI_DEV_GPU_UTIL, gauge'"},
           {"DCGM_FI_DEV_GPU_UTIL, histogram, x\n",
            "f.csv:1: DCGM_FI_DEV_GPU_UTIL: unknown type 'histogram' (expected gauge, counter or label)"},
           {"DCGM FI, gauge, x\n", "f.csv:1: 'DCGM FI' is not a field name such as DCGM_FI_DEV_GPU_UTIL"},
           {"A, gauge, x\n\nA, counter, y\n", "f.csv:3: A is listed twice"},
       }) {
    auto r = parse_dcgm_counters(c.text, "f.csv");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.error().message, c.message);
  }
  // A BOM is skipped; control characters are refused where they are, before they reach a # HELP
  // line or a log; a long line is quoted in part; a file with no field is an error.
  auto bom = parse_dcgm_counters(
      "\xEF\xBB\xBF"
      "DCGM_FI_DEV_GPU_TEMP, gauge, t\n",
      "f.csv");
  ASSERT_TRUE(bom.ok()) << bom.error().message;
  EXPECT_EQ(bom->counters.at(0).field, "DCGM_FI_DEV_GPU_TEMP");
  auto esc = parse_dcgm_counters("DCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_FI_DEV_GPU_UTIL, gauge, x\x1b[2J\n", "f.csv");
  ASSERT_FALSE(esc.ok());
  EXPECT_EQ(esc.error().message, "f.csv:2:31: control character 0x1b");
  auto nul = parse_dcgm_counters(std::string("# a\0b\n", 6), "f.csv");
  ASSERT_FALSE(nul.ok());
  EXPECT_EQ(nul.error().message, "f.csv:1:4: control character 0x00");
  auto long_line = parse_dcgm_counters(std::string(100'000, 'A') + "\n", "f.csv");
  ASSERT_FALSE(long_line.ok());
  EXPECT_EQ(long_line.error().message, "f.csv:1: expected 'DCGM_FIELD, type, help' (two commas), got '" +
                                           std::string(80, 'A') + "…' (100000 bytes)");
  for (const char* empty : {"", "\n\n", "# only comments\n"}) {
    auto none = parse_dcgm_counters(empty, "f.csv");
    ASSERT_FALSE(none.ok()) << empty;
    EXPECT_EQ(none.error().message, "f.csv: lists no field");
  }

  auto ok = parse_dcgm_counters("DCGM_FI_DEV_GPU_UTIL, GAUGE, GPU utilization, in %, of time\r\n", "f.csv");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->counters[0].type, "gauge");
  EXPECT_EQ(ok->counters[0].help, "GPU utilization, in %, of time");
}

TEST(dcgm_counters, EveryFieldOfTheDefaultIsServedAndOthersAreNamed) {
  const CollectorSet on = CollectorSet::defaults();
  EXPECT_EQ(unserved_dcgm_fields(default_dcgm_counters(), on), std::vector<std::string>{});
  // What the default file's served fields need: every collector that reads one.
  EXPECT_EQ(dcgm_field_collectors(default_dcgm_counters()), CollectorSet()
                                                                .set(CollectorId::kDevice)
                                                                .set(CollectorId::kClocks)
                                                                .set(CollectorId::kEcc)
                                                                .set(CollectorId::kPcie)
                                                                .set(CollectorId::kProfiling)
                                                                .set(CollectorId::kEvents));
  // A collector switched off leaves its fields unserved, and says which.
  const auto without = unserved_dcgm_fields(default_dcgm_counters(), CollectorSet(on).set(CollectorId::kEvents, false));
  EXPECT_NE(std::find(without.begin(), without.end(),
                      "DCGM_FI_DEV_XID_ERRORS (needs the events collector, which the configuration switches off)"),
            without.end());
  // The profiling fields of the default file are served; one gpumeter does not read is not.
  auto prof =
      parse_dcgm_counters("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, gauge, t\nDCGM_FI_PROF_PIPE_INT_ACTIVE, gauge, i\n", "f");
  ASSERT_TRUE(prof.ok());
  EXPECT_EQ(unserved_dcgm_fields(*prof, on),
            (std::vector<std::string>{"DCGM_FI_PROF_PIPE_INT_ACTIVE (a profiling metric gpumeter does not read)"}));
  auto wrong_kind = parse_dcgm_counters("DCGM_FI_DEV_GPU_UTIL, label, x\nDCGM_FI_DRIVER_VERSION, gauge, y\n", "f");
  ASSERT_TRUE(wrong_kind.ok());
  EXPECT_EQ(unserved_dcgm_fields(*wrong_kind, on),
            (std::vector<std::string>{"DCGM_FI_DEV_GPU_UTIL (a measured value, not a label)",
                                      "DCGM_FI_DRIVER_VERSION (an identity string; list it with type label)"}));
}

TEST(compat_dcgm_exporter, NamesUnitsAndLabelsOfTheDefaultCounters) {
  const Snapshot snap = testing::fixture_snapshot();
  auto fams = build_compat_families(snap, options({CompatSet::kDcgmExporter}));
  const MetricFamily* used = find(fams, "DCGM_FI_DEV_FB_USED");
  ASSERT_NE(used, nullptr);
  EXPECT_EQ(used->type, MetricType::kGauge);
  EXPECT_EQ(used->help, "Framebuffer memory used (in MiB).");
  ASSERT_EQ(used->samples.size(), 2u);  // GPU 2 is down: dcgm-exporter shows no value for it either
  EXPECT_EQ(names(used->samples[0].labels),
            (std::vector<std::string>{"gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname",
                                      "DCGM_FI_DRIVER_VERSION"}));
  EXPECT_EQ(label(used->samples[0].labels, "UUID"), "GPU-6f2d9d6c-1c3e-4b7e-9a43-2b8b0f3c1a10");
  EXPECT_EQ(label(used->samples[0].labels, "device"), "nvidia0");
  EXPECT_EQ(label(used->samples[0].labels, "modelName"), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(label(used->samples[0].labels, "Hostname"), "node-7");
  EXPECT_EQ(label(used->samples[0].labels, "DCGM_FI_DRIVER_VERSION"), "550.54.15");
  EXPECT_DOUBLE_EQ(used->samples[0].value, 40960);  // MiB
  const MetricFamily* energy = find(fams, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION");
  ASSERT_NE(energy, nullptr);
  EXPECT_EQ(energy->type, MetricType::kCounter);
  EXPECT_TRUE(energy->foreign_name);
  EXPECT_DOUBLE_EQ(energy->samples[0].value, 123456789123.0);                    // mJ
  EXPECT_DOUBLE_EQ(find(fams, "DCGM_FI_DEV_SM_CLOCK")->samples[0].value, 1980);  // MHz
  EXPECT_DOUBLE_EQ(find(fams, "DCGM_FI_DEV_GPU_UTIL")->samples[0].value, 53);    // percent
  EXPECT_DOUBLE_EQ(find(fams, "DCGM_FI_DEV_MEMORY_TEMP")->samples[0].value, 71);
  // GPU 1 has no SM clock reading: no sample, never a placeholder.
  EXPECT_EQ(find(fams, "DCGM_FI_DEV_SM_CLOCK")->samples.size(), 1u);
  EXPECT_EQ(find(fams, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"), nullptr);
  EXPECT_EQ(find(fams, "DCGM_FI_DEV_ENC_UTIL"), nullptr);
}

TEST(compat_dcgm_exporter, TheCountersFileChoosesFieldsAndLabels) {
  const Snapshot snap = testing::fixture_snapshot();
  CompatOptions o = options({CompatSet::kDcgmExporter});
  o.hostname = "";
  o.counters = *parse_dcgm_counters(
      "DCGM_FI_DEV_FB_TOTAL, gauge, total\nDCGM_FI_DEV_VBIOS_VERSION, label, vbios\nDCGM_FI_DEV_X, gauge, ?\n", "f");
  auto fams = build_compat_families(snap, o);
  ASSERT_EQ(fams.size(), 1u);
  EXPECT_EQ(fams[0].name, "DCGM_FI_DEV_FB_TOTAL");
  EXPECT_DOUBLE_EQ(fams[0].samples[0].value, 81559);
  EXPECT_EQ(names(fams[0].samples[0].labels), (std::vector<std::string>{"gpu", "UUID", "pci_bus_id", "device",
                                                                        "modelName", "DCGM_FI_DEV_VBIOS_VERSION"}));
}

Snapshot shared_gpu() {
  Snapshot snap = testing::fixture_snapshot();
  auto& g = snap.gpus[0];
  auto proc = [](unsigned pid, std::string ns, std::string pod, std::string job, double sm, double mem) {
    ProcessSnapshot p;
    p.pid = pid;
    p.owner.namespace_ = std::move(ns);
    p.owner.pod = std::move(pod);
    p.owner.container = p.owner.pod.empty() ? "" : "main";
    p.owner.hpc_job = std::move(job);
    p.utilization_ratio = sm;
    p.memory_bytes = mem;
    return p;
  };
  constexpr double GiB = 1024.0 * 1024 * 1024;
  g.processes = {proc(10, "ml", "train-a", "", 0.3, 10 * GiB), proc(11, "ml", "train-b", "", 0.05, 20 * GiB),
                 proc(12, "ml", "train-b", "", 0.05, 10 * GiB)};
  ProcessSnapshot gone = proc(13, "ml", "old", "", 0, 0);
  gone.running = false;  // kept after exit: not an owner any more
  g.processes.push_back(gone);
  return snap;
}

TEST(compat_dcgm_exporter, SharedGpuGivesEachPodItsSeriesSplitAsTheLedgerSplits) {
  auto fams = build_compat_families(shared_gpu(), options({CompatSet::kDcgmExporter, CompatSet::kDcgmExporter1x}));
  for (const char* util_name : {"DCGM_FI_DEV_GPU_UTIL", "dcgm_gpu_utilization"}) {
    const MetricFamily* util = find(fams, util_name);
    ASSERT_NE(util, nullptr);
    ASSERT_EQ(util->samples.size(), 3u);  // train-a, train-b on GPU 0; GPU 1 unattributed
    EXPECT_EQ(label(util->samples[0].labels, "pod"), "train-a");
    EXPECT_EQ(label(util->samples[0].labels, "namespace"), "ml");
    EXPECT_EQ(label(util->samples[0].labels, "container"), "main");
    EXPECT_EQ(label(util->samples[1].labels, "pod"), "train-b");
    EXPECT_DOUBLE_EQ(util->samples[0].value, 53 * 0.75);  // SM shares 0.3 : 0.1
    EXPECT_DOUBLE_EQ(util->samples[1].value, 53 * 0.25);
    EXPECT_EQ(label(util->samples[2].labels, "pod"), "<absent>");
  }
  const MetricFamily* used = find(fams, "DCGM_FI_DEV_FB_USED");
  EXPECT_DOUBLE_EQ(used->samples[0].value, 40960 * 0.25);  // memory 10 GiB : 30 GiB
  EXPECT_DOUBLE_EQ(used->samples[1].value, 40960 * 0.75);
  const MetricFamily* temp = find(fams, "DCGM_FI_DEV_GPU_TEMP");
  EXPECT_DOUBLE_EQ(temp->samples[0].value, 64);  // a device value, repeated on each pod's series
  EXPECT_DOUBLE_EQ(temp->samples[1].value, 64);
}

TEST(compat_dcgm_exporter, LastXidReservedFramebufferVideoEnginesAndActivityByPod) {
  Snapshot snap = shared_gpu();
  auto r0 = std::make_shared<DeviceReading>(*snap.gpus[0].reading);
  r0->device.memory_reserved_bytes = 512.0 * 1024 * 1024;
  r0->device.encoder_utilization_ratio = 0.25;
  r0->device.decoder_utilization_ratio = 0.5;
  r0->profiling = ProfilingReading{};
  r0->profiling->graphics_active_ratio = 0.8;
  r0->profiling->nvlink_transmit_bytes_per_second = 3e9;
  r0->profiling->nvlink_receive_bytes_per_second = 1e9;
  snap.gpus[0].reading = r0;
  snap.gpus[0].last_xid = 13;
  snap.gpus[1].last_xid = 0;  // the events collector on, no Xid yet
  CompatOptions o = options({CompatSet::kDcgmExporter});
  o.counters = *parse_dcgm_counters(
      "DCGM_FI_DEV_XID_ERRORS, gauge, x\nDCGM_FI_DEV_FB_RESERVED, gauge, r\nDCGM_FI_PROF_GR_ENGINE_ACTIVE, gauge, g\n"
      "DCGM_FI_DEV_ENC_UTIL, gauge, e\nDCGM_FI_DEV_DEC_UTIL, gauge, d\n"
      "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL, counter, n\n",
      "f");
  auto fams = build_compat_families(snap, o);
  const MetricFamily* xid = find(fams, "DCGM_FI_DEV_XID_ERRORS");
  ASSERT_NE(xid, nullptr);
  ASSERT_EQ(xid->samples.size(), 3u);  // each pod of GPU 0, and GPU 1
  EXPECT_DOUBLE_EQ(xid->samples[0].value, 13);
  EXPECT_DOUBLE_EQ(xid->samples[1].value, 13);
  EXPECT_DOUBLE_EQ(xid->samples[2].value, 0);
  const MetricFamily* reserved = find(fams, "DCGM_FI_DEV_FB_RESERVED");
  ASSERT_NE(reserved, nullptr);
  ASSERT_EQ(reserved->samples.size(), 2u);                                     // GPU 1 read no v2 memory
  EXPECT_DOUBLE_EQ(reserved->samples[0].value, 512);                           // MiB, repeated on each pod's series
  EXPECT_DOUBLE_EQ(find(fams, "DCGM_FI_DEV_ENC_UTIL")->samples[0].value, 25);  // percent
  EXPECT_DOUBLE_EQ(find(fams, "DCGM_FI_DEV_DEC_UTIL")->samples[1].value, 50);
  // DCGM's NVLink bandwidth: both directions, bytes/s over 1024 * 1000, on GPU 0's series only.
  const MetricFamily* nvlink = find(fams, "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL");
  ASSERT_NE(nvlink, nullptr);
  ASSERT_EQ(nvlink->samples.size(), 2u);
  EXPECT_DOUBLE_EQ(nvlink->samples[0].value, 4e9 / 1024 / 1000);
  // OpenCost reads a container's GPU usage from the graphics engine's activity: each pod its share.
  const MetricFamily* active = find(fams, "DCGM_FI_PROF_GR_ENGINE_ACTIVE");
  ASSERT_NE(active, nullptr);
  ASSERT_EQ(active->samples.size(), 2u);
  EXPECT_DOUBLE_EQ(active->samples[0].value, 0.8 * 0.75);
  EXPECT_DOUBLE_EQ(active->samples[1].value, 0.8 * 0.25);
  // With the events collector off there is no last Xid to tell.
  snap.gpus[0].last_xid.reset();
  snap.gpus[1].last_xid.reset();
  EXPECT_EQ(find(build_compat_families(snap, o), "DCGM_FI_DEV_XID_ERRORS"), nullptr);
}

TEST(compat_dcgm_exporter, OneOwnerGetsTheWholeGpuAndJobsTheirHpcJobLabel) {
  Snapshot snap = shared_gpu();
  auto& procs = snap.gpus[0].processes;
  for (auto& p : procs) {
    p.owner.namespace_ = p.owner.pod = p.owner.container = "";
    p.owner.hpc_job = "4242";
  }
  auto fams = build_compat_families(snap, options({CompatSet::kDcgmExporter}));
  const MetricFamily* util = find(fams, "DCGM_FI_DEV_GPU_UTIL");
  ASSERT_EQ(util->samples.size(), 2u);
  EXPECT_EQ(label(util->samples[0].labels, "hpc_job"), "4242");
  EXPECT_EQ(label(util->samples[0].labels, "pod"), "<absent>");
  EXPECT_DOUBLE_EQ(util->samples[0].value, 53);
}

TEST(compat_dcgm_exporter_1x, OldNamesIncludingFbTotal) {
  auto fams = build_compat_families(testing::fixture_snapshot(), options({CompatSet::kDcgmExporter1x}));
  EXPECT_EQ(find(fams, "DCGM_FI_DEV_GPU_UTIL"), nullptr);
  ASSERT_NE(find(fams, "dcgm_fb_total"), nullptr);
  EXPECT_DOUBLE_EQ(find(fams, "dcgm_fb_total")->samples[0].value, 81559);
  EXPECT_DOUBLE_EQ(find(fams, "dcgm_fb_used")->samples[0].value, 40960);
  EXPECT_DOUBLE_EQ(find(fams, "dcgm_gpu_utilization")->samples[0].value, 53);
  EXPECT_DOUBLE_EQ(find(fams, "dcgm_gpu_temp")->samples[0].value, 64);
  EXPECT_EQ(find(fams, "dcgm_total_energy_consumption")->type, MetricType::kCounter);
  EXPECT_EQ(label(find(fams, "dcgm_fb_used")->samples[0].labels, "UUID"), "GPU-6f2d9d6c-1c3e-4b7e-9a43-2b8b0f3c1a10");
}

TEST(compat_nvidia_smi, NamesAndTheExportersUuid) {
  auto fams = build_compat_families(testing::fixture_snapshot(), options({CompatSet::kNvidiaSmi}));
  const MetricFamily* pct = find(fams, "nvidia_smi_utilization_gpu_percent");
  ASSERT_NE(pct, nullptr);
  EXPECT_DOUBLE_EQ(pct->samples[0].value, 53);
  EXPECT_EQ(pct->samples[0].labels, (Labels{{"uuid", "6f2d9d6c-1c3e-4b7e-9a43-2b8b0f3c1a10"}}));
  EXPECT_DOUBLE_EQ(find(fams, "nvidia_smi_utilization_gpu_ratio")->samples[0].value, 0.53);
  EXPECT_DOUBLE_EQ(find(fams, "nvidia_smi_memory_used_bytes")->samples[0].value, 42949672960.0);
  EXPECT_DOUBLE_EQ(find(fams, "nvidia_smi_clocks_current_sm_clock_hz")->samples[0].value, 1980e6);
  EXPECT_EQ(label(find(fams, "nvidia_smi_gpu_info")->samples[1].labels, "name"), "NVIDIA A100-PCIE-40GB");
  EXPECT_EQ(find(fams, "DCGM_FI_DEV_GPU_UTIL"), nullptr);
}

TEST(compat, OnlyNvidiaGpusHaveTheNvidiaExportersNames) {
  Snapshot snap = testing::fixture_snapshot();
  snap.gpus[1].identity.vendor = "amd";  // an AMD GPU beside the H100: no DCGM or nvidia-smi series
  auto fams = build_compat_families(
      snap, options({CompatSet::kDcgmExporter, CompatSet::kDcgmExporter1x, CompatSet::kNvidiaSmi}));
  for (const auto& f : fams) {
    ASSERT_EQ(f.samples.size(), 1u) << f.name;
    const std::string gpu = label(f.samples[0].labels, "gpu");
    if (gpu != "<absent>") {
      EXPECT_EQ(gpu, "0") << f.name;
    }
    const std::string uuid = label(f.samples[0].labels, "uuid");
    if (uuid != "<absent>") {
      EXPECT_EQ(uuid, "6f2d9d6c-1c3e-4b7e-9a43-2b8b0f3c1a10") << f.name;
    }
  }
}

TEST(compat, SetsRenderInTheOrderChosenAndNamesParse) {
  auto fams =
      build_compat_families(testing::fixture_snapshot(), options({CompatSet::kNvidiaSmi, CompatSet::kDcgmExporter}));
  ASSERT_FALSE(fams.empty());
  EXPECT_TRUE(fams.front().name.starts_with("nvidia_smi_"));
  EXPECT_TRUE(fams.back().name.starts_with("DCGM_FI_"));
  EXPECT_EQ(*parse_compat_set("dcgm-exporter-1.x"), CompatSet::kDcgmExporter1x);
  EXPECT_FALSE(parse_compat_set("dcgm").ok());
}

TEST(compat, ForeignCounterKeepsItsNameInOpenMetrics) {
  MetricFamily f{"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "mJ", MetricType::kCounter, {{{{"gpu", "0"}}, 5}}};
  f.foreign_name = true;
  const std::string om = render({f}, ExpositionFormat::kOpenMetrics100);
  EXPECT_NE(om.find("# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION unknown\n"), std::string::npos) << om;
  EXPECT_NE(om.find("\nDCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"0\"} 5\n"), std::string::npos) << om;
  const std::string text = render({f}, ExpositionFormat::kText004);
  EXPECT_NE(text.find("# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n"), std::string::npos) << text;
}

TEST(compat_dcgm_exporter, ProfilingFieldsAndMigInstancesWithTheirGpuInstanceLabels) {
  auto o = options({CompatSet::kDcgmExporter});
  auto fams = build_compat_families(testing::mig_fixture_snapshot(), o);
  const MetricFamily* tensor = find(fams, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE");
  ASSERT_NE(tensor, nullptr);
  // GPU 0 is a MIG parent without profiling of its own: one series per GPU instance (three, the
  // two compute instances of GPU instance 2 share one), then GPU 1 as a whole.
  ASSERT_EQ(tensor->samples.size(), 4u);
  EXPECT_EQ(names(tensor->samples[0].labels),
            (std::vector<std::string>{"gpu", "UUID", "pci_bus_id", "device", "modelName", "GPU_I_PROFILE", "GPU_I_ID",
                                      "Hostname", "DCGM_FI_DRIVER_VERSION"}));
  EXPECT_EQ(label(tensor->samples[0].labels, "GPU_I_PROFILE"), "3g.40gb");
  EXPECT_EQ(label(tensor->samples[0].labels, "GPU_I_ID"), "1");
  EXPECT_DOUBLE_EQ(tensor->samples[0].value, 0.5);  // a ratio, as DCGM's
  EXPECT_EQ(label(tensor->samples[2].labels, "GPU_I_PROFILE"), "3g.40gb") << "the GPU instance's profile";
  EXPECT_EQ(label(tensor->samples[2].labels, "GPU_I_ID"), "2");
  EXPECT_EQ(label(tensor->samples[3].labels, "gpu"), "1");
  EXPECT_EQ(label(tensor->samples[3].labels, "GPU_I_ID"), "<absent>");
  EXPECT_DOUBLE_EQ(tensor->samples[3].value, 0.625);
  // Framebuffer per instance, in MiB; the parent's own series keeps the whole GPU's.
  const MetricFamily* used = find(fams, "DCGM_FI_DEV_FB_USED");
  ASSERT_NE(used, nullptr);
  ASSERT_EQ(used->samples.size(), 5u);  // GPU 0, its three GPU instances, GPU 1
  EXPECT_EQ(label(used->samples[0].labels, "GPU_I_ID"), "<absent>");
  EXPECT_DOUBLE_EQ(used->samples[1].value, 20480);
  EXPECT_DOUBLE_EQ(used->samples[2].value, 0);
  // The 1.x names knew no MIG: whole GPUs only.
  auto old = build_compat_families(testing::mig_fixture_snapshot(), options({CompatSet::kDcgmExporter1x}));
  EXPECT_EQ(find(old, "dcgm_fb_used")->samples.size(), 2u);
}

TEST(compat_dcgm_exporter, ProfilingFieldsAreAbsentWithoutProfiling) {
  DcgmCounters all;
  for (const char* f : {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_SM_OCCUPANCY",
                        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_PIPE_FP64_ACTIVE",
                        "DCGM_FI_PROF_PIPE_FP32_ACTIVE", "DCGM_FI_PROF_PIPE_FP16_ACTIVE", "DCGM_FI_PROF_PCIE_TX_BYTES",
                        "DCGM_FI_PROF_PCIE_RX_BYTES", "DCGM_FI_PROF_NVLINK_TX_BYTES", "DCGM_FI_PROF_NVLINK_RX_BYTES"}) {
    all.counters.push_back({f, "gauge", "h", 0});
  }
  EXPECT_TRUE(unserved_dcgm_fields(all, CollectorSet::all()).empty());
  auto o = options({CompatSet::kDcgmExporter});
  o.counters = all;
  // The first fixture's GPUs have no GPM (an A100, and an H100 whose reading has none): nothing.
  EXPECT_TRUE(build_compat_families(testing::fixture_snapshot(), o).empty());
  auto fams = build_compat_families(testing::mig_fixture_snapshot(), o);
  EXPECT_EQ(fams.size(), 12u);
  EXPECT_DOUBLE_EQ(find(fams, "DCGM_FI_PROF_NVLINK_TX_BYTES")->samples.back().value, 52428800);  // bytes/s
  EXPECT_DOUBLE_EQ(find(fams, "DCGM_FI_PROF_PIPE_FP16_ACTIVE")->samples.back().value, 0.3125);
}

}  // namespace
}  // namespace gpumeter
