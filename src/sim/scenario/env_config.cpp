#include "sim/scenario/env_config.h"

#include <array>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <cmath>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "abi/nvml_api.h"
#include "sim/scenario/scenario_parse.h"
#include "sim/scenario/units.h"
#include "util/split.h"

namespace gpumeter::sim {

namespace {

constexpr std::array<std::pair<std::string_view, unsigned>, 6> kFields = {{
    {"NVML_FI_DEV_MEMORY_TEMP", NVML_FI_DEV_MEMORY_TEMP},
    {"NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION", NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION},
    {"NVML_FI_DEV_PCIE_COUNT_TX_BYTES", NVML_FI_DEV_PCIE_COUNT_TX_BYTES},
    {"NVML_FI_DEV_PCIE_COUNT_RX_BYTES", NVML_FI_DEV_PCIE_COUNT_RX_BYTES},
    {"NVML_FI_DEV_POWER_AVERAGE", NVML_FI_DEV_POWER_AVERAGE},
    {"NVML_FI_DEV_POWER_INSTANT", NVML_FI_DEV_POWER_INSTANT},
}};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

Result<void> parse_unsupported(std::string_view list, SimEnv& env) {
  for (std::string_view part : split(list, ',')) {
    const std::string_view name = trim(part);
    if (name.empty()) continue;
    if (auto fn = nvml_function_from_name(name)) {
      if (nvml_function_kind(*fn) == NvmlFunctionKind::lifecycle) {
        return Error{0, fmt::format("GPUMETER_SIM_UNSUPPORTED: {} cannot be made unsupported", name)};
      }
      env.unsupported.set(static_cast<std::size_t>(*fn));
      continue;
    }
    bool field = false;
    for (const auto& [field_name, id] : kFields) {
      if (field_name == name) {
        env.unsupported_fields.push_back(id);
        field = true;
      }
    }
    if (!field) {
      return Error{0, fmt::format("GPUMETER_SIM_UNSUPPORTED: '{}' is neither an NVML function the simulator "
                                  "exports nor a field id it serves",
                                  name)};
    }
  }
  return {};
}

// FNV-1a: a hash that stays the same across builds, since two libraries compute it.
std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::string default_cuda_dir(const EnvLookup& getenv, const std::string& scenario_path) {
  std::unique_ptr<char, decltype(&std::free)> real(realpath(scenario_path.c_str(), nullptr), &std::free);
  const char* tmp = getenv("TMPDIR");
  return fmt::format("{}/gpumeter-sim-cuda-{:016x}", tmp != nullptr && *tmp != '\0' ? tmp : "/tmp",
                     fnv1a(real ? real.get() : scenario_path));
}

Result<SimLie> parse_lie(std::string_view text) {
  const std::size_t colon = text.find(':');
  SimLie lie;
  lie.metric = std::string(trim(text.substr(0, colon)));
  std::optional<double> offset;
  if (colon != std::string_view::npos) offset = parse_double(std::string(trim(text.substr(colon + 1))));
  if (lie.metric != "temperature" || !offset || !std::isfinite(*offset)) {
    return Error{0, fmt::format("GPUMETER_SIM_LIE: expected temperature:<°C>, such as temperature:+7, got '{}'", text)};
  }
  lie.offset = *offset;
  return lie;
}

}  // namespace

Result<SimEnv> read_sim_env(const EnvLookup& getenv) {
  SimEnv env;
  const char* scenario = getenv("GPUMETER_SIM_SCENARIO");
  if (scenario == nullptr || *scenario == '\0') {
    return Error{0, "GPUMETER_SIM_SCENARIO is not set; point it at a scenario YAML file"};
  }
  env.scenario_path = scenario;
  if (const char* epoch = getenv("GPUMETER_SIM_EPOCH"); epoch != nullptr && *epoch != '\0') {
    env.epoch = parse_double(epoch);
    if (!env.epoch || *env.epoch < 0) {
      return Error{0, fmt::format("GPUMETER_SIM_EPOCH: expected unix time in seconds, got '{}'", epoch)};
    }
  }
  if (const char* file = getenv("GPUMETER_SIM_EPOCH_FILE"); file != nullptr && *file != '\0') {
    if (env.epoch) return Error{0, "GPUMETER_SIM_EPOCH and GPUMETER_SIM_EPOCH_FILE cannot both be set"};
    env.epoch_file = file;
  }
  if (const char* scale = getenv("GPUMETER_SIM_TIME_SCALE"); scale != nullptr && *scale != '\0') {
    env.time_scale = parse_double(scale);
    if (!env.time_scale || *env.time_scale <= 0 || *env.time_scale > 1e6) {
      return Error{0, fmt::format("GPUMETER_SIM_TIME_SCALE: expected a number above 0 (at most 1e6), got '{}'", scale)};
    }
  }
  if (const char* unsupported = getenv("GPUMETER_SIM_UNSUPPORTED"); unsupported != nullptr) {
    if (auto r = parse_unsupported(unsupported, env); !r) return r.error();
  }
  const char* dir = getenv("GPUMETER_SIM_CUDA_DIR");
  env.cuda_dir = dir != nullptr && *dir != '\0' ? dir : default_cuda_dir(getenv, env.scenario_path);
  if (const char* lie = getenv("GPUMETER_SIM_LIE"); lie != nullptr && *lie != '\0') {
    auto parsed = parse_lie(lie);
    if (!parsed) return parsed.error();
    env.lie = std::move(parsed).value();
  }
  return env;
}

Result<SimSetup> load_sim_setup(const EnvLookup& getenv) {
  auto env = read_sim_env(getenv);
  if (!env) return env.error();
  auto scenario = load_scenario(env->scenario_path);
  if (!scenario) return Error{0, "invalid scenario: " + scenario.error().message};
  return SimSetup{std::move(env).value(), std::move(scenario).value()};
}

ScenarioClock scenario_clock(const SimEnv& env, double scale, std::int64_t default_epoch_ns) {
  if (!env.epoch_file.empty()) return ScenarioClock(scale, env.epoch_file);
  if (env.epoch) return ScenarioClock(scale, static_cast<std::int64_t>(std::llround(*env.epoch * 1e9)));
  return ScenarioClock(scale, default_epoch_ns);
}

}  // namespace gpumeter::sim
