#include "transcript/codec.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

namespace gpumeter::transcript {

namespace {

bool has_output(nvmlReturn_t rc) { return rc == NVML_SUCCESS || rc == NVML_ERROR_INSUFFICIENT_SIZE; }

json raw_output(json decoded, const void* data, std::size_t size) {
  return json{{"out", std::move(decoded)}, {"raw", to_hex(data, size)}};
}

// Copies the recorded bytes of a single struct back.
template <typename T>
bool apply_raw(T* a, const json& v) {
  if (a == nullptr || !v.is_object() || !v.contains("raw")) return false;
  from_hex(v["raw"].get<std::string>(), a, sizeof(T));
  return true;
}

std::string cstr(const char* s, std::size_t max) { return std::string(s, strnlen(s, max)); }

// The count of an array argument, bounded by what a transcript may hold.
std::size_t bounded(std::optional<std::uint64_t> n) {
  return static_cast<std::size_t>(std::min<std::uint64_t>(n.value_or(0), 4096));
}

json value_json(const nvmlValue_t& v, unsigned type) {
  switch (type) {
    case NVML_VALUE_TYPE_DOUBLE:
      return v.dVal;
    case NVML_VALUE_TYPE_UNSIGNED_INT:
      return v.uiVal;
    case NVML_VALUE_TYPE_UNSIGNED_LONG:
      return v.ulVal;
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
      return v.ullVal;
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG:
      return v.sllVal;
    case NVML_VALUE_TYPE_SIGNED_INT:
      return v.siVal;
    case NVML_VALUE_TYPE_UNSIGNED_SHORT:
      return v.usVal;
    default:
      return nullptr;
  }
}

std::uint64_t shifted(std::uint64_t t, std::int64_t by) {
  return t == 0 ? 0 : static_cast<std::uint64_t>(static_cast<std::int64_t>(t) + by);
}

}  // namespace

std::int64_t mono_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string to_hex(const void* data, std::size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(size * 2, '0');
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < size; ++i) {
    out[2 * i] = kDigits[p[i] >> 4];
    out[2 * i + 1] = kDigits[p[i] & 15];
  }
  return out;
}

std::size_t from_hex(const std::string& hex, void* out, std::size_t size) {
  auto nibble = [](char c) { return c >= 'a' ? c - 'a' + 10 : c >= 'A' ? c - 'A' + 10 : c - '0'; };
  const std::size_t n = std::min(size, hex.size() / 2);
  auto* p = static_cast<unsigned char*>(out);
  for (std::size_t i = 0; i < n; ++i)
    p[i] = static_cast<unsigned char>(nibble(hex[2 * i]) << 4 | nibble(hex[2 * i + 1]));
  return n;
}

std::string Tokens::name_of(const void* handle, char kind) {
  if (handle == nullptr) return "";
  auto it = names_.find(handle);
  if (it != names_.end()) return it->second;
  std::string token = fmt::format("{}{}", kind, ++next_);
  set(handle, token);
  return token;
}

const void* Tokens::handle_of(const std::string& token) {
  if (token.empty()) return nullptr;
  auto it = handles_.find(token);
  if (it != handles_.end()) return it->second;
  fakes_.push_back(std::make_unique<char>());
  set(fakes_.back().get(), token);
  return fakes_.back().get();
}

void note_gpm_sample(Call call, const json& inputs, Tokens& tokens) {
  if (call == Call::nvmlGpmSampleGet) {
    tokens.sample_device[inputs[1]["h"].get<std::string>()] = inputs[0]["h"].get<std::string>();
  } else if (call == Call::nvmlGpmMigSampleGet) {
    tokens.sample_device[inputs[2]["h"].get<std::string>()] =
        fmt::format("{}/gi{}", inputs[0]["h"].get<std::string>(), inputs[1].get<unsigned>());
  }
}

std::string Anonymizer::uuid(const std::string& real) {
  if (!on_ || real.empty()) return real;
  auto [it, added] = uuids_.try_emplace(real);
  if (added) it->second = fmt::format("GPU-00000000-0000-4000-8000-{:012x}", uuids_.size());
  return it->second;
}

