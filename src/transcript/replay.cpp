#include "transcript/replay.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>
#include <type_traits>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "transcript/calls.h"
#include "transcript/codec.h"

namespace gpumeter::transcript {

namespace {

struct Line {
  std::int64_t t = 0;  // ns since the recording's first call
  json args;
  nvmlReturn_t rc = NVML_SUCCESS;
};

// Inputs a key leaves out: timestamps (lastSeenTimeStamp) and event masks, and GPM sample handles,
// which the agent's threads allocate in no fixed order (nvmlGpmMetricsGet is keyed by the device
// its samples were taken on instead).
template <typename T>
constexpr bool left_out_of_keys() {
  return std::is_same_v<T, unsigned long long> || std::is_same_v<T, nvmlGpmSample_t>;
}

// A recorded argument as part of a key, as Codec<T>::input gives it for a live call: inputs as
// they were, timestamps left out, and for an output only whether the caller passed a pointer
// (a size query passes none).
json recorded_key_part(const json& arg, bool left_out) {
  if (left_out) return nullptr;
  if (arg.is_object() && arg.contains("in")) return arg["in"];
  if (arg.is_object() && arg.contains("out")) return true;
  if (arg.is_null()) return false;
  return arg;
}

class Replay {
 public:
  static Replay*& active() {
    static Replay* r = nullptr;
    return r;
  }

  Result<void> load(const std::string& path) {
    std::ifstream in(path);
    if (!in) return Error{0, fmt::format("cannot read the recording {}", path)};
    std::string text;
    std::size_t number = 0;
    bool have_first = false;
    while (std::getline(in, text)) {
      ++number;
      json j = json::parse(text, nullptr, false);
      if (j.is_discarded()) return Error{0, fmt::format("{}:{}: not a JSON line", path, number)};
      if (number == 1) {
        if (!j.contains("gpumeter_nvml_transcript")) return Error{0, fmt::format("{}: not an NVML transcript", path)};
        continue;
      }
      if (!j.contains("fn")) continue;  // the end line
      if (!j["fn"].is_string() || !j["t"].is_number_integer() || !j["wall"].is_number_integer() ||
          !j["rc"].is_number_integer() || !j["args"].is_array()) {
        return Error{0, fmt::format("{}:{}: a call needs fn, t, wall, rc and args", path, number)};
      }
      if (!have_first) {
        first_t_ = j["t"].get<std::int64_t>();
        first_wall_ = j["wall"].get<std::int64_t>();
        have_first = true;
      }
      ++calls_;
      span_ = std::max(span_, j["t"].get<std::int64_t>() - first_t_);
      lines_[j["fn"].get<std::string>()].push_back(
          Line{j["t"].get<std::int64_t>() - first_t_, std::move(j["args"]), j["rc"].get<nvmlReturn_t>()});
    }
    if (!have_first) return Error{0, fmt::format("{}: the recording holds no call", path)};
    path_ = path;
    return {};
  }

  // "N calls of M functions over S s".
  std::string summary() const {
    return fmt::format("{} calls of {} functions over {:.1f} s", calls_, lines_.size(), span_ / 1e9);
  }

  bool has(Call c) const { return always_answers(c) || lines_.count(call_name(c)) > 0; }

  // Init, shutdown and the calls that free what was allocated answer even when the recording
  // holds none: it ends before the agent frees its event set and GPM samples and shuts NVML
  // down, and the agent takes GPM and events to be there only when it can free them.
  static constexpr bool always_answers(Call c) {
    return c == Call::nvmlInit_v2 || c == Call::nvmlShutdown || c == Call::nvmlEventSetFree ||
           c == Call::nvmlGpmSampleFree;
  }
  const std::string& path() const { return path_; }

  // Time since the replay's first call (which stands for the recording's first).
  std::int64_t now() {
    std::lock_guard lock(clock_mu_);
    if (start_mono_ == 0) {
      start_mono_ = mono_ns();
      shift_us_ = (wall_ns() - first_wall_) / 1000;
    }
    return mono_ns() - start_mono_;
  }
  std::int64_t shift_us() {
    now();
    return shift_us_;
  }
  std::mutex& mu() { return mu_; }
  Tokens& tokens() { return tokens_; }

