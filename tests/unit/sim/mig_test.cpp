// MIG in the scenario: the layouts as parsed (placements, ids, UUIDs, MIG indices), the layout
// validation errors, and the per-instance ground truth (instances plus unallocated slices make
// the GPU's slice-seconds; instance energies plus unallocated idle power make its energy).

#include <gtest/gtest.h>

#include <regex>
#include <stdexcept>

#include "mig_scenario.h"
#include "sim/scenario/scenario_parse.h"
#include "sim/physics/timeline.h"
#include "sim/truth/truth.h"
#include "sim/truth/truth_mig.h"
#include "test_support.h"

namespace gpumeter::sim {
namespace {

constexpr Micros S = kMicrosPerSecond;

Scenario parse_ok(const std::string& yaml) {
  auto s = parse_scenario(yaml, "mig.yaml");
  EXPECT_TRUE(s.ok()) << s.error().message;
  return s.ok() ? std::move(s).value() : Scenario{};
}

std::string parse_error(const std::string& yaml) {
  auto s = parse_scenario(yaml, "mig.yaml");
  EXPECT_FALSE(s.ok());
  return s.ok() ? std::string() : s.error().message;
}

const MigInstance& named(const Scenario& s, const std::string& name) { return s.mig.instances.at(s.mig.find(name)); }

TEST(MigScenario, PlacesInstancesAndGivesTheirIds) {
  Scenario s = parse_ok(testing::mig_yaml());
  ASSERT_EQ(s.mig.instances.size(), 5u);
  EXPECT_TRUE(s.mig.enabled(0));
  EXPECT_FALSE(s.mig.enabled(1));
  struct Want {
    const char* name;
    unsigned placement, gi, index, slices;
    Micros start, end;
  };
  for (const Want& w : {Want{"train", 4, 1, 0, 3, 0, kForever}, Want{"infer", 2, 6, 1, 2, 0, kForever},
                        Want{"small-a", 1, 8, 2, 1, 0, 45 * S}, Want{"small-b", 0, 7, 3, 1, 0, 45 * S},
                        Want{"merged", 0, 5, 2, 2, 45 * S, kForever}}) {
    const MigInstance& m = named(s, w.name);
    EXPECT_EQ(m.placement, w.placement) << w.name;
    EXPECT_EQ(m.gpu_instance_id, w.gi) << w.name;
    EXPECT_EQ(m.compute_instance_id, 0u) << w.name;
    EXPECT_EQ(m.mig_index, w.index) << w.name;
    EXPECT_EQ(m.slices, w.slices) << w.name;
    EXPECT_EQ(m.start, w.start) << w.name;
    EXPECT_EQ(m.end, w.end) << w.name;
    EXPECT_TRUE(
        std::regex_match(m.uuid, std::regex("MIG-[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")))
        << m.uuid;
  }
  EXPECT_EQ(named(s, "train").memory_bytes, 4ULL * 10240 * 1024 * 1024);  // 4 of 8 memory slices of 80 GiB
  // Deterministic in the seed, different under another seed.
  EXPECT_EQ(parse_ok(testing::mig_yaml()).mig.instances[0].uuid, s.mig.instances[0].uuid);
  std::string other = testing::mig_yaml();
  other.replace(other.find("uuid_seed: mig-test"), 19, "uuid_seed: mig-else");
  EXPECT_NE(parse_ok(other).mig.instances[0].uuid, s.mig.instances[0].uuid);
  // Jobs know their instance.
  EXPECT_EQ(s.jobs[0].mig, s.mig.find("train"));
  EXPECT_EQ(s.jobs.back().mig, kNoMigInstance);
  EXPECT_EQ(s.allocations[0].mig, s.mig.find("merged"));
}

std::string with_layout(const std::string& instances, const std::string& jobs = "") {
  return R"(
duration: 60
models:
  h100: {name: NVIDIA H100 80GB HBM3, architecture: hopper, memory: 80GiB, power: {limit: 700, idle: 70, max: 690}, temperature: {idle: 30, max: 80, memory_offset: 5}, clocks: {graphics: {idle: 300, max: 1800}, sm: {idle: 300, max: 1800}, memory: {idle: 2600, max: 2600}, video: {idle: 500, max: 1500}}}
  a100: {name: NVIDIA A100-SXM4-40GB, architecture: ga100, memory: 40GiB, power: {limit: 400, idle: 50, max: 400}, temperature: {idle: 30, max: 80, memory_offset: 5}, clocks: {graphics: {idle: 300, max: 1800}, sm: {idle: 300, max: 1800}, memory: {idle: 2600, max: 2600}, video: {idle: 500, max: 1500}}}
  l4: {name: NVIDIA L4, architecture: ada, memory: 24GiB, power: {limit: 72, idle: 16, max: 72}, temperature: {idle: 30, max: 80, memory_offset: 5}, clocks: {graphics: {idle: 300, max: 1800}, sm: {idle: 300, max: 1800}, memory: {idle: 2600, max: 2600}, video: {idle: 500, max: 1500}}}
  a30: {name: NVIDIA A30, memory: 24GiB, power: {limit: 165, idle: 32, max: 165}, temperature: {idle: 30, max: 75, memory_offset: 5}, clocks: {graphics: {idle: 210, max: 1440}, sm: {idle: 210, max: 1440}, memory: {idle: 1215, max: 1215}, video: {idle: 585, max: 1305}}}
gpus:
  - {model: h100}
  - {model: a100}
  - {model: l4}
  - {model: a30}
mig:
)" + instances +
         (jobs.empty() ? "" : "jobs:\n" + jobs);
}

TEST(MigScenario, RejectsLayoutsThatCannotExist) {
  struct Case {
    const char* what;
    std::string yaml;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {"unknown profile", with_layout("  - {gpu: 0, layouts: [{at: 0, instances: [{name: a, profile: 3g.20gb}]}]}\n"),
       "unknown profile '3g.20gb' for a NVIDIA H100 80GB HBM3 (profiles: 1g.10gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb)"},
      {"A100 40GB names", with_layout("  - {gpu: 1, layouts: [{at: 0, instances: [{name: a, profile: 3g.40gb}]}]}\n"),
       "unknown profile '3g.40gb' for a NVIDIA A100-SXM4-40GB (profiles: 1g.5gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb)"},
      {"no MIG on the model", with_layout("  - {gpu: 2, layouts: [{at: 0, instances: []}]}\n"),
       "GPU 2 is a 'l4' (NVIDIA L4), for which no MIG profiles are modelled"},
      {"too many slices",
       with_layout(
           "  - {gpu: 0, layouts: [{at: 0, instances: [{name: a, profile: 4g.40gb}, {name: b, profile: 4g.40gb}]}]}\n"),
       "no free placement for 4g.40gb 'b' in this layout"},
      {"compute slices",
       with_layout(
           "  - {gpu: 0, layouts: [{at: 0, instances: [{name: a, profile: 4g.40gb}, {name: b, profile: 3g.40gb},"
           " {name: c, profile: 1g.10gb}]}]}\n"),
       "no free placement for 1g.10gb 'c'"},
      {"illegal placement",
       with_layout("  - {gpu: 0, layouts: [{at: 0, instances: [{name: a, profile: 3g.40gb, placement: 2}]}]}\n"),
       "3g.40gb cannot start at memory slice 2 (legal: 0, 4)"},
      {"overlapping placements",
       with_layout("  - {gpu: 0, layouts: [{at: 0, instances: [{name: a, profile: 3g.40gb, placement: 0},"
                   " {name: b, profile: 2g.20gb, placement: 2}]}]}\n"),
       "2g.20gb 'b' at memory slice 2 overlaps another instance of this layout"},
      {"profile change",
       with_layout("  - {gpu: 0, layouts: [{at: 0, instances: [{name: a, profile: 1g.10gb}]},"
                   " {at: 10, instances: [{name: a, profile: 2g.20gb}]}]}\n"),
       "instance 'a' was 1g.10gb at memory slice 6; an instance keeps its profile and placement for life"},
      {"layouts out of order",
       with_layout("  - {gpu: 0, layouts: [{at: 10, instances: []}, {at: 5, instances: []}]}\n"),
       "layouts must be listed by strictly increasing 'at'"},
      {"job on a MIG GPU without an instance",
       with_layout("  - {gpu: 0, layouts: [{at: 0, instances: [{name: a, profile: 1g.10gb}]}]}\n",
                   "  - {name: j, gpus: [0], pid: 10, utilization: 0.5}\n"),
       "runs on GPU 0, which is in MIG mode: name its instance with 'mig:'"},
      {"job outliving its instance",
       with_layout(
           "  - {gpu: 0, layouts: [{at: 0, instances: [{name: a, profile: 1g.10gb}]}, {at: 30, instances: []}]}\n",
           "  - {name: j, gpus: [0], mig: a, pid: 10, start: 5, end: 40, utilization: 0.5}\n"),
       "runs over [5 s, 40 s), outside the life of MIG instance 'a' [0 s, 30 s): the processes of a destroyed "
       "instance must have ended"},
      {"job on another GPU than its instance",
       with_layout("  - {gpu: 0, layouts: [{at: 0, instances: [{name: a, profile: 1g.10gb}]}]}\n",
                   "  - {name: j, gpus: [1], mig: a, pid: 10, utilization: 0.5}\n"),
       "runs on MIG instance 'a' of GPU 0: its gpus must be [0]"},
      {"instance memory",
       with_layout("  - {gpu: 0, layouts: [{at: 0, instances: [{name: a, profile: 1g.10gb}]}]}\n",
                   "  - {name: j, gpus: [0], mig: a, pid: 10, memory: 11GiB, utilization: 0.5}\n"),
       "jobs on MIG instance 'a' would hold 11811160064 bytes at 0 s, more than its 10737418240 bytes"},
      {"unknown instance",
       with_layout("  - {gpu: 0, layouts: [{at: 0, instances: [{name: a, profile: 1g.10gb}]}]}\n",
                   "  - {name: j, gpus: [0], mig: b, pid: 10, utilization: 0.5}\n"),
       "unknown MIG instance 'b' (instances: a)"},
      {"Xid on another GPU than its instance",
       with_layout("  - {gpu: 0, layouts: [{at: 0, instances: [{name: a, profile: 1g.10gb}]}]}\n") +
           "faults:\n  - {kind: xid, gpu: 1, at: 5, code: 31, mig: a}\n",
       "MIG instance 'a' is on GPU 0, not GPU 1"},
      {"Xid outside its instance's life",
       with_layout(
           "  - {gpu: 0, layouts: [{at: 0, instances: [{name: a, profile: 1g.10gb}]}, {at: 30, instances: []}]}\n") +
           "faults:\n  - {kind: xid, gpu: 0, at: 40, code: 31, mig: a}\n",
       "at 40 s, outside the life of MIG instance 'a' [0 s, 30 s)"},
      {"A30 names", with_layout("  - {gpu: 3, layouts: [{at: 0, instances: [{name: a, profile: 1g.5gb}]}]}\n"),
       "unknown profile '1g.5gb' for a NVIDIA A30 (profiles: 1g.6gb, 2g.12gb, 4g.24gb)"},
      {"A30: 4g and 2g",
       with_layout(
           "  - {gpu: 3, layouts: [{at: 0, instances: [{name: a, profile: 4g.24gb}, {name: b, profile: 2g.12gb}]}]}\n"),
       "no free placement for 2g.12gb 'b' in this layout"},
      {"A30: five 1g",
       with_layout("  - {gpu: 3, layouts: [{at: 0, instances: [{name: a, profile: 1g.6gb}, {name: b, profile: 1g.6gb},"
                   " {name: c, profile: 1g.6gb}, {name: d, profile: 1g.6gb}, {name: e, profile: 1g.6gb}]}]}\n"),
       "no free placement for 1g.6gb 'e' in this layout"},
      {"A30: four memory slices",
       with_layout("  - {gpu: 3, layouts: [{at: 0, instances: [{name: a, profile: 1g.6gb, placement: 4}]}]}\n"),
       "placement: must be between 0 and 3, got 4"},
      {"A30: 2g placements",
       with_layout("  - {gpu: 3, layouts: [{at: 0, instances: [{name: a, profile: 2g.12gb, placement: 1}]}]}\n"),
       "2g.12gb cannot start at memory slice 1 (legal: 0, 2)"},
  };
  for (const Case& c : cases) {
    const std::string message = parse_error(c.yaml);
    EXPECT_NE(message.find(c.expected), std::string::npos) << c.what << "\n  got: " << message;
    EXPECT_EQ(message.rfind("mig.yaml:", 0), 0u) << c.what << ": " << message;
  }
}

TEST(MigScenario, ExplicitPlacementsAndTheSevenSliceInstance) {
  Scenario s = parse_ok(with_layout(
      "  - {gpu: 1, layouts: [{at: 0, instances: [{name: whole, profile: 7g.40gb}]},"
      " {at: 10, instances: [{name: x, profile: 4g.20gb, placement: 0}, {name: y, profile: 3g.20gb}]}]}\n"));
  EXPECT_EQ(named(s, "whole").gpu_instance_id, 0u);
  EXPECT_EQ(named(s, "whole").end, 10 * S);
  EXPECT_EQ(named(s, "x").placement, 0u);
  EXPECT_EQ(named(s, "y").placement, 4u);
  EXPECT_EQ(named(s, "y").gpu_instance_id, 1u);
  EXPECT_NE(named(s, "x").gpu_instance_id, named(s, "y").gpu_instance_id);
  EXPECT_EQ(named(s, "x").memory_bytes, 4ULL * 5 * 1024 * 1024 * 1024);
}

// The A30: 4 compute and 4 memory slices of 6 GiB, GPU instance ids by placement (1g 3-6, 2g at
// 0 and 2: 1 and 2, 4g 0).
TEST(MigScenario, A30LayoutsOfFourSlices) {
  Scenario s = parse_ok(with_layout(
      "  - {gpu: 3, layouts: [{at: 0, instances: [{name: a, profile: 1g.6gb}, {name: b, profile: 1g.6gb},"
      " {name: c, profile: 1g.6gb}, {name: d, profile: 1g.6gb}]},"
      " {at: 10, instances: [{name: a, profile: 1g.6gb}, {name: b, profile: 1g.6gb}, {name: e, profile: 2g.12gb}]},"
      " {at: 20, instances: [{name: f, profile: 2g.12gb}, {name: g, profile: 2g.12gb}]},"
      " {at: 30, instances: [{name: whole, profile: 4g.24gb}]}]}\n"));
  struct Want {
    const char* name;
    unsigned placement, gi, slices, memory_slices;
  };
  for (const Want& w :
       {Want{"a", 3, 6, 1, 1}, Want{"b", 2, 5, 1, 1}, Want{"c", 1, 4, 1, 1}, Want{"d", 0, 3, 1, 1},
        Want{"e", 0, 1, 2, 2}, Want{"f", 2, 2, 2, 2}, Want{"g", 0, 1, 2, 2}, Want{"whole", 0, 0, 4, 4}}) {
    const MigInstance& m = named(s, w.name);
    EXPECT_EQ(m.placement, w.placement) << w.name;
    EXPECT_EQ(m.gpu_instance_id, w.gi) << w.name;
    EXPECT_EQ(m.slices, w.slices) << w.name;
    EXPECT_EQ(m.memory_bytes, w.memory_slices * 6ULL * 1024 * 1024 * 1024) << w.name;  // a quarter of 24 GiB
  }
  EXPECT_EQ(named(s, "e").mig_index, 2u);  // the lowest index c and d left free
  const GpuModelSpec& a30 = s.model_of(3);
  EXPECT_EQ(a30.architecture, "ga100");
  EXPECT_EQ(mig_compute_slices(a30), 4u);
  EXPECT_EQ(mig_memory_slices(a30), 4u);
  EXPECT_EQ(mig_compute_slices(s.model_of(0)), 7u);
  EXPECT_EQ(mig_memory_slices(s.model_of(1)), 8u);
  EXPECT_EQ(mig_compute_slices(s.model_of(2)), 0u);
}

TEST(MigTruth, AnA30IsFourSlices) {
  // 2g + 1g leave one slice of four unallocated.
  Scenario s = parse_ok(with_layout(
      "  - {gpu: 3, layouts: [{at: 0, instances: [{name: a, profile: 2g.12gb}, {name: b, profile: 1g.6gb}]}]}\n",
      "  - {name: ja, gpus: [3], mig: a, pid: 10, start: 0, end: 60, utilization: 0.5}\n"));
  const MigTruth t = compute_mig_truth(s, 0, 60 * S, false);
  ASSERT_EQ(t.gpus.size(), 1u);
  EXPECT_EQ(t.gpus[0].slices, 4u);
  EXPECT_DOUBLE_EQ(t.gpus[0].slice_seconds, 60.0 * 4);
  EXPECT_DOUBLE_EQ(t.gpus[0].unallocated_slice_seconds, 60.0 * 1);
  // Idle power by slice share: the unused 1g gets a quarter of it, the free slice another.
  ASSERT_EQ(t.instances.size(), 2u);
  EXPECT_DOUBLE_EQ(t.instances[1].energy_joules, 32.0 / 4 * 60);
  EXPECT_DOUBLE_EQ(t.gpus[0].unallocated_energy_joules, 32.0 / 4 * 60);
  // The parent's utilization weighs the 2g at 50% by 2 of 4 slices: 25%.
  EXPECT_NEAR(t.gpus[0].energy_joules, compute_truth(s, 0, 60 * S).gpus[3].energy_joules, 1e-6);
  EXPECT_EQ(GpuTimeline(s, 3).segment_at(10 * S).util_percent, 25);
}

TEST(MigTruth, InstancesPlusUnallocatedMakeTheGpu) {
  // 3g + 1g leave 3 slices unallocated until 20 s; a 2g is added then (1 left).
  Scenario s = parse_ok(with_layout(
      "  - {gpu: 0, layouts: [{at: 0, instances: [{name: a, profile: 3g.40gb}, {name: b, profile: 1g.10gb}]},"
      " {at: 20, instances: [{name: a, profile: 3g.40gb}, {name: b, profile: 1g.10gb}, {name: c, profile: "
      "2g.20gb}]}]}\n",
      "  - {name: ja, gpus: [0], mig: a, pid: 10, start: 5, end: 50, utilization: 0.8, memory: 1GiB}\n"
      "  - {name: jb, gpus: [0], mig: b, pid: 11, start: 10, end: 30, utilization: 0.5}\n"
      "  - {name: jb2, gpus: [0], mig: b, pid: 12, start: 15, end: 25, utilization: 0.7}\n"
      "  - {name: jc, gpus: [0], mig: c, pid: 13, start: 20, end: 40, utilization: 0.25}\n"));
  const MigTruth t = compute_mig_truth(s, 0, 60 * S, false);
  ASSERT_EQ(t.gpus.size(), 1u);
  const MigGpuTruth& g = t.gpus[0];
  EXPECT_DOUBLE_EQ(g.slice_seconds, 60.0 * 7);
  EXPECT_DOUBLE_EQ(g.unallocated_slice_seconds, 20.0 * 3 + 40.0 * 1);
  double slice_seconds = g.unallocated_slice_seconds;
  double energy = g.unallocated_energy_joules;
  for (const MigInstanceTruth& m : t.instances) {
    slice_seconds += m.slice_seconds;
    energy += m.energy_joules;
    double owners_allocated = m.idle_seconds, owners_energy = m.idle_energy_joules;
    for (const MigOwnerTruth& o : m.owners) {
      owners_allocated += o.allocated_seconds;
      owners_energy += o.energy_joules;
    }
    EXPECT_NEAR(owners_allocated, m.seconds, 1e-9) << m.name;
    EXPECT_NEAR(owners_energy, m.energy_joules, 1e-6) << m.name;
  }
  EXPECT_NEAR(slice_seconds, g.slice_seconds, 1e-9);
  EXPECT_NEAR(energy, g.energy_joules, 1e-6);
  // The GPU's energy is the whole-GPU truth's, whose power follows the slice-weighted activity.
  EXPECT_NEAR(g.energy_joules, compute_truth(s, 0, 60 * S).gpus[0].energy_joules, 1e-6);
  // Instance b: two processes 15-25 s share it by time and by their activity.
  const MigInstanceTruth& b = t.instances[1];
  ASSERT_EQ(b.name, "b");
  ASSERT_EQ(b.owners.size(), 2u);
  EXPECT_DOUBLE_EQ(b.busy_seconds, 0.5 * 5 + 1.0 * 10 + 0.5 * 5);
  EXPECT_DOUBLE_EQ(b.owners[0].allocated_seconds, 5 + 5 + 5);  // jb alone 10-15 and 25-30, half of 15-25
  EXPECT_DOUBLE_EQ(b.owners[1].allocated_seconds, 5);
  EXPECT_DOUBLE_EQ(b.idle_seconds, 40);
  // Idle power by slice share: instance a (3 of 7 slices), active or not, gets 3/7 of idle.
  const MigInstanceTruth& a = t.instances[0];
  EXPECT_GT(a.energy_joules, 70.0 * 3 / 7 * 60);
  EXPECT_DOUBLE_EQ(a.memory_byte_seconds, 1024.0 * 1024 * 1024 * 45);
}

TEST(MigTruth, RepartitionEndsAndStartsInstances) {
  Scenario s = parse_ok(testing::mig_yaml());
  const MigTruth t = compute_mig_truth(s, 0, 90 * S, false);
  ASSERT_EQ(t.instances.size(), 5u);
  for (const MigInstanceTruth& m : t.instances) {
    if (m.name == "small-a" || m.name == "small-b") {
      EXPECT_EQ(m.end, 45 * S) << m.name;
      EXPECT_DOUBLE_EQ(m.seconds, 45) << m.name;
    }
    if (m.name == "merged") {
      EXPECT_EQ(m.start, 45 * S);
      EXPECT_DOUBLE_EQ(m.seconds, 45);
      EXPECT_DOUBLE_EQ(m.allocated_seconds, 35);  // its kernel 50-85 s (process policy)
      ASSERT_EQ(m.owners.size(), 1u);
      EXPECT_EQ(m.owners[0].name, "nb-f-kernel");
    }
  }
  // Under the scheduler policy the allocation holds "merged" 47-88 s, and owns its kernel.
  const MigTruth st = compute_mig_truth(s, 0, 90 * S, true);
  const MigInstanceTruth& merged = st.instances[4];
  ASSERT_EQ(merged.name, "merged");
  ASSERT_EQ(merged.owners.size(), 1u);
  EXPECT_TRUE(merged.owners[0].is_allocation);
  EXPECT_EQ(merged.owners[0].name, "notebook-f");
  EXPECT_DOUBLE_EQ(merged.owners[0].allocated_seconds, 41);
  EXPECT_DOUBLE_EQ(merged.owners[0].busy_seconds, 0.6 * 35);
  // The slices of the destroyed pair are the merged instance's: nothing is unallocated.
  EXPECT_DOUBLE_EQ(st.gpus[0].unallocated_slice_seconds, 0);
}

// The acceptance scenario is the layout its comment describes, and its truth adds up.
TEST(MigScenario, TheMigH100IntegrationScenario) {
  auto s = load_scenario(std::string(GPUMETER_SOURCE_DIR) + "/tests/integration/scenarios/mig-h100.yaml");
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_TRUE(s->mig.enabled(0));
  EXPECT_FALSE(s->mig.enabled(1));
  EXPECT_EQ(named(*s, "train").placement, 4u);
  EXPECT_EQ(named(*s, "infer").gpu_instance_id, 6u);
  EXPECT_EQ(named(*s, "merged").start, 45 * S);
  EXPECT_EQ(named(*s, "merged").mig_index, 2u);
  for (bool scheduler : {false, true}) {
    const MigTruth t = compute_mig_truth(*s, 0, s->duration, scheduler);
    ASSERT_EQ(t.gpus.size(), 1u);
    double slices = t.gpus[0].unallocated_slice_seconds, energy = t.gpus[0].unallocated_energy_joules;
    for (const MigInstanceTruth& m : t.instances) {
      slices += m.slice_seconds;
      energy += m.energy_joules;
    }
    EXPECT_NEAR(slices, 90.0 * 7, 1e-9);
    EXPECT_NEAR(energy, compute_truth(*s, 0, s->duration).gpus[0].energy_joules, 1e-6);
  }
}

// GPM per instance: only the instance's jobs, its own activity (capped at 100 %, not weighted by
// slices), averaged over its life in the window.
TEST(MigTruth, GpmPerInstanceIsTheInstancesOwnActivity) {
  // small-b gets a second job: 150 % asked for 10-44 s, so its jobs share it.
  Scenario s = parse_ok(
      testing::mig_yaml("  - {name: extra, start: 0, end: 45, gpus: [0], mig: small-b, pid: 61099, utilization: 0.5,\n"
                        "     profile: {sm: 0.4, tensor: 0.2, occupancy: 0.2, fp32: 0.2}}\n"));
  const MigTruth t = compute_mig_truth(s, 0, 90 * S, false);
  ASSERT_EQ(t.instances.size(), 5u);
  for (const MigInstanceTruth& m : t.instances) {
    ASSERT_TRUE(m.gpm_supported) << m.name;
    // The graphics engine's activity is the instance's busy time, U_i, over its life.
    EXPECT_NEAR(m.profiling.graphics, 100 * m.busy_seconds / m.seconds, 1e-9) << m.name;
    EXPECT_DOUBLE_EQ(m.profiling.pcie_tx, 0) << m.name;
  }
  auto named_truth = [&](const std::string& name) -> const MigInstanceTruth& {
    for (const MigInstanceTruth& m : t.instances) {
      if (m.name == name) return m;
    }
    throw std::runtime_error(name);
  };
  // train: 90 % for 86 of 90 s; default profile (sm 1, occupancy and DRAM 0.5, no tensor).
  EXPECT_NEAR(named_truth("train").profiling.sm, 90.0 * 86 / 90, 1e-9);
  EXPECT_NEAR(named_truth("train").profiling.occupancy, 45.0 * 86 / 90, 1e-9);
  EXPECT_NEAR(named_truth("train").profiling.tensor, 0, 1e-12);
  // infer: 50 % for 75 s and 30 % for 40 s of 90 s, under 100 % together.
  EXPECT_NEAR(named_truth("infer").profiling.graphics, (0.5 * 75 + 0.3 * 40) / 90 * 100, 1e-9);
  // merged lives 45-90 s: its kernel runs 35 s at 60 %.
  EXPECT_NEAR(named_truth("merged").profiling.sm, 60.0 * 35 / 45, 1e-9);
  // small-b over 0-45 s: extra alone 0-10 and 44-45 s (b = 0.5); 10-44 s batch-e (100 %) and
  // extra (50 %) share it, b = 2/3 and 1/3.
  const MigInstanceTruth& b = named_truth("small-b");
  EXPECT_NEAR(b.profiling.graphics, (0.5 * 11 + 34) / 45 * 100, 1e-9);
  EXPECT_NEAR(b.profiling.sm, (0.5 * 0.4 * 11 + (2.0 / 3 + 0.4 / 3) * 34) / 45 * 100, 1e-9);
  EXPECT_NEAR(b.profiling.tensor, (0.5 * 0.2 * 11 + 0.2 / 3 * 34) / 45 * 100, 1e-9);
  // A window inside an instance's life averages over the window only.
  const MigTruth w = compute_mig_truth(s, 20 * S, 30 * S, false);
  for (const MigInstanceTruth& m : w.instances) {
    if (m.name == "small-b") {
      EXPECT_NEAR(m.profiling.graphics, 100, 1e-9);
    }
    if (m.name == "infer") {
      EXPECT_NEAR(m.profiling.graphics, 80, 1e-9);
    }
  }
}

// No GPM on A100: its instances carry no profiling averages.
TEST(MigTruth, NoGpmPerInstanceOnA100) {
  Scenario s = parse_ok(R"(
duration: 60
models:
  a100:
    name: NVIDIA A100-SXM4-80GB
    architecture: ga100
    memory: 81920MiB
    power: {limit: 400, idle: 50, max: 400}
    clocks:
      graphics: {idle: 210, max: 1410}
      sm: {idle: 210, max: 1410}
      memory: {idle: 1593, max: 1593}
      video: {idle: 795, max: 1290}
gpus: [{model: a100}]
mig:
  - gpu: 0
    layouts:
      - at: 0
        instances: [{name: a, profile: 3g.40gb}]
jobs:
  - {name: j, start: 0, end: 60, gpus: [0], mig: a, pid: 1, utilization: 0.5}
)");
  const MigTruth t = compute_mig_truth(s, 0, 60 * S, false);
  ASSERT_EQ(t.instances.size(), 1u);
  EXPECT_FALSE(t.instances[0].gpm_supported);
  EXPECT_DOUBLE_EQ(t.instances[0].profiling.graphics, 0);
}

}  // namespace
}  // namespace gpumeter::sim