std::string Anonymizer::serial(const std::string& real) {
  if (!on_ || real.empty()) return real;
  auto [it, added] = serials_.try_emplace(real);
  if (added) it->second = fmt::format("{:013d}", serials_.size());
  return it->second;
}

unsigned Anonymizer::pid(unsigned real) {
  if (!on_ || real == 0) return real;
  auto [it, added] = pids_.try_emplace(real);
  if (added) it->second = 100000 + static_cast<unsigned>(pids_.size());
  return it->second;
}

std::optional<std::uint64_t> ArgContext::array_count() const {
  if (index > 0 && counts[index - 1]) return counts[index - 1];
  if (index + 1 < counts.size()) return counts[index + 1];
  return std::nullopt;
}

// ---- scalars -------------------------------------------------------------------------------

#define GPUMETER_SCALAR_CODEC(T)                                                                            \
  std::optional<std::uint64_t> Codec<T>::count(T a, nvmlReturn_t) { return static_cast<std::uint64_t>(a); } \
  json Codec<T>::input(T a, ArgContext&) { return a; }                                                      \
  json Codec<T>::encode(T a, ArgContext&) { return a; }                                                     \
  void Codec<T>::apply(T, const json&, ArgContext&) {}
GPUMETER_SCALAR_CODEC(unsigned int)
GPUMETER_SCALAR_CODEC(int)
#undef GPUMETER_SCALAR_CODEC

// Timestamps (lastSeen) and event masks: recorded, never part of a replay's key.
std::optional<std::uint64_t> Codec<unsigned long long>::count(unsigned long long, nvmlReturn_t) { return std::nullopt; }
json Codec<unsigned long long>::input(unsigned long long, ArgContext&) { return nullptr; }
json Codec<unsigned long long>::encode(unsigned long long a, ArgContext&) { return a; }
void Codec<unsigned long long>::apply(unsigned long long, const json&, ArgContext&) {}

std::optional<std::uint64_t> Codec<const char*>::count(const char*, nvmlReturn_t) { return std::nullopt; }
json Codec<const char*>::input(const char* a, ArgContext& ctx) {
  if (a == nullptr) return nullptr;
  std::string s = cstr(a, 256);
  // The only string NVML takes in is a UUID (nvmlDeviceGetHandleByUUID).
  return ctx.anonymizer != nullptr ? ctx.anonymizer->uuid(s) : s;
}
json Codec<const char*>::encode(const char* a, ArgContext& ctx) { return input(a, ctx); }
void Codec<const char*>::apply(const char*, const json&, ArgContext&) {}

std::optional<std::uint64_t> Codec<char*>::count(char*, nvmlReturn_t) { return std::nullopt; }
json Codec<char*>::input(char* a, ArgContext&) { return a != nullptr; }
json Codec<char*>::encode(char* a, ArgContext& ctx) {
  if (a == nullptr) return nullptr;
  if (ctx.rc != NVML_SUCCESS) return json{{"out", nullptr}};
  std::string s = cstr(a, 256);
  if (ctx.anonymizer != nullptr && ctx.call == Call::nvmlDeviceGetUUID) s = ctx.anonymizer->uuid(s);
  if (ctx.anonymizer != nullptr && ctx.call == Call::nvmlDeviceGetSerial) s = ctx.anonymizer->serial(s);
  return json{{"out", s}};
}
void Codec<char*>::apply(char* a, const json& v, ArgContext& ctx) {
  if (a == nullptr || !v.is_object() || !v["out"].is_string()) return;
  const std::string s = v["out"].get<std::string>();
  // The length is the next argument; NVML answers INSUFFICIENT_SIZE rather than truncate.
  const std::size_t room = bounded(ctx.index + 1 < ctx.counts.size() ? ctx.counts[ctx.index + 1] : std::nullopt);
  if (room == 0) return;
  const std::size_t n = std::min(s.size(), room - 1);
  std::memcpy(a, s.data(), n);
  a[n] = '\0';
}

template <typename T>
json scalar_out(T* a, ArgContext& ctx, T before) {
  if (a == nullptr) return nullptr;
  json v{{"in", before}};
  v["out"] = has_output(ctx.rc) ? json(*a) : json(nullptr);
  return v;
}