  // The recorded calls of one key, by time, and how many of them the replay has answered.
  struct Calls {
    std::vector<const Line*> lines;
    std::size_t served = 0;
    // The next recorded answer, in the order the driver gave them; once all are served, the last
    // again (nullptr when the key was never called), and `exhausted`.
    const Line* next(bool& exhausted) {
      exhausted = served >= lines.size();
      if (lines.empty()) return nullptr;
      return exhausted ? lines.back() : lines[served++];
    }
  };

  // The recorded calls of `c` with this key (built on first use: keys need the types).
  template <typename... A>
  Calls& calls(Call c, const json& key) {
    auto& index = index_[static_cast<unsigned>(c)];
    if (!index.built) {
      constexpr bool left_out[] = {left_out_of_keys<A>()..., false};
      for (const Line& l : lines_[call_name(c)]) {
        json k = json::array();
        for (std::size_t i = 0; i < l.args.size() && i < sizeof...(A); ++i)
          k.push_back(recorded_key_part(l.args[i], left_out[i]));
        index.by_key[k.dump()].lines.push_back(&l);
      }
      // Lines are written as calls end, so calls of several threads interleave: order by start.
      for (auto& [k, v] : index.by_key)
        std::stable_sort(v.lines.begin(), v.lines.end(), [](const Line* a, const Line* b) { return a->t < b->t; });
      index.built = true;
    }
    return index.by_key[key.dump()];
  }

