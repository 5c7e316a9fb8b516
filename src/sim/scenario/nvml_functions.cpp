#include "sim/scenario/nvml_functions.h"

#include <array>

namespace gpumeter::sim {

namespace {

struct Entry {
  std::string_view name;
  NvmlFunctionKind kind;
};

constexpr std::array<Entry, kNvmlFunctionCount> kEntries = {{
#define GPUMETER_SIM_X(name, kind) {#name, NvmlFunctionKind::kind},
    GPUMETER_SIM_NVML_FUNCTIONS(GPUMETER_SIM_X)
#undef GPUMETER_SIM_X
}};

}  // namespace

std::string_view nvml_function_name(NvmlFunction f) { return kEntries[static_cast<std::size_t>(f)].name; }

NvmlFunctionKind nvml_function_kind(NvmlFunction f) { return kEntries[static_cast<std::size_t>(f)].kind; }

std::optional<NvmlFunction> nvml_function_from_name(std::string_view name) {
  for (std::size_t i = 0; i < kEntries.size(); ++i) {
    if (kEntries[i].name == name) return static_cast<NvmlFunction>(i);
  }
  return std::nullopt;
}

}  // namespace gpumeter::sim