std::optional<std::uint64_t> Codec<unsigned int*>::count(unsigned int* a, nvmlReturn_t rc) {
  if (a == nullptr || !has_output(rc)) return std::nullopt;
  return *a;
}
json Codec<unsigned int*>::input(unsigned int* a, ArgContext&) { return a != nullptr; }
json Codec<unsigned int*>::encode(unsigned int* a, ArgContext& ctx) {
  if (a == nullptr) return nullptr;
  json v = json::object();
  v["out"] = has_output(ctx.rc) ? json(*a) : json(nullptr);
  return v;
}
void Codec<unsigned int*>::apply(unsigned int* a, const json& v, ArgContext&) {
  if (a != nullptr && v.is_object() && v["out"].is_number()) *a = v["out"].get<unsigned>();
}

std::optional<std::uint64_t> Codec<unsigned long long*>::count(unsigned long long*, nvmlReturn_t) {
  return std::nullopt;
}
json Codec<unsigned long long*>::input(unsigned long long* a, ArgContext&) { return a != nullptr; }
json Codec<unsigned long long*>::encode(unsigned long long* a, ArgContext& ctx) {
  if (a == nullptr) return nullptr;
  return json{{"out", ctx.rc == NVML_SUCCESS ? json(*a) : json(nullptr)}};
}
void Codec<unsigned long long*>::apply(unsigned long long* a, const json& v, ArgContext&) {
  if (a != nullptr && v.is_object() && v["out"].is_number()) *a = v["out"].get<unsigned long long>();
}

// ---- handles -------------------------------------------------------------------------------

#define GPUMETER_HANDLE_CODEC(T, KIND)                                                                 \
  std::optional<std::uint64_t> Codec<T>::count(T, nvmlReturn_t) { return std::nullopt; }               \
  json Codec<T>::input(T a, ArgContext& ctx) { return json{{"h", ctx.tokens->name_of(a, KIND)}}; }     \
  json Codec<T>::encode(T a, ArgContext& ctx) { return input(a, ctx); }                                \
  void Codec<T>::apply(T, const json&, ArgContext&) {}                                                 \
  std::optional<std::uint64_t> Codec<T*>::count(T*, nvmlReturn_t) { return std::nullopt; }             \
  json Codec<T*>::input(T* a, ArgContext&) { return a != nullptr; }                                    \
  void Codec<T*>::apply(T* a, const json& v, ArgContext& ctx) {                                        \
    if (a != nullptr && v.is_object() && v["out"].is_object())                                         \
      *a = static_cast<T>(const_cast<void*>(ctx.tokens->handle_of(v["out"]["h"].get<std::string>()))); \
  }
GPUMETER_HANDLE_CODEC(nvmlDevice_t, 'd')
GPUMETER_HANDLE_CODEC(nvmlEventSet_t, 'e')
GPUMETER_HANDLE_CODEC(nvmlGpmSample_t, 's')
GPUMETER_HANDLE_CODEC(nvmlGpuInstance_t, 'g')
#undef GPUMETER_HANDLE_CODEC

// A device handle is named after how it was found: "d<index>", "<parent>m<index>" for a MIG
// device, the first name it had otherwise (by UUID).
json Codec<nvmlDevice_t*>::encode(nvmlDevice_t* a, ArgContext& ctx) {
  if (a == nullptr) return nullptr;
  if (ctx.rc != NVML_SUCCESS) return json{{"out", nullptr}};
  if (ctx.call == Call::nvmlDeviceGetHandleByIndex_v2 || ctx.call == Call::nvmlDeviceGetHandleByIndex) {
    ctx.tokens->set(*a, fmt::format("d{}", ctx.counts[0].value_or(0)));
  } else if (ctx.call == Call::nvmlDeviceGetMigDeviceHandleByIndex) {
    ctx.tokens->set(*a, fmt::format("{}m{}", ctx.inputs[0]["h"].get<std::string>(), ctx.counts[1].value_or(0)));
  }
  return json{{"out", {{"h", ctx.tokens->name_of(*a, 'd')}}}};
}

