#pragma once
// How each argument type of an NVML call is written into a transcript line and read back by a
// replay. A line's "args" hold one JSON value per argument, in order:
//   inputs     a number, a string, or {"h": token} for a handle (device "d0", MIG device
//              "d0m1", event set "e1", GPM sample "s1", GPU instance "g1")
//   outputs    {"out": decoded} after the call (counts that go in and out also {"in": n}); a
//              struct or array also {"raw": hex of its bytes}, which a replay copies back
// Counts that size an array are the argument before it (or after it, for
// nvmlDeviceGetProcessUtilization). Timestamps in outputs are the driver's (unix µs); a
// replay moves them by the time between the recording and the replay.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "abi/nvml_api.h"
#include "transcript/calls.h"

namespace gpumeter::transcript {

using json = nlohmann::json;

// The clocks a transcript is stamped with: monotonic (calls' order and spacing) and wall (the
// driver's own timestamps are unix µs), in nanoseconds.
std::int64_t mono_ns();
std::int64_t wall_ns();

std::string to_hex(const void* data, std::size_t size);
// The bytes of `hex` into `out` (at most `size`); the number written.
std::size_t from_hex(const std::string& hex, void* out, std::size_t size);

// Opaque handles and their names in a transcript.
class Tokens {
 public:
  // The token of a handle; a new one of `kind` (d, e, s, g) when it has none yet.
  std::string name_of(const void* handle, char kind);
  void set(const void* handle, const std::string& token) {
    names_[handle] = token;
    handles_[token] = handle;
  }
  // The handle a token names; a replay makes a new distinct address for an unknown token.
  const void* handle_of(const std::string& token);
  // The device a GPM sample was last taken on, for nvmlGpmMetricsGet's key.
  std::map<std::string, std::string> sample_device;

 private:
  std::map<const void*, std::string> names_;
  std::map<std::string, const void*> handles_;
  std::vector<std::unique_ptr<char>> fakes_;
  unsigned next_ = 0;
};

// After nvmlGpmSampleGet or nvmlGpmMigSampleGet with these inputs: which device (or GPU instance,
// "<device>/gi<id>") the sample now holds, which keys the nvmlGpmMetricsGet that reads it.
void note_gpm_sample(Call call, const json& inputs, Tokens& tokens);

// Replaces serials, UUIDs and pids with made-up ones, the same one for the same value.
class Anonymizer {
 public:
  explicit Anonymizer(bool on) : on_(on) {}
  bool on() const { return on_; }
  std::string uuid(const std::string& real);
  std::string serial(const std::string& real);
  unsigned pid(unsigned real);

 private:
  bool on_;
  std::map<std::string, std::string> uuids_, serials_;
  std::map<unsigned, unsigned> pids_;
};

// What encoding and applying one argument can see of the others.
struct ArgContext {
  Call call;
  nvmlReturn_t rc = NVML_SUCCESS;
  std::vector<std::optional<std::uint64_t>> counts;  // per argument: the count it carries, if any
  std::vector<json> inputs;                          // per argument: its input as recorded (handles as tokens)
  std::size_t index = 0;
  Tokens* tokens = nullptr;
  Anonymizer* anonymizer = nullptr;
  std::int64_t shift_us = 0;  // replay: added to every driver timestamp
  // The count that sizes the array at `index`: the argument before it, else the one after.
  std::optional<std::uint64_t> array_count() const;
};

// Typed codecs, one per argument type (codec.cpp). Each has:
//   count(a, rc)          the count the argument carries (scalars, count pointers after the call)
//   input(a, ctx)         the input as a transcript value (null for a pure output)
//   encode(a, ctx)        the whole argument after the call
//   apply(a, value, ctx)  (replay) writes a recorded output into the caller's argument
template <typename T>
struct Codec;

#define GPUMETER_TRANSCRIPT_CODEC(T)                                 \
  template <>                                                        \
  struct Codec<T> {                                                  \
    static std::optional<std::uint64_t> count(T a, nvmlReturn_t rc); \
    static json input(T a, ArgContext& ctx);                         \
    static json encode(T a, ArgContext& ctx);                        \
    static void apply(T a, const json& value, ArgContext& ctx);      \
  };
GPUMETER_TRANSCRIPT_CODEC(unsigned int)
GPUMETER_TRANSCRIPT_CODEC(int)
GPUMETER_TRANSCRIPT_CODEC(unsigned long long)
GPUMETER_TRANSCRIPT_CODEC(const char*)
GPUMETER_TRANSCRIPT_CODEC(char*)
GPUMETER_TRANSCRIPT_CODEC(unsigned int*)
GPUMETER_TRANSCRIPT_CODEC(unsigned long long*)
GPUMETER_TRANSCRIPT_CODEC(nvmlDevice_t)
GPUMETER_TRANSCRIPT_CODEC(nvmlDevice_t*)
GPUMETER_TRANSCRIPT_CODEC(nvmlEventSet_t)
GPUMETER_TRANSCRIPT_CODEC(nvmlEventSet_t*)
GPUMETER_TRANSCRIPT_CODEC(nvmlGpmSample_t)
GPUMETER_TRANSCRIPT_CODEC(nvmlGpmSample_t*)
GPUMETER_TRANSCRIPT_CODEC(nvmlGpuInstance_t)
GPUMETER_TRANSCRIPT_CODEC(nvmlGpuInstance_t*)
GPUMETER_TRANSCRIPT_CODEC(nvmlPciInfo_t*)
GPUMETER_TRANSCRIPT_CODEC(nvmlUtilization_t*)
GPUMETER_TRANSCRIPT_CODEC(nvmlMemory_t*)
GPUMETER_TRANSCRIPT_CODEC(nvmlMemory_v2_t*)
GPUMETER_TRANSCRIPT_CODEC(nvmlFieldValue_t*)
GPUMETER_TRANSCRIPT_CODEC(void*)
GPUMETER_TRANSCRIPT_CODEC(nvmlProcessesUtilizationInfo_t*)
GPUMETER_TRANSCRIPT_CODEC(nvmlProcessUtilizationSample_t*)
GPUMETER_TRANSCRIPT_CODEC(nvmlSample_t*)
GPUMETER_TRANSCRIPT_CODEC(nvmlEventData_t*)
GPUMETER_TRANSCRIPT_CODEC(nvmlDeviceAttributes_t*)
GPUMETER_TRANSCRIPT_CODEC(nvmlGpuInstanceInfo_t*)
GPUMETER_TRANSCRIPT_CODEC(nvmlGpuInstanceProfileInfo_v2_t*)
GPUMETER_TRANSCRIPT_CODEC(nvmlGpmSupport_t*)
GPUMETER_TRANSCRIPT_CODEC(nvmlGridLicensableFeatures_t*)
GPUMETER_TRANSCRIPT_CODEC(nvmlGpmMetricsGet_t*)
#undef GPUMETER_TRANSCRIPT_CODEC

}  // namespace gpumeter::transcript
