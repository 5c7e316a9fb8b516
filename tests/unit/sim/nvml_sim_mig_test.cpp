// MIG through the built libnvidia-ml.so.1, as an NVML program sees it: enumeration of MIG
// devices under the parent, their ids, attributes and per-instance answers, GPU instance
// profiles and GPU instances, handles of instances destroyed by a re-partition, and what the
// parent answers NOT_SUPPORTED in MIG mode.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "mig_scenario.h"
#include "nvml_sim_fixture.h"

namespace gpumeter::sim {
namespace {

struct MigApi {
  nvmlDeviceGetMigMode_fn mig_mode = api().get<nvmlDeviceGetMigMode_fn>("nvmlDeviceGetMigMode");
  nvmlDeviceGetMaxMigDeviceCount_fn max_count =
      api().get<nvmlDeviceGetMaxMigDeviceCount_fn>("nvmlDeviceGetMaxMigDeviceCount");
  nvmlDeviceGetMigDeviceHandleByIndex_fn by_index =
      api().get<nvmlDeviceGetMigDeviceHandleByIndex_fn>("nvmlDeviceGetMigDeviceHandleByIndex");
  nvmlDeviceGetUInt_fn is_mig = api().get<nvmlDeviceGetUInt_fn>("nvmlDeviceIsMigDeviceHandle");
  nvmlDeviceGetDeviceHandleFromMigDeviceHandle_fn parent =
      api().get<nvmlDeviceGetDeviceHandleFromMigDeviceHandle_fn>("nvmlDeviceGetDeviceHandleFromMigDeviceHandle");
  nvmlDeviceGetUInt_fn gi_id = api().get<nvmlDeviceGetUInt_fn>("nvmlDeviceGetGpuInstanceId");
  nvmlDeviceGetUInt_fn ci_id = api().get<nvmlDeviceGetUInt_fn>("nvmlDeviceGetComputeInstanceId");
  nvmlDeviceGetAttributes_fn attributes = api().get<nvmlDeviceGetAttributes_fn>("nvmlDeviceGetAttributes_v2");
  nvmlDeviceGetGpuInstanceProfileInfoV_fn profile_info =
      api().get<nvmlDeviceGetGpuInstanceProfileInfoV_fn>("nvmlDeviceGetGpuInstanceProfileInfoV");
  nvmlDeviceGetGpuInstanceById_fn gi_by_id = api().get<nvmlDeviceGetGpuInstanceById_fn>("nvmlDeviceGetGpuInstanceById");
  nvmlGpuInstanceGetInfo_fn gi_info = api().get<nvmlGpuInstanceGetInfo_fn>("nvmlGpuInstanceGetInfo");
  nvmlDeviceGetUInt_fn compute_mode = api().get<nvmlDeviceGetUInt_fn>("nvmlDeviceGetComputeMode");
};

MigApi& mig() {
  static MigApi* m = new MigApi();
  return *m;
}

class NvmlMig : public NvmlSim {
 protected:
  // The MIG devices of `parent` by index; null where an index answers NOT_FOUND.
  std::vector<nvmlDevice_t> enumerate(nvmlDevice_t parent) {
    unsigned count = 99;
    EXPECT_EQ(mig().max_count(parent, &count), NVML_SUCCESS);
    std::vector<nvmlDevice_t> out;
    for (unsigned i = 0; i < count; ++i) {
      nvmlDevice_t h = nullptr;
      const nvmlReturn_t r = mig().by_index(parent, i, &h);
      EXPECT_TRUE(r == NVML_SUCCESS || r == NVML_ERROR_NOT_FOUND) << i << ": " << r;
      out.push_back(r == NVML_SUCCESS ? h : nullptr);
    }
    return out;
  }

  std::string uuid_of(nvmlDevice_t h) {
    char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    EXPECT_EQ(api().uuid(h, buf, sizeof buf), NVML_SUCCESS);
    return buf;
  }