#define GPUMETER_NEW_HANDLE_CODEC(T, KIND)                        \
  json Codec<T*>::encode(T* a, ArgContext& ctx) {                 \
    if (a == nullptr) return nullptr;                             \
    if (ctx.rc != NVML_SUCCESS) return json{{"out", nullptr}};    \
    return json{{"out", {{"h", ctx.tokens->name_of(*a, KIND)}}}}; \
  }
GPUMETER_NEW_HANDLE_CODEC(nvmlEventSet_t, 'e')
GPUMETER_NEW_HANDLE_CODEC(nvmlGpmSample_t, 's')
GPUMETER_NEW_HANDLE_CODEC(nvmlGpuInstance_t, 'g')
#undef GPUMETER_NEW_HANDLE_CODEC

// ---- single structs ------------------------------------------------------------------------

#define GPUMETER_STRUCT_CODEC(T)                                                           \
  std::optional<std::uint64_t> Codec<T*>::count(T*, nvmlReturn_t) { return std::nullopt; } \
  json Codec<T*>::input(T* a, ArgContext&) { return a != nullptr; }                        \
  json Codec<T*>::encode(T* a, ArgContext& ctx) {                                          \
    if (a == nullptr) return nullptr;                                                      \
    if (ctx.rc != NVML_SUCCESS) return json{{"out", nullptr}};                             \
    return raw_output(decode(*a), a, sizeof(T));                                           \
  }                                                                                        \
  void Codec<T*>::apply(T* a, const json& v, ArgContext&) { apply_raw(a, v); }

namespace {
json decode(const nvmlPciInfo_t& p) {
  return {
      {"busId", cstr(p.busId, sizeof p.busId)}, {"pciDeviceId", p.pciDeviceId}, {"pciSubSystemId", p.pciSubSystemId}};
}
json decode(const nvmlUtilization_t& u) { return {{"gpu", u.gpu}, {"memory", u.memory}}; }
json decode(const nvmlMemory_t& m) { return {{"total", m.total}, {"free", m.free}, {"used", m.used}}; }
json decode(const nvmlMemory_v2_t& m) {
  return {{"total", m.total}, {"reserved", m.reserved}, {"free", m.free}, {"used", m.used}};
}
json decode(const nvmlDeviceAttributes_t& a) {
  return {{"multiprocessorCount", a.multiprocessorCount},
          {"gpuInstanceSliceCount", a.gpuInstanceSliceCount},
          {"computeInstanceSliceCount", a.computeInstanceSliceCount},
          {"memorySizeMB", a.memorySizeMB}};
}
json decode(const nvmlGpuInstanceProfileInfo_v2_t& p) {
  return {{"id", p.id},
          {"sliceCount", p.sliceCount},
          {"memorySizeMB", p.memorySizeMB},
          {"name", cstr(p.name, sizeof p.name)}};
}
json decode(const nvmlGpmSupport_t& s) { return {{"isSupportedDevice", s.isSupportedDevice}}; }
json decode(const nvmlGridLicensableFeatures_t& f) {
  json features = json::array();
  for (unsigned i = 0; i < f.licensableFeaturesCount && i < NVML_GRID_LICENSE_FEATURE_MAX_COUNT; ++i) {
    const nvmlGridLicensableFeature_t& x = f.gridLicensableFeatures[i];
    features.push_back({{"featureCode", x.featureCode},
                        {"featureState", x.featureState},
                        {"productName", cstr(x.productName, sizeof x.productName)}});
  }
  return {{"isGridLicenseSupported", f.isGridLicenseSupported}, {"gridLicensableFeatures", features}};
}
}  // namespace

GPUMETER_STRUCT_CODEC(nvmlPciInfo_t)
GPUMETER_STRUCT_CODEC(nvmlUtilization_t)
GPUMETER_STRUCT_CODEC(nvmlMemory_t)
GPUMETER_STRUCT_CODEC(nvmlMemory_v2_t)
GPUMETER_STRUCT_CODEC(nvmlDeviceAttributes_t)
GPUMETER_STRUCT_CODEC(nvmlGpuInstanceProfileInfo_v2_t)
GPUMETER_STRUCT_CODEC(nvmlGpmSupport_t)
GPUMETER_STRUCT_CODEC(nvmlGridLicensableFeatures_t)
#undef GPUMETER_STRUCT_CODEC

