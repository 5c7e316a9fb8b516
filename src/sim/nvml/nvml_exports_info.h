// What the two halves of the informational NVML queries share (nvml_exports_info.cpp:
// identity, modes, infoROM, architecture, accounting; nvml_exports_limits.cpp: memory, ECC,
// thresholds, power limits, clocks): the product-line predicates both consult, and the shapes
// of their simplest device calls.

#pragma once

#include "sim/nvml/nvml_call.h"

namespace gpumeter::sim::info {

using Fn = NvmlFunction;

inline bool geforce(const GpuModelSpec& m) { return m.profile == "geforce"; }

// Volta and Turing retire pages; Ampere and newer remap rows instead.
inline bool pre_ampere(const GpuModelSpec& m) { return m.architecture == "volta" || m.architecture == "turing"; }

// A product with ECC memory: GeForce boards have none unless the model says so.
inline bool has_ecc_memory(const GpuModelSpec& m) { return m.ecc || !geforce(m); }

// A device call with one unsigned out-parameter, which `get` fills or refuses.
template <typename Get>
inline nvmlReturn_t get_uint(Fn fn, nvmlDevice_t device, unsigned int* out, Get&& get) {
  return device_call(fn, device, [&](Session&, DeviceState& d, Micros now) -> nvmlReturn_t {
    if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    return get(d, now, *out);
  });
}

inline nvmlReturn_t not_supported(Fn fn, nvmlDevice_t device) {
  return device_call(fn, device, [](Session&, DeviceState&, Micros) { return NVML_ERROR_NOT_SUPPORTED; });
}

inline nvmlReturn_t value(unsigned v, unsigned& out) {
  out = v;
  return NVML_SUCCESS;
}

// A device call that answers the same value for every GPU.
inline nvmlReturn_t constant(Fn fn, nvmlDevice_t device, unsigned int* out, unsigned v) {
  return get_uint(fn, device, out, [v](DeviceState&, Micros, unsigned& o) { return value(v, o); });
}

}  // namespace gpumeter::sim::info
