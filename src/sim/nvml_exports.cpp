// Placeholder until the simulator lands: every NVML program sees "driver not loaded".
#include "nvml/nvml_api.h"

#define GPUMETER_NVML_EXPORT extern "C" __attribute__((visibility("default")))

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlInit_v2(void) { return NVML_ERROR_DRIVER_NOT_LOADED; }