// Structs holding handles: the handles as tokens, the rest as fields.
std::optional<std::uint64_t> Codec<nvmlEventData_t*>::count(nvmlEventData_t*, nvmlReturn_t) { return std::nullopt; }
json Codec<nvmlEventData_t*>::input(nvmlEventData_t* a, ArgContext&) { return a != nullptr; }
json Codec<nvmlEventData_t*>::encode(nvmlEventData_t* a, ArgContext& ctx) {
  if (a == nullptr) return nullptr;
  if (ctx.rc != NVML_SUCCESS) return json{{"out", nullptr}};
  return json{{"out",
               {{"device", ctx.tokens->name_of(a->device, 'd')},
                {"eventType", a->eventType},
                {"eventData", a->eventData},
                {"gpuInstanceId", a->gpuInstanceId},
                {"computeInstanceId", a->computeInstanceId}}}};
}
void Codec<nvmlEventData_t*>::apply(nvmlEventData_t* a, const json& v, ArgContext& ctx) {
  if (a == nullptr || !v.is_object() || !v["out"].is_object()) return;
  const json& o = v["out"];
  a->device = static_cast<nvmlDevice_t>(const_cast<void*>(ctx.tokens->handle_of(o["device"].get<std::string>())));
  a->eventType = o["eventType"].get<unsigned long long>();
  a->eventData = o["eventData"].get<unsigned long long>();
  a->gpuInstanceId = o["gpuInstanceId"].get<unsigned>();
  a->computeInstanceId = o["computeInstanceId"].get<unsigned>();
}

std::optional<std::uint64_t> Codec<nvmlGpuInstanceInfo_t*>::count(nvmlGpuInstanceInfo_t*, nvmlReturn_t) {
  return std::nullopt;
}
json Codec<nvmlGpuInstanceInfo_t*>::input(nvmlGpuInstanceInfo_t* a, ArgContext&) { return a != nullptr; }
json Codec<nvmlGpuInstanceInfo_t*>::encode(nvmlGpuInstanceInfo_t* a, ArgContext& ctx) {
  if (a == nullptr) return nullptr;
  if (ctx.rc != NVML_SUCCESS) return json{{"out", nullptr}};
  return json{{"out",
               {{"device", ctx.tokens->name_of(a->device, 'd')},
                {"id", a->id},
                {"profileId", a->profileId},
                {"start", a->placement.start},
                {"size", a->placement.size}}}};
}
void Codec<nvmlGpuInstanceInfo_t*>::apply(nvmlGpuInstanceInfo_t* a, const json& v, ArgContext& ctx) {
  if (a == nullptr || !v.is_object() || !v["out"].is_object()) return;
  const json& o = v["out"];
  a->device = static_cast<nvmlDevice_t>(const_cast<void*>(ctx.tokens->handle_of(o["device"].get<std::string>())));
  a->id = o["id"].get<unsigned>();
  a->profileId = o["profileId"].get<unsigned>();
  a->placement.start = o["start"].get<unsigned>();
  a->placement.size = o["size"].get<unsigned>();
}

// ---- arrays --------------------------------------------------------------------------------