 private:
  struct Index {
    bool built = false;
    std::map<std::string, Calls> by_key;
  };
  std::mutex mu_;        // the index and the tokens
  std::mutex clock_mu_;  // the replay's start
  std::string path_;
  std::map<std::string, std::vector<Line>> lines_;
  std::map<unsigned, Index> index_;
  Tokens tokens_;
  std::int64_t first_t_ = 0, first_wall_ = 0;
  std::size_t calls_ = 0;
  std::int64_t span_ = 0;
  std::int64_t start_mono_ = 0, shift_us_ = 0;
};

template <Call C, typename Fn>
struct Replayed;

// A recording is input: a value of the wrong type in it is the driver's error, never an
// exception in the caller.
template <typename Body>
nvmlReturn_t guarded(Body&& body) noexcept {
  try {
    return body();
  } catch (...) {
    return NVML_ERROR_UNKNOWN;
  }
}

template <Call C, typename... A>
struct Replayed<C, nvmlReturn_t (*)(A...)> {
  static nvmlReturn_t call(A... a) noexcept {
    return guarded([&] { return answer(a...); });
  }
  static nvmlReturn_t answer(A... a) {
    Replay& r = *Replay::active();
    const std::int64_t shift_us = r.shift_us();  // the first call starts the replay's clock
    std::lock_guard lock(r.mu());
    ArgContext ctx;
    ctx.call = C;
    ctx.tokens = &r.tokens();
    ctx.shift_us = shift_us;
    ctx.counts = {Codec<A>::count(a, NVML_SUCCESS)...};
    json inputs = json::array(), key = json::array();
    std::size_t i = 0;
    ((ctx.index = i++, inputs.push_back(Codec<A>::input(a, ctx)),
      key.push_back(left_out_of_keys<A>() ? json(nullptr) : inputs.back())),
     ...);
    bool exhausted = false;
    const Line* line = r.calls<A...>(C, key).next(exhausted);
    if (line == nullptr) {
      if constexpr (Replay::always_answers(C)) return NVML_SUCCESS;
      return NVML_ERROR_NOT_SUPPORTED;  // never asked while recording
    }
    if constexpr (C == Call::nvmlDeviceGetProcessUtilization || C == Call::nvmlDeviceGetProcessesUtilizationInfo) {
      // Past the recording's end the processes have no new records, as at a driver that has no
      // sample newer than the caller's lastSeenTimeStamp.
      if (exhausted) return NVML_ERROR_NOT_FOUND;
    }
    ctx.rc = line->rc;
    i = 0;
    ((ctx.index = i, Codec<A>::apply(a, line->args.at(i), ctx), ++i), ...);
    note_gpm_sample(C, inputs, r.tokens());
    return line->rc;
  }
};

// A sample buffer: every recorded sample of this device and type that the recording had seen by
// the answer this call stands for, newer than lastSeen.
template <>
struct Replayed<Call::nvmlDeviceGetSamples, nvmlDeviceGetSamples_fn> {
  static nvmlReturn_t call(nvmlDevice_t device, unsigned type, unsigned long long last_seen, unsigned* value_type,
                           unsigned* count, nvmlSample_t* samples) noexcept {
    return guarded([&] { return answer(device, type, last_seen, value_type, count, samples); });
  }
  static nvmlReturn_t answer(nvmlDevice_t device, unsigned type, unsigned long long last_seen, unsigned* value_type,
                             unsigned* count, nvmlSample_t* samples) {
    Replay& r = *Replay::active();
    const std::int64_t shift = r.shift_us();
    std::lock_guard lock(r.mu());
    if (count == nullptr || value_type == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    ArgContext ctx;
    ctx.tokens = &r.tokens();
    // A size query (no buffer) answers as the recorded size query of its turn did, so that the
    // fills that follow stand for the same recorded fills.
    json query_key = json::array({Codec<nvmlDevice_t>::input(device, ctx), type, nullptr, true, true, false});
    if (samples == nullptr) {
      bool exhausted = false;
      const Line* l = r.calls<nvmlDevice_t, unsigned, unsigned long long, unsigned*, unsigned*, nvmlSample_t*>(
                           Call::nvmlDeviceGetSamples, query_key)
                          .next(exhausted);
      if (l == nullptr) return NVML_ERROR_NOT_SUPPORTED;
      if (!exhausted) {
        Codec<unsigned*>::apply(value_type, l->args.at(3), ctx);
        Codec<unsigned*>::apply(count, l->args.at(4), ctx);
        return l->rc;
      }
    }
    json key = json::array({Codec<nvmlDevice_t>::input(device, ctx), type, nullptr, true, true, true});
    auto& calls = r.calls<nvmlDevice_t, unsigned, unsigned long long, unsigned*, unsigned*, nvmlSample_t*>(
        Call::nvmlDeviceGetSamples, key);
    if (calls.lines.empty()) return NVML_ERROR_NOT_SUPPORTED;
    // A fill stands for the recorded fill of its turn; once they are used up, for all of them.
    const std::size_t upto = samples == nullptr ? calls.lines.size() : std::min(calls.served + 1, calls.lines.size());
    if (samples != nullptr) calls.served = upto;
    std::map<unsigned long long, nvmlSample_t> found;  // by shifted timestamp
    for (std::size_t i = 0; i < upto; ++i) {
      const Line* l = calls.lines[i];
      if (l->rc != NVML_SUCCESS) continue;
      if (l->args[3].is_object() && l->args[3]["out"].is_number()) *value_type = l->args[3]["out"].get<unsigned>();
      const json& arg = l->args[5];
      if (!arg.is_object() || !arg.contains("raw")) continue;
      std::vector<nvmlSample_t> got(arg["out"].size());
      from_hex(arg["raw"].get<std::string>(), got.data(), got.size() * sizeof(nvmlSample_t));
      for (nvmlSample_t s : got) {
        s.timeStamp = static_cast<unsigned long long>(static_cast<std::int64_t>(s.timeStamp) + shift);
        if (s.timeStamp > last_seen) found.emplace(s.timeStamp, s);
      }
    }
    if (found.empty()) return NVML_ERROR_NOT_FOUND;
    if (samples == nullptr) {
      *count = static_cast<unsigned>(found.size());
      return NVML_SUCCESS;
    }
    unsigned n = 0;
    for (const auto& [t, s] : found) {
      if (n == *count) break;
      samples[n++] = s;
    }
    *count = n;
    return NVML_SUCCESS;
  }
};

// Events: one recorded event each time the replay passes its time; otherwise the wait times out.
template <Call C>
struct EventWait {
  static nvmlReturn_t call(nvmlEventSet_t set, nvmlEventData_t* data, unsigned timeout_ms) noexcept {
    return guarded([&] { return answer(set, data, timeout_ms); });
  }
  static nvmlReturn_t answer(nvmlEventSet_t set, nvmlEventData_t* data, unsigned timeout_ms) {
    Replay& r = *Replay::active();
    const std::int64_t begin = r.now();
    const std::int64_t until = begin + static_cast<std::int64_t>(timeout_ms) * 1'000'000;
    for (;;) {
      {
        std::lock_guard lock(r.mu());
        ArgContext ctx;
        ctx.call = C;
        ctx.tokens = &r.tokens();
        json key = json::array({Codec<nvmlEventSet_t>::input(set, ctx), data != nullptr, timeout_ms});
        auto& calls = r.calls<nvmlEventSet_t, nvmlEventData_t*, unsigned>(C, key);
        // The recorded waits up to now, in order; the first that got an event delivers it.
        const std::int64_t now = r.now();
        while (calls.served < calls.lines.size() && calls.lines[calls.served]->t <= now) {
          const Line* l = calls.lines[calls.served++];
          if (l->rc != NVML_SUCCESS) continue;
          Codec<nvmlEventData_t*>::apply(data, l->args[1], ctx);
          return NVML_SUCCESS;
        }
      }
      const std::int64_t now = r.now();
      if (now >= until) return NVML_ERROR_TIMEOUT;
      std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<std::int64_t>(until - now, 100'000'000)));
    }
  }
};
template <>
struct Replayed<Call::nvmlEventSetWait_v2, nvmlEventSetWait_fn> : EventWait<Call::nvmlEventSetWait_v2> {};
template <>
struct Replayed<Call::nvmlEventSetWait, nvmlEventSetWait_fn> : EventWait<Call::nvmlEventSetWait> {};

const char* replay_error_string(nvmlReturn_t rc) {
  switch (rc) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_NOT_FOUND:
      return "Not Found";
    case NVML_ERROR_TIMEOUT:
      return "Timeout";
    default:
      return "Unknown Error";
  }
}

