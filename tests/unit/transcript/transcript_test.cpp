// A scripted NVML library recorded through the recorder's entry points, then served back by
// the replay: the same answers, handles as tokens, timestamps moved, anonymized values.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>

#include "transcript/codec.h"
#include "transcript/recorder.h"
#include "transcript/replay.h"

// The scripted library's handles (nvml_api.h leaves the type to the library).
struct nvmlDevice_st {
  unsigned index;
};

namespace gpumeter::transcript {
namespace {

nvmlDevice_st devices[2] = {{0}, {1}};

unsigned long long now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

nvmlReturn_t fake_init() { return NVML_SUCCESS; }
nvmlReturn_t fake_count(unsigned* n) {
  *n = 2;
  return NVML_SUCCESS;
}
nvmlReturn_t fake_handle(unsigned i, nvmlDevice_t* h) {
  if (i >= 2) return NVML_ERROR_INVALID_ARGUMENT;
  *h = &devices[i];
  return NVML_SUCCESS;
}
nvmlReturn_t fake_uuid(nvmlDevice_t d, char* buf, unsigned len) {
  std::snprintf(buf, len, "GPU-12345678-1234-1234-1234-12345678900%u", d->index);
  return NVML_SUCCESS;
}
nvmlReturn_t fake_temperature(nvmlDevice_t d, unsigned, unsigned* t) {
  *t = 40 + d->index;
  return NVML_SUCCESS;
}
nvmlReturn_t fake_samples(nvmlDevice_t d, unsigned, unsigned long long last_seen, unsigned* type, unsigned* count,
                          nvmlSample_t* out) {
  *type = NVML_VALUE_TYPE_UNSIGNED_INT;
  const unsigned long long t = now_us();
  unsigned n = 0;
  for (unsigned k = 0; k < 3 && n < *count; ++k) {
    if (t - k * 1000 <= last_seen) continue;
    out[n].timeStamp = t - k * 1000;
    out[n].sampleValue.uiVal = 10 * (d->index + 1) + k;
    ++n;
  }
  *count = n;
  return n == 0 ? NVML_ERROR_NOT_FOUND : NVML_SUCCESS;
}
nvmlReturn_t fake_processes(nvmlDevice_t, unsigned* count, void* infos) {
  if (*count < 1 || infos == nullptr) {
    *count = 1;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  nvmlProcessInfo_t p{};
  p.pid = 31337;
  p.usedGpuMemory = 1 << 30;
  std::memcpy(infos, &p, sizeof p);
  *count = 1;
  return NVML_SUCCESS;
}

class Scripted final : public SymbolSource {
 public:
  void* symbol(const char* name) const override {
    static const std::map<std::string, void*> table = {
        {"nvmlInit_v2", reinterpret_cast<void*>(&fake_init)},
        {"nvmlDeviceGetCount_v2", reinterpret_cast<void*>(&fake_count)},
        {"nvmlDeviceGetHandleByIndex_v2", reinterpret_cast<void*>(&fake_handle)},
        {"nvmlDeviceGetUUID", reinterpret_cast<void*>(&fake_uuid)},
        {"nvmlDeviceGetTemperature", reinterpret_cast<void*>(&fake_temperature)},
        {"nvmlDeviceGetSamples", reinterpret_cast<void*>(&fake_samples)},
        {"nvmlDeviceGetComputeRunningProcesses_v3", reinterpret_cast<void*>(&fake_processes)}};
    auto it = table.find(name);
    return it == table.end() ? nullptr : it->second;
  }
  const std::string& path() const override { return path_; }

 private:
  std::string path_ = "/opt/scripted/libnvidia-ml.so.1";
};

template <typename Fn>
Fn fn(const SymbolSource& s, const char* name) {
  return reinterpret_cast<Fn>(s.symbol(name));
}

// What a caller sees through a library: every value the scripted one answers.
struct Seen {
  unsigned count = 0;
  std::string uuid[2];
  unsigned temperature[2] = {};
  unsigned samples = 0;
  unsigned long long newest = 0;
  unsigned value_sum = 0;  // the replay serves a buffer oldest first, whatever the order recorded
  unsigned pid = 0;
  unsigned long long memory = 0;
};

Seen walk(const SymbolSource& lib) {
  Seen s;
  EXPECT_EQ(fn<nvmlInit_fn>(lib, "nvmlInit_v2")(), NVML_SUCCESS);
  EXPECT_EQ(fn<nvmlDeviceGetCount_fn>(lib, "nvmlDeviceGetCount_v2")(&s.count), NVML_SUCCESS);
  for (unsigned i = 0; i < 2; ++i) {
    nvmlDevice_t h = nullptr;
    EXPECT_EQ(fn<nvmlDeviceGetHandleByIndex_fn>(lib, "nvmlDeviceGetHandleByIndex_v2")(i, &h), NVML_SUCCESS);
    char buf[96] = {};
    EXPECT_EQ(fn<nvmlDeviceGetString_fn>(lib, "nvmlDeviceGetUUID")(h, buf, sizeof buf), NVML_SUCCESS);
    s.uuid[i] = buf;
    EXPECT_EQ(fn<nvmlDeviceGetTemperature_fn>(lib, "nvmlDeviceGetTemperature")(h, 0, &s.temperature[i]), NVML_SUCCESS);
    if (i == 1) {
      unsigned type = 0, n = 8;
      nvmlSample_t samples[8] = {};
      EXPECT_EQ(fn<nvmlDeviceGetSamples_fn>(lib, "nvmlDeviceGetSamples")(h, 1, 0, &type, &n, samples), NVML_SUCCESS);
      s.samples = n;
      for (unsigned k = 0; k < n; ++k) s.newest = std::max(s.newest, samples[k].timeStamp);
      for (unsigned k = 0; k < n; ++k) s.value_sum += samples[k].sampleValue.uiVal;
      auto list = fn<nvmlDeviceGetProcessesRaw_fn>(lib, "nvmlDeviceGetComputeRunningProcesses_v3");
      unsigned count = 0;
      EXPECT_EQ(list(h, &count, nullptr), NVML_ERROR_INSUFFICIENT_SIZE);
      std::vector<unsigned char> buf32(count * 32, 0xEE);
      EXPECT_EQ(list(h, &count, buf32.data()), NVML_SUCCESS);
      std::memcpy(&s.pid, buf32.data(), sizeof s.pid);
      std::memcpy(&s.memory, buf32.data() + 8, sizeof s.memory);
    }
  }
  return s;
}

TEST(Transcript, RecordedCallsReplayWithTheSameAnswers) {
  const std::string path = testing::TempDir() + "transcript_test.jsonl";
  RecordOptions o;
  o.path = path;
  o.anonymize = true;
  auto rec = recording_source(std::make_unique<Scripted>(), o);
  ASSERT_TRUE(rec) << rec.error().message;
  const Seen recorded = walk(**rec);
  stop_recording("test");
  EXPECT_EQ(recorded.pid, 31337u);

  std::ifstream in(path);
  std::string header;
  std::getline(in, header);
  EXPECT_NE(header.find("\"library\":\"libnvidia-ml.so.1\""), std::string::npos) << header;  // no host path
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(all.find("31337"), std::string::npos);         // the pid is replaced
  EXPECT_EQ(all.find("GPU-12345678"), std::string::npos);  // so are the UUIDs
  EXPECT_NE(all.find("\"end\":\"test\""), std::string::npos);

  const auto before_replay = now_us();
  auto replay = replay_source(path);
  ASSERT_TRUE(replay) << replay.error().message;
  const Seen replayed = walk(**replay);
  EXPECT_EQ(replayed.count, 2u);
  EXPECT_EQ(replayed.temperature[0], 40u);
  EXPECT_EQ(replayed.temperature[1], 41u);
  EXPECT_EQ(replayed.uuid[0], "GPU-00000000-0000-4000-8000-000000000001");
  EXPECT_EQ(replayed.uuid[1], "GPU-00000000-0000-4000-8000-000000000002");
  EXPECT_EQ(replayed.samples, recorded.samples);
  EXPECT_EQ(replayed.value_sum, recorded.value_sum);
  EXPECT_EQ(recorded.value_sum, 20u + 21u + 22u);
  EXPECT_GE(replayed.newest + 5000, before_replay);  // moved to the replay's time
  EXPECT_EQ(replayed.pid, 100001u);
  EXPECT_EQ(replayed.memory, 1ULL << 30);
  // What the recording never saw is absent, as a symbol the driver lacks.
  EXPECT_EQ((*replay)->symbol("nvmlDeviceGetFanSpeed"), nullptr);
  std::remove(path.c_str());
}

TEST(Codec, HexRoundTrip) {
  const unsigned char bytes[] = {0x00, 0x7f, 0x80, 0xff, 0x12};
  const std::string hex = to_hex(bytes, sizeof bytes);
  EXPECT_EQ(hex, "007f80ff12");
  unsigned char back[5] = {};
  EXPECT_EQ(from_hex(hex, back, sizeof back), 5u);
  EXPECT_EQ(std::memcmp(bytes, back, sizeof bytes), 0);
  EXPECT_EQ(from_hex(hex, back, 2), 2u);
}

TEST(Codec, AnonymizerIsConsistent) {
  Anonymizer a(true);
  EXPECT_EQ(a.pid(500), a.pid(500));
  EXPECT_NE(a.pid(500), a.pid(501));
  EXPECT_EQ(a.pid(0), 0u);
  EXPECT_EQ(a.uuid("GPU-x"), a.uuid("GPU-x"));
  EXPECT_NE(a.uuid("GPU-x"), a.uuid("GPU-y"));
  EXPECT_EQ(a.serial("1652921045123").size(), 13u);
  Anonymizer off(false);
  EXPECT_EQ(off.pid(500), 500u);
  EXPECT_EQ(off.uuid("GPU-x"), "GPU-x");
}

TEST(Replay, ScenarioNamesARecording) {
  const std::string dir = testing::TempDir();
  {
    std::ofstream f(dir + "replay-scenario.yaml");
    f << "description: x\nreplay: node.jsonl\n";
  }
  auto p = replay_of_scenario(dir + "replay-scenario.yaml");
  ASSERT_TRUE(p);
  EXPECT_EQ(*p, dir + "node.jsonl");
  {
    std::ofstream f(dir + "plain-scenario.yaml");
    f << "description: x\ngpus: {count: 1, model: m}\n";
  }
  auto plain = replay_of_scenario(dir + "plain-scenario.yaml");
  ASSERT_TRUE(plain);
  EXPECT_EQ(*plain, "");
  std::remove((dir + "replay-scenario.yaml").c_str());
  std::remove((dir + "plain-scenario.yaml").c_str());
}

}  // namespace
}  // namespace gpumeter::transcript