// Field values: the ids asked for are inputs (part of a replay's key).
std::optional<std::uint64_t> Codec<nvmlFieldValue_t*>::count(nvmlFieldValue_t*, nvmlReturn_t) { return std::nullopt; }
json Codec<nvmlFieldValue_t*>::input(nvmlFieldValue_t* a, ArgContext& ctx) {
  json ids = json::array();
  if (a == nullptr) return ids;
  for (std::size_t i = 0; i < bounded(ctx.array_count()); ++i)
    ids.push_back(fmt::format("{}/{}", a[i].fieldId, a[i].scopeId));
  return ids;
}
json Codec<nvmlFieldValue_t*>::encode(nvmlFieldValue_t* a, ArgContext& ctx) {
  const std::size_t n = bounded(ctx.array_count());
  if (a == nullptr) return nullptr;
  if (ctx.rc != NVML_SUCCESS) return json{{"in", input(a, ctx)}, {"out", nullptr}};
  json out = json::array();
  for (std::size_t i = 0; i < n; ++i) {
    out.push_back({{"fieldId", a[i].fieldId},
                   {"scopeId", a[i].scopeId},
                   {"timestamp", a[i].timestamp},
                   {"nvmlReturn", a[i].nvmlReturn},
                   {"value", value_json(a[i].value, a[i].valueType)}});
  }
  json v = raw_output(std::move(out), a, n * sizeof(nvmlFieldValue_t));
  v["in"] = input(a, ctx);
  return v;
}
void Codec<nvmlFieldValue_t*>::apply(nvmlFieldValue_t* a, const json& v, ArgContext& ctx) {
  if (a == nullptr || !v.is_object() || !v.contains("raw")) return;
  const std::size_t n =
      std::min(bounded(ctx.array_count()), v["raw"].get<std::string>().size() / 2 / sizeof(nvmlFieldValue_t));
  from_hex(v["raw"].get<std::string>(), a, n * sizeof(nvmlFieldValue_t));
  for (std::size_t i = 0; i < n; ++i) {
    if (a[i].timestamp != 0) a[i].timestamp += ctx.shift_us;
  }
}

// Process lists (void*: the agent reads the records itself, in whatever stride the driver wrote).
std::optional<std::uint64_t> Codec<void*>::count(void*, nvmlReturn_t) { return std::nullopt; }
json Codec<void*>::input(void* a, ArgContext&) { return a != nullptr; }
json Codec<void*>::encode(void* a, ArgContext& ctx) {
  if (a == nullptr) return nullptr;
  if (ctx.rc != NVML_SUCCESS) return json{{"out", nullptr}};
  const unsigned stride = process_record_bytes(ctx.call);
  const std::size_t n = bounded(ctx.array_count());
  std::vector<unsigned char> bytes(static_cast<const unsigned char*>(a),
                                   static_cast<const unsigned char*>(a) + n * stride);
  json out = json::array();
  for (std::size_t i = 0; i < n; ++i) {
    unsigned char* rec = bytes.data() + i * stride;
    unsigned pid = 0;
    unsigned long long memory = 0;
    std::memcpy(&pid, rec, sizeof pid);
    std::memcpy(&memory, rec + 8, sizeof memory);
    if (ctx.anonymizer != nullptr) pid = ctx.anonymizer->pid(pid);
    std::memcpy(rec, &pid, sizeof pid);
    out.push_back({{"pid", pid}, {"usedGpuMemory", memory}});
  }
  return raw_output(std::move(out), bytes.data(), bytes.size());
}
void Codec<void*>::apply(void* a, const json& v, ArgContext& ctx) {
  if (a == nullptr || !v.is_object() || !v.contains("raw")) return;
  // At most the capacity the caller gave (the count before the call is not kept: the records
  // recorded are at most what this caller asked for when its capacity matches).
  const std::size_t n = std::min<std::size_t>(bounded(ctx.array_count()), v["out"].size());
  from_hex(v["raw"].get<std::string>(), a, n * process_record_bytes(ctx.call));
}

namespace {
json decode(const nvmlProcessUtilizationSample_t& s) {
  return {{"pid", s.pid},         {"timeStamp", s.timeStamp}, {"smUtil", s.smUtil},
          {"memUtil", s.memUtil}, {"encUtil", s.encUtil},     {"decUtil", s.decUtil}};
}
json decode(const nvmlProcessUtilizationInfo_v1_t& s) {
  return {{"pid", s.pid},         {"timeStamp", s.timeStamp}, {"smUtil", s.smUtil},   {"memUtil", s.memUtil},
          {"encUtil", s.encUtil}, {"decUtil", s.decUtil},     {"jpgUtil", s.jpgUtil}, {"ofaUtil", s.ofaUtil}};
}
}  // namespace

