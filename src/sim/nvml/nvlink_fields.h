#pragma once
// The NVLink field values of nvmlDeviceGetFieldValues (nvml_exports_nvlink.cpp).

#include "abi/nvml_api.h"
#include "sim/scenario/time.h"
#include "sim/nvml/session.h"

namespace gpumeter::sim {

// Fills `v` (value, type and nvmlReturn) when its fieldId is an NVLink field the simulator
// serves, and says whether it was one.
bool fill_nvlink_field(DeviceState& d, Micros now, nvmlFieldValue_t& v);

}  // namespace gpumeter::sim