  std::string name_of(nvmlDevice_t h) {
    char buf[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
    EXPECT_EQ(api().name(h, buf, sizeof buf), NVML_SUCCESS);
    return buf;
  }

  using Xid = std::tuple<unsigned long long, unsigned, unsigned>;  // code, GPU and compute instance

  // The Xids an event set on GPU 0 reports by scenario time 36 s, for Xids inside train (GPU
  // instance 1), on the whole GPU, and inside small-b (7). Time runs 4 times real time from 30 s,
  // so the first comes due a second after the set is registered.
  std::vector<Xid> xids_seen(const std::string& quirks) {
    const std::string faults = R"(faults:
  - {kind: xid, gpu: 0, at: 34, code: 31, mig: train}
  - {kind: xid, gpu: 0, at: 34.4, code: 48}
  - {kind: xid, gpu: 0, at: 34.8, code: 43, mig: small-b}
)";
    std::vector<Xid> seen;
    EXPECT_EQ(start(testing::mig_yaml(faults + quirks), 30, 4), NVML_SUCCESS);
    nvmlEventSet_t set = nullptr;
    EXPECT_EQ(api().set_create(&set), NVML_SUCCESS);
    EXPECT_EQ(api().register_events(handle(0), nvmlEventTypeXidCriticalError, set), NVML_SUCCESS);
    nvmlEventData_t e{};
    // A wait returns what is due before it looks at its timeout, so a late wait still sees them all.
    const auto until_36 = [&] {
      const Micros left = 36 * kMicrosPerSecond - scenario_now();
      return static_cast<unsigned>(std::max<Micros>(0, left / 4 / 1000));
    };
    while (api().set_wait(set, &e, until_36()) == NVML_SUCCESS) {
      seen.emplace_back(e.eventData, e.gpuInstanceId, e.computeInstanceId);
    }
    EXPECT_EQ(api().set_free(set), NVML_SUCCESS);
    return seen;
  }
};

TEST_F(NvmlMig, ModeAndEnumeration) {
  ASSERT_EQ(start(testing::mig_yaml(), 30), NVML_SUCCESS);
  unsigned current = 9, pending = 9;
  ASSERT_EQ(mig().mig_mode(handle(0), &current, &pending), NVML_SUCCESS);
  EXPECT_EQ(current, NVML_DEVICE_MIG_ENABLE);
  EXPECT_EQ(pending, NVML_DEVICE_MIG_ENABLE);
  ASSERT_EQ(mig().mig_mode(handle(1), &current, &pending), NVML_SUCCESS);
  EXPECT_EQ(current, NVML_DEVICE_MIG_DISABLE);
  unsigned count = 9;
  ASSERT_EQ(mig().max_count(handle(1), &count), NVML_SUCCESS);
  EXPECT_EQ(count, 0u);  // "Returns zero if MIG is not supported or enabled"
  nvmlDevice_t h = nullptr;
  EXPECT_EQ(mig().by_index(handle(1), 0, &h), NVML_ERROR_NOT_SUPPORTED);

  const std::vector<nvmlDevice_t> devices = enumerate(handle(0));
  ASSERT_EQ(devices.size(), 7u);
  struct Want {
    const char* name;
    unsigned gi;
    unsigned slices;
  };
  const Want want[] = {{"NVIDIA H100 80GB HBM3 MIG 3g.40gb", 1, 3},
                       {"NVIDIA H100 80GB HBM3 MIG 2g.20gb", 6, 2},
                       {"NVIDIA H100 80GB HBM3 MIG 1g.10gb", 8, 1},
                       {"NVIDIA H100 80GB HBM3 MIG 1g.10gb", 7, 1}};
  std::set<std::string> uuids;
  for (unsigned i = 0; i < 4; ++i) {
    ASSERT_NE(devices[i], nullptr) << i;
    EXPECT_EQ(name_of(devices[i]), want[i].name);
    unsigned v = 99;
    ASSERT_EQ(mig().is_mig(devices[i], &v), NVML_SUCCESS);
    EXPECT_EQ(v, 1u);
    ASSERT_EQ(mig().gi_id(devices[i], &v), NVML_SUCCESS);
    EXPECT_EQ(v, want[i].gi);
    ASSERT_EQ(mig().ci_id(devices[i], &v), NVML_SUCCESS);
    EXPECT_EQ(v, 0u);
    ASSERT_EQ(api().index(devices[i], &v), NVML_SUCCESS);
    EXPECT_EQ(v, i);
    nvmlDevice_t parent = nullptr;
    ASSERT_EQ(mig().parent(devices[i], &parent), NVML_SUCCESS);
    EXPECT_EQ(parent, handle(0));
    const std::string u = uuid_of(devices[i]);
    EXPECT_EQ(u.rfind("MIG-", 0), 0u) << u;
    uuids.insert(u);
    nvmlDevice_t again = nullptr;
    ASSERT_EQ(api().by_uuid(u.c_str(), &again), NVML_SUCCESS);
    EXPECT_EQ(again, devices[i]);
  }
  EXPECT_EQ(uuids.size(), 4u);
  for (unsigned i = 4; i < 7; ++i) EXPECT_EQ(devices[i], nullptr) << i;
  EXPECT_EQ(mig().by_index(handle(0), 7, &h), NVML_ERROR_INVALID_ARGUMENT);
  unsigned v = 9;
  ASSERT_EQ(mig().is_mig(handle(0), &v), NVML_SUCCESS);
  EXPECT_EQ(v, 0u);
  EXPECT_EQ(mig().gi_id(handle(0), &v), NVML_ERROR_NOT_SUPPORTED);
  nvmlDevice_t parent = nullptr;
  EXPECT_EQ(mig().parent(handle(0), &parent), NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(NvmlMig, AttributesProfilesAndGpuInstances) {
  ASSERT_EQ(start(testing::mig_yaml(), 30), NVML_SUCCESS);
  const std::vector<nvmlDevice_t> devices = enumerate(handle(0));
  nvmlDeviceAttributes_t a{};
  ASSERT_EQ(mig().attributes(devices[0], &a), NVML_SUCCESS);
  EXPECT_EQ(a.multiprocessorCount, 60u);
  EXPECT_EQ(a.gpuInstanceSliceCount, 3u);
  EXPECT_EQ(a.computeInstanceSliceCount, 3u);
  EXPECT_EQ(a.sharedCopyEngineCount, 3u);
  EXPECT_EQ(a.memorySizeMB, 4u * 10240);
  EXPECT_EQ(mig().attributes(handle(0), &a), NVML_ERROR_NOT_SUPPORTED);  // MIG device handles only

  nvmlGpuInstanceProfileInfo_v2_t info{};
  info.version = nvmlGpuInstanceProfileInfo_v2;
  ASSERT_EQ(mig().profile_info(handle(0), NVML_GPU_INSTANCE_PROFILE_3_SLICE, &info), NVML_SUCCESS);
  EXPECT_STREQ(info.name, "MIG 3g.40gb");
  EXPECT_EQ(info.id, 9u);
  EXPECT_EQ(info.sliceCount, 3u);
  EXPECT_EQ(info.instanceCount, 2u);
  EXPECT_EQ(info.multiprocessorCount, 60u);
  EXPECT_EQ(info.memorySizeMB, 4u * 10240);
  ASSERT_EQ(mig().profile_info(handle(0), NVML_GPU_INSTANCE_PROFILE_1_SLICE, &info), NVML_SUCCESS);
  EXPECT_STREQ(info.name, "MIG 1g.10gb");
  EXPECT_EQ(info.id, 19u);
  EXPECT_EQ(info.instanceCount, 7u);
  EXPECT_EQ(mig().profile_info(handle(0), NVML_GPU_INSTANCE_PROFILE_6_SLICE, &info), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(mig().profile_info(handle(0), NVML_GPU_INSTANCE_PROFILE_COUNT, &info), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mig().profile_info(handle(1), NVML_GPU_INSTANCE_PROFILE_1_SLICE, &info), NVML_ERROR_NOT_SUPPORTED);
  info.version = 1;
  EXPECT_EQ(mig().profile_info(handle(0), NVML_GPU_INSTANCE_PROFILE_1_SLICE, &info), NVML_ERROR_INVALID_ARGUMENT);

  nvmlGpuInstance_t gi = nullptr;
  ASSERT_EQ(mig().gi_by_id(handle(0), 6, &gi), NVML_SUCCESS);
  nvmlGpuInstanceInfo_t gii{};
  ASSERT_EQ(mig().gi_info(gi, &gii), NVML_SUCCESS);
  EXPECT_EQ(gii.device, handle(0));
  EXPECT_EQ(gii.id, 6u);
  EXPECT_EQ(gii.profileId, 14u);
  EXPECT_EQ(gii.placement.start, 2u);
  EXPECT_EQ(gii.placement.size, 2u);
  EXPECT_EQ(mig().gi_by_id(handle(0), 5, &gi), NVML_ERROR_NOT_FOUND);  // "merged" exists from 45 s only
  EXPECT_EQ(mig().gi_by_id(handle(1), 1, &gi), NVML_ERROR_NOT_SUPPORTED);
}

TEST_F(NvmlMig, PerInstanceMemoryAndProcesses) {
  ASSERT_EQ(start(testing::mig_yaml(), 30), NVML_SUCCESS);
  const std::vector<nvmlDevice_t> devices = enumerate(handle(0));
  constexpr unsigned long long GiB = 1024ULL * 1024 * 1024;
  nvmlMemory_t m{};
  ASSERT_EQ(api().memory(devices[1], &m), NVML_SUCCESS);  // infer: serve-b and asr-c
  EXPECT_EQ(m.total, 20 * GiB);
  EXPECT_EQ(m.used, 14 * GiB);
  nvmlMemory_v2_t m2{};
  m2.version = nvmlMemory_v2;
  ASSERT_EQ(api().memory_v2(devices[0], &m2), NVML_SUCCESS);
  EXPECT_EQ(m2.total, 40 * GiB);
  EXPECT_EQ(m2.used, 30 * GiB);
  // The parent aggregates over its instances.
  ASSERT_EQ(api().memory_v2(handle(0), &m2), NVML_SUCCESS);
  EXPECT_EQ(m2.used, (30 + 8 + 6 + 4 + 5) * GiB);

  nvmlProcessInfo_t infos[8] = {};
  unsigned n = 8;
  ASSERT_EQ(api().compute_v3(devices[1], &n, infos), NVML_SUCCESS);
  ASSERT_EQ(n, 2u);
  EXPECT_EQ(infos[0].pid, 61002u);
  EXPECT_EQ(infos[1].pid, 61003u);
  EXPECT_EQ(infos[0].gpuInstanceId, 6u);
  EXPECT_EQ(infos[0].computeInstanceId, 0u);
  // A MIG device's lists take the size handshake of a GPU's, in every version of the call.
  n = 0;
  EXPECT_EQ(api().compute_v3(devices[1], &n, nullptr), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(n, 2u);
  n = 1;
  EXPECT_EQ(api().compute_v3(devices[1], &n, infos), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(n, 2u);
  n = 2;
  EXPECT_EQ(api().compute_v3(devices[1], &n, nullptr), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(api().compute_v3(devices[1], nullptr, infos), NVML_ERROR_INVALID_ARGUMENT);
  n = 0;
  EXPECT_EQ(api().compute_v1(devices[1], &n, nullptr), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(n, 2u);
  n = 8;
  ASSERT_EQ(api().compute_v3(handle(0), &n, infos), NVML_SUCCESS);
  ASSERT_EQ(n, 5u);
  std::set<std::pair<unsigned, unsigned>> seen;  // pid, GPU instance
  for (unsigned i = 0; i < n; ++i) seen.insert({infos[i].pid, infos[i].gpuInstanceId});
  EXPECT_EQ(seen,
            (std::set<std::pair<unsigned, unsigned>>{{61001, 1}, {61002, 6}, {61003, 6}, {61004, 8}, {61005, 7}}));
  n = 8;
  ASSERT_EQ(api().compute_v3(handle(1), &n, infos), NVML_SUCCESS);
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(infos[0].gpuInstanceId, 0xFFFFFFFFU);
  n = 8;
  nvmlProcessInfo_v1_t v1[8] = {};
  ASSERT_EQ(api().compute_v1(devices[2], &n, v1), NVML_SUCCESS);
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(v1[0].pid, 61004u);
  unsigned mode = 9;
  ASSERT_EQ(mig().compute_mode(devices[2], &mode), NVML_SUCCESS);
  EXPECT_EQ(mode, static_cast<unsigned>(NVML_COMPUTEMODE_DEFAULT));
  // What nvml.h does not promise on MIG handles answers NOT_SUPPORTED; the parent still answers.
  unsigned mw = 0;
  EXPECT_EQ(api().power(devices[0], &mw), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(api().power(handle(0), &mw), NVML_SUCCESS);
}

TEST_F(NvmlMig, XidsInsideAnInstanceCarryItsIds) {
  const auto seen = xids_seen("");
  EXPECT_EQ(seen, (std::vector<Xid>{{31, 1, 0}, {48, 0xFFFFFFFFU, 0xFFFFFFFFU}, {43, 7, 0}}));
}

// nvml.h, nvmlEventSetWait_v2: without privileges, "only the events which affect all the instances".
TEST_F(NvmlMig, WithoutTheCapabilityOnlyWholeGpuXidsArrive) {
  const auto seen = xids_seen("quirks:\n  - {kind: no_capability}\n");
  EXPECT_EQ(seen, (std::vector<Xid>{{48, 0xFFFFFFFFU, 0xFFFFFFFFU}}));
}

TEST_F(NvmlMig, ParentAnswersNotSupportedForUtilization) {
  ASSERT_EQ(start(testing::mig_yaml(), 30), NVML_SUCCESS);
  nvmlUtilization_t u{};
  EXPECT_EQ(api().utilization(handle(0), &u), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(api().utilization(handle(1), &u), NVML_SUCCESS);
  unsigned type = 0;
  unsigned count = 0;
  EXPECT_EQ(api().samples(handle(0), NVML_GPU_UTILIZATION_SAMPLES, 0, &type, &count, nullptr),
            NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(api().samples(handle(0), NVML_MEMORY_UTILIZATION_SAMPLES, 0, &type, &count, nullptr),
            NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(api().samples(handle(0), NVML_TOTAL_POWER_SAMPLES, 0, &type, &count, nullptr), NVML_SUCCESS);
  unsigned n = 0;
  EXPECT_EQ(api().process_util(handle(0), nullptr, &n, 0), NVML_ERROR_NOT_SUPPORTED);
  nvmlProcessesUtilizationInfo_t info{};
  info.version = nvmlProcessesUtilizationInfo_v1;
  EXPECT_EQ(api().processes_util_info(handle(0), &info), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(api().process_util(handle(1), nullptr, &n, 0), NVML_ERROR_INSUFFICIENT_SIZE);
  // The video engines belong to the instances (an assumption, docs/nvml-behaviour.md).
  auto encoder = api().get<nvmlDeviceGetEnumPair_fn>("nvmlDeviceGetEncoderUtilization");
  unsigned pct = 0, period = 0;
  EXPECT_EQ(encoder(handle(0), &pct, &period), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(encoder(handle(1), &pct, &period), NVML_SUCCESS);
}

TEST_F(NvmlMig, RepartitionInvalidatesHandlesOfDestroyedInstances) {
  // Scenario time runs 10x: 44.5 s now, 45.5 s a tenth of a second later.
  ASSERT_EQ(start(testing::mig_yaml(), 44.5, 10), NVML_SUCCESS);
  const std::vector<nvmlDevice_t> before = enumerate(handle(0));
  ASSERT_NE(before[2], nullptr);
  ASSERT_NE(before[3], nullptr);
  const std::string small_a = uuid_of(before[2]);
  nvmlGpuInstance_t gi = nullptr;
  ASSERT_EQ(mig().gi_by_id(handle(0), 8, &gi), NVML_SUCCESS);
  sleep_until_scenario(45.5);
  ASSERT_GE(scenario_now(), 45 * kMicrosPerSecond);
  // The destroyed instances' handles "remain invalid and must be requested again".
  char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
  EXPECT_EQ(api().uuid(before[2], buf, sizeof buf), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(api().uuid(before[3], buf, sizeof buf), NVML_ERROR_INVALID_ARGUMENT);
  unsigned v = 0;
  EXPECT_EQ(mig().gi_id(before[3], &v), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(api().power(before[3], &v), NVML_ERROR_INVALID_ARGUMENT);
  nvmlGpuInstanceInfo_t gii{};
  EXPECT_EQ(mig().gi_info(gi, &gii), NVML_ERROR_INVALID_ARGUMENT);
  nvmlDevice_t h = nullptr;
  EXPECT_EQ(api().by_uuid(small_a.c_str(), &h), NVML_ERROR_NOT_FOUND);
  // The kept instances' handles still work; the new 2g.20gb takes the lowest free index.
  EXPECT_EQ(uuid_of(before[0]).rfind("MIG-", 0), 0u);
  const std::vector<nvmlDevice_t> after = enumerate(handle(0));
  EXPECT_EQ(after[0], before[0]);
  EXPECT_EQ(after[1], before[1]);
  ASSERT_NE(after[2], nullptr);
  EXPECT_NE(after[2], before[2]);
  EXPECT_EQ(after[3], nullptr);  // a hole: NOT_FOUND
  EXPECT_EQ(name_of(after[2]), "NVIDIA H100 80GB HBM3 MIG 2g.20gb");
  ASSERT_EQ(mig().gi_id(after[2], &v), NVML_SUCCESS);
  EXPECT_EQ(v, 5u);
  EXPECT_NE(uuid_of(after[2]), small_a);
}

// The A30's table (MIG user guide, A30-24GB: 1/4, 2/4 and the whole of its memory and SMs, 4, 2
// and 1 instances) as nvmlDeviceGetGpuInstanceProfileInfoV answers it, one MIG device per
// compute slice, and its 1g x 4 layout.
TEST_F(NvmlMig, A30HasFourSlicesAndItsOwnProfiles) {
  ASSERT_EQ(start(testing::a30_mig_yaml(), 30), NVML_SUCCESS);
  struct Want {
    unsigned profile, id, slices, memory_mb, instances, sms;
    const char* name;
  };
  const Want want[] = {{NVML_GPU_INSTANCE_PROFILE_1_SLICE, 14, 1, 6144, 4, 14, "MIG 1g.6gb"},
                       {NVML_GPU_INSTANCE_PROFILE_2_SLICE, 5, 2, 12288, 2, 28, "MIG 2g.12gb"},
                       {NVML_GPU_INSTANCE_PROFILE_4_SLICE, 0, 4, 24576, 1, 56, "MIG 4g.24gb"}};
  for (const Want& w : want) {
    nvmlGpuInstanceProfileInfo_v2_t info{};
    info.version = nvmlGpuInstanceProfileInfo_v2;
    ASSERT_EQ(mig().profile_info(handle(0), w.profile, &info), NVML_SUCCESS) << w.name;
    EXPECT_STREQ(info.name, w.name);
    EXPECT_EQ(info.id, w.id) << w.name;
    EXPECT_EQ(info.sliceCount, w.slices) << w.name;
    EXPECT_EQ(info.memorySizeMB, w.memory_mb) << w.name;
    EXPECT_EQ(info.instanceCount, w.instances) << w.name;
    EXPECT_EQ(info.multiprocessorCount, w.sms) << w.name;
    EXPECT_EQ(info.copyEngineCount, w.slices) << w.name;
  }
  for (unsigned absent : {NVML_GPU_INSTANCE_PROFILE_3_SLICE, NVML_GPU_INSTANCE_PROFILE_7_SLICE}) {
    nvmlGpuInstanceProfileInfo_v2_t info{};
    info.version = nvmlGpuInstanceProfileInfo_v2;
    EXPECT_EQ(mig().profile_info(handle(0), absent, &info), NVML_ERROR_NOT_SUPPORTED) << absent;
  }

  // 1g x 4, highest free placement first: GPU instances 6, 5, 4, 3 at memory slices 3, 2, 1, 0.
  const std::vector<nvmlDevice_t> before = enumerate(handle(0));
  ASSERT_EQ(before.size(), 4u) << "one MIG device per compute slice";
  nvmlDevice_t h = nullptr;
  EXPECT_EQ(mig().by_index(handle(0), 4, &h), NVML_ERROR_INVALID_ARGUMENT);
  for (unsigned i = 0; i < 4; ++i) {
    ASSERT_NE(before[i], nullptr) << i;
    EXPECT_EQ(name_of(before[i]), "NVIDIA A30 MIG 1g.6gb");
    nvmlDeviceAttributes_t a{};
    ASSERT_EQ(mig().attributes(before[i], &a), NVML_SUCCESS);
    EXPECT_EQ(a.gpuInstanceSliceCount, 1u);
    EXPECT_EQ(a.multiprocessorCount, 14u);
    EXPECT_EQ(a.memorySizeMB, 6144u);
    unsigned gi = 0;
    ASSERT_EQ(mig().gi_id(before[i], &gi), NVML_SUCCESS);
    EXPECT_EQ(gi, 6 - i);
    nvmlGpuInstance_t handle_gi = nullptr;
    ASSERT_EQ(mig().gi_by_id(handle(0), gi, &handle_gi), NVML_SUCCESS);
    nvmlGpuInstanceInfo_t gii{};
    ASSERT_EQ(mig().gi_info(handle_gi, &gii), NVML_SUCCESS);
    EXPECT_EQ(gii.profileId, 14u);
    EXPECT_EQ(gii.placement.start, 3 - i);
    EXPECT_EQ(gii.placement.size, 1u);
  }
}

// From 45 s the A30 is 2g + 1g + 1g: the 2g in memory slices 0-1, GPU instance 1, MIG index 2
// (the lowest the destroyed 1g instances left free).
TEST_F(NvmlMig, A30RepartitionedHasATwoSliceInstance) {
  ASSERT_EQ(start(testing::a30_mig_yaml(), 60), NVML_SUCCESS);
  const std::vector<nvmlDevice_t> after = enumerate(handle(0));
  ASSERT_EQ(after.size(), 4u);
  ASSERT_NE(after[0], nullptr);
  ASSERT_NE(after[1], nullptr);
  EXPECT_EQ(name_of(after[0]), "NVIDIA A30 MIG 1g.6gb");
  ASSERT_NE(after[2], nullptr);
  EXPECT_EQ(after[3], nullptr);
  EXPECT_EQ(name_of(after[2]), "NVIDIA A30 MIG 2g.12gb");
  nvmlDeviceAttributes_t a{};
  ASSERT_EQ(mig().attributes(after[2], &a), NVML_SUCCESS);
  EXPECT_EQ(a.gpuInstanceSliceCount, 2u);
  EXPECT_EQ(a.multiprocessorCount, 28u);
  EXPECT_EQ(a.memorySizeMB, 12288u);
  unsigned gi = 0;
  ASSERT_EQ(mig().gi_id(after[2], &gi), NVML_SUCCESS);
  EXPECT_EQ(gi, 1u);
  nvmlGpuInstance_t handle_gi = nullptr;
  ASSERT_EQ(mig().gi_by_id(handle(0), 1, &handle_gi), NVML_SUCCESS);
  nvmlGpuInstanceInfo_t gii{};
  ASSERT_EQ(mig().gi_info(handle_gi, &gii), NVML_SUCCESS);
  EXPECT_EQ(gii.profileId, 5u);
  EXPECT_EQ(gii.placement.start, 0u);
  EXPECT_EQ(gii.placement.size, 2u);
}

}  // namespace
}  // namespace gpumeter::sim