std::optional<std::uint64_t> Codec<nvmlProcessUtilizationSample_t*>::count(nvmlProcessUtilizationSample_t*,
                                                                           nvmlReturn_t) {
  return std::nullopt;
}
json Codec<nvmlProcessUtilizationSample_t*>::input(nvmlProcessUtilizationSample_t* a, ArgContext&) {
  return a != nullptr;
}
json Codec<nvmlProcessUtilizationSample_t*>::encode(nvmlProcessUtilizationSample_t* a, ArgContext& ctx) {
  if (a == nullptr) return nullptr;
  if (ctx.rc != NVML_SUCCESS) return json{{"out", nullptr}};
  std::vector<nvmlProcessUtilizationSample_t> records(a, a + bounded(ctx.array_count()));
  json out = json::array();
  for (auto& r : records) {
    if (ctx.anonymizer != nullptr) r.pid = ctx.anonymizer->pid(r.pid);
    out.push_back(decode(r));
  }
  return raw_output(std::move(out), records.data(), records.size() * sizeof(nvmlProcessUtilizationSample_t));
}
void Codec<nvmlProcessUtilizationSample_t*>::apply(nvmlProcessUtilizationSample_t* a, const json& v, ArgContext& ctx) {
  if (a == nullptr || !v.is_object() || !v.contains("raw")) return;
  const std::size_t n = v["out"].size();
  from_hex(v["raw"].get<std::string>(), a, n * sizeof(nvmlProcessUtilizationSample_t));
  for (std::size_t i = 0; i < n; ++i) a[i].timeStamp = shifted(a[i].timeStamp, ctx.shift_us);
}

std::optional<std::uint64_t> Codec<nvmlSample_t*>::count(nvmlSample_t*, nvmlReturn_t) { return std::nullopt; }
json Codec<nvmlSample_t*>::input(nvmlSample_t* a, ArgContext&) { return a != nullptr; }
json Codec<nvmlSample_t*>::encode(nvmlSample_t* a, ArgContext& ctx) {
  if (a == nullptr) return nullptr;
  if (ctx.rc != NVML_SUCCESS) return json{{"out", nullptr}};
  const std::size_t n = bounded(ctx.array_count());
  // The value type is the argument two before (nvmlDeviceGetSamples' sampleValType).
  const unsigned type = ctx.index >= 2 ? static_cast<unsigned>(ctx.counts[ctx.index - 2].value_or(0)) : 0;
  json out = json::array();
  for (std::size_t i = 0; i < n; ++i)
    out.push_back({{"timeStamp", a[i].timeStamp}, {"value", value_json(a[i].sampleValue, type)}});
  return raw_output(std::move(out), a, n * sizeof(nvmlSample_t));
}
void Codec<nvmlSample_t*>::apply(nvmlSample_t* a, const json& v, ArgContext& ctx) {
  if (a == nullptr || !v.is_object() || !v.contains("raw")) return;
  const std::size_t n = std::min(bounded(ctx.array_count()), v["out"].size());
  from_hex(v["raw"].get<std::string>(), a, n * sizeof(nvmlSample_t));
  for (std::size_t i = 0; i < n; ++i) a[i].timeStamp = shifted(a[i].timeStamp, ctx.shift_us);
}