class ReplaySource final : public SymbolSource {
 public:
  void* symbol(const char* name) const override {
    Replay& r = *Replay::active();
    if (std::strcmp(name, "nvmlErrorString") == 0) return reinterpret_cast<void*>(&replay_error_string);
#define GPUMETER_TRANSCRIPT_SERVE(fn, type)                                                      \
  if (std::strcmp(name, #fn) == 0) {                                                             \
    return r.has(Call::fn) ? reinterpret_cast<void*>(&Replayed<Call::fn, type>::call) : nullptr; \
  }
    GPUMETER_TRANSCRIPT_CALLS(GPUMETER_TRANSCRIPT_SERVE)
#undef GPUMETER_TRANSCRIPT_SERVE
    return nullptr;
  }
  const std::string& path() const override { return Replay::active()->path(); }
};

}  // namespace

Result<std::unique_ptr<SymbolSource>> replay_source(const std::string& path) {
  if (Replay::active() != nullptr) return Error{0, "a replay is already running in this process"};
  auto replay = std::make_unique<Replay>();
  if (auto ok = replay->load(path); !ok) return ok.error();
  Replay::active() = replay.release();  // process-wide, like the entry points that reach it
  return std::unique_ptr<SymbolSource>(new ReplaySource());
}

Result<std::string> describe_recording(const std::string& path) {
  Replay r;
  if (auto ok = r.load(path); !ok) return ok.error();
  return r.summary();
}

Result<std::string> replay_of_scenario(const std::string& scenario_path) {
  try {
    YAML::Node root = YAML::LoadFile(scenario_path);
    if (!root.IsMap() || !root["replay"]) return std::string();
    if (!root["replay"].IsScalar())
      return Error{0, fmt::format("{}: replay: expected the path of a recording", scenario_path)};
    std::filesystem::path p = root["replay"].as<std::string>();
    if (p.is_relative()) p = std::filesystem::path(scenario_path).parent_path() / p;
    return p.string();
  } catch (const YAML::Exception&) {
    return std::string();  // not readable as YAML: the scenario parser says where, as for any scenario
  }
}

}  // namespace gpumeter::transcript