// In and out: the caller's capacity and lastSeenTimeStamp go in, the records come out.
std::optional<std::uint64_t> Codec<nvmlProcessesUtilizationInfo_t*>::count(nvmlProcessesUtilizationInfo_t*,
                                                                           nvmlReturn_t) {
  return std::nullopt;
}
json Codec<nvmlProcessesUtilizationInfo_t*>::input(nvmlProcessesUtilizationInfo_t* a, ArgContext&) {
  return a != nullptr;
}
json Codec<nvmlProcessesUtilizationInfo_t*>::encode(nvmlProcessesUtilizationInfo_t* a, ArgContext& ctx) {
  if (a == nullptr) return nullptr;
  if (!has_output(ctx.rc)) return json{{"out", nullptr}};
  json v{{"out", {{"processSamplesCount", a->processSamplesCount}, {"lastSeenTimeStamp", a->lastSeenTimeStamp}}}};
  if (ctx.rc == NVML_SUCCESS && a->procUtilArray != nullptr) {
    std::vector<nvmlProcessUtilizationInfo_v1_t> records(
        a->procUtilArray, a->procUtilArray + std::min<unsigned>(a->processSamplesCount, 4096));
    json out = json::array();
    for (auto& r : records) {
      if (ctx.anonymizer != nullptr) r.pid = ctx.anonymizer->pid(r.pid);
      out.push_back(decode(r));
    }
    v["out"]["records"] = std::move(out);
    v["raw"] = to_hex(records.data(), records.size() * sizeof(nvmlProcessUtilizationInfo_v1_t));
  }
  return v;
}
void Codec<nvmlProcessesUtilizationInfo_t*>::apply(nvmlProcessesUtilizationInfo_t* a, const json& v, ArgContext& ctx) {
  if (a == nullptr || !v.is_object() || !v["out"].is_object()) return;
  const unsigned n = v["out"]["processSamplesCount"].get<unsigned>();
  if (v.contains("raw") && a->procUtilArray != nullptr && n <= a->processSamplesCount) {
    from_hex(v["raw"].get<std::string>(), a->procUtilArray, n * sizeof(nvmlProcessUtilizationInfo_v1_t));
    for (unsigned i = 0; i < n; ++i)
      a->procUtilArray[i].timeStamp = shifted(a->procUtilArray[i].timeStamp, ctx.shift_us);
  }
  a->processSamplesCount = n;
  a->lastSeenTimeStamp = shifted(v["out"]["lastSeenTimeStamp"].get<unsigned long long>(), ctx.shift_us);
}

// GPM metrics: the device the samples were taken on and the metric ids go in.
std::optional<std::uint64_t> Codec<nvmlGpmMetricsGet_t*>::count(nvmlGpmMetricsGet_t*, nvmlReturn_t) {
  return std::nullopt;
}
json Codec<nvmlGpmMetricsGet_t*>::input(nvmlGpmMetricsGet_t* a, ArgContext& ctx) {
  if (a == nullptr) return nullptr;
  json ids = json::array();
  for (unsigned i = 0; i < std::min<unsigned>(a->numMetrics, GPUMETER_NVML_GPM_METRIC_MAX); ++i)
    ids.push_back(a->metrics[i].metricId);
  const std::string sample = ctx.tokens->name_of(a->sample2, 's');
  auto device = ctx.tokens->sample_device.find(sample);
  return json{{"device", device == ctx.tokens->sample_device.end() ? "" : device->second}, {"metrics", ids}};
}
json Codec<nvmlGpmMetricsGet_t*>::encode(nvmlGpmMetricsGet_t* a, ArgContext& ctx) {
  if (a == nullptr) return nullptr;
  json v{{"in", input(a, ctx)}};
  v["samples"] = {ctx.tokens->name_of(a->sample1, 's'), ctx.tokens->name_of(a->sample2, 's')};
  if (ctx.rc != NVML_SUCCESS) return v;
  json out = json::array();
  for (unsigned i = 0; i < std::min<unsigned>(a->numMetrics, GPUMETER_NVML_GPM_METRIC_MAX); ++i) {
    out.push_back({{"metricId", a->metrics[i].metricId},
                   {"nvmlReturn", a->metrics[i].nvmlReturn},
                   {"value", a->metrics[i].value}});
  }
  v["out"] = std::move(out);
  return v;
}
void Codec<nvmlGpmMetricsGet_t*>::apply(nvmlGpmMetricsGet_t* a, const json& v, ArgContext&) {
  if (a == nullptr || !v.is_object() || !v["out"].is_array()) return;
  for (unsigned i = 0; i < std::min<unsigned>(a->numMetrics, GPUMETER_NVML_GPM_METRIC_MAX); ++i) {
    nvmlGpmMetric_t& m = a->metrics[i];
    m.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
    m.metricInfo = {};
    for (const json& r : v["out"]) {
      if (r["metricId"].get<unsigned>() != m.metricId) continue;
      m.nvmlReturn = r["nvmlReturn"].get<int>();
      m.value = r["value"].is_number() ? r["value"].get<double>() : std::nan("");  // JSON writes NaN as null
    }
  }
}

}  // namespace gpumeter::transcript
