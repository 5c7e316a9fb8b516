// NVLink: the link state and the NVLink field values (link count, throughput, error counters,
// speed, state, version), from the model's `nvlink` spec, the jobs' traffic and the scenario's
// NVLink faults (profiling.h).

#include <climits>
#include <type_traits>

#include "sim/nvml/nvlink_fields.h"
#include "sim/nvml/nvml_call.h"

using gpumeter::sim::device_call;
using gpumeter::sim::DeviceState;
using gpumeter::sim::Micros;
using gpumeter::sim::NvlinkErrorType;
using gpumeter::sim::Session;
using Fn = gpumeter::sim::NvmlFunction;

namespace gpumeter::sim {

namespace {

void set_uint(nvmlFieldValue_t& v, unsigned value) {
  v.valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
  v.value.uiVal = value;
  v.nvmlReturn = NVML_SUCCESS;
}

void set_ull(nvmlFieldValue_t& v, unsigned long long value) {
  v.valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
  v.value.ullVal = value;
  v.nvmlReturn = NVML_SUCCESS;
}

}  // namespace

bool fill_nvlink_field(DeviceState& d, Micros now, nvmlFieldValue_t& v) {
  switch (v.fieldId) {
    case NVML_FI_DEV_NVLINK_LINK_COUNT:
    case NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX:
    case NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX:
    case NVML_FI_DEV_NVLINK_ERROR_DL_REPLAY:
    case NVML_FI_DEV_NVLINK_ERROR_DL_RECOVERY:
    case NVML_FI_DEV_NVLINK_ERROR_DL_CRC:
    case NVML_FI_DEV_NVLINK_GET_SPEED:
    case NVML_FI_DEV_NVLINK_GET_STATE:
    case NVML_FI_DEV_NVLINK_GET_VERSION:
      break;
    default:
      return false;
  }
  const NvlinkSpec& spec = d.gpu.model().nvlink;
  if (spec.links == 0) {
    v.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
    return true;
  }
  if (v.fieldId == NVML_FI_DEV_NVLINK_LINK_COUNT) {
    set_uint(v, spec.links);
    return true;
  }
  ProfileIntegrator& p = d.gpu.profiling();
  const bool throughput =
      v.fieldId == NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX || v.fieldId == NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX;
  // [H]: "A scopeId of UINT_MAX returns aggregate value summed up across all links" for the
  // throughput counters; the other fields take one link.
  if (throughput && v.scopeId == UINT_MAX) {
    unsigned long long kib = 0;
    for (unsigned l = 0; l < spec.links; ++l) {
      kib += v.fieldId == NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX ? p.nvlink_tx_kib(l, now) : p.nvlink_rx_kib(l, now);
    }
    set_ull(v, kib);
    return true;
  }
  if (v.scopeId >= spec.links) {
    v.nvmlReturn = NVML_ERROR_INVALID_ARGUMENT;
    return true;
  }
  const unsigned link = v.scopeId;
  const bool blackwell = d.gpu.model().architecture == "blackwell";
  switch (v.fieldId) {
    case NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX:
      set_ull(v, p.nvlink_tx_kib(link, now));
      break;
    case NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX:
      set_ull(v, p.nvlink_rx_kib(link, now));
      break;
    // [H]: the DL error counters are "unsupported for Blackwell+".
    case NVML_FI_DEV_NVLINK_ERROR_DL_REPLAY:
    case NVML_FI_DEV_NVLINK_ERROR_DL_RECOVERY:
    case NVML_FI_DEV_NVLINK_ERROR_DL_CRC: {
      if (blackwell) {
        v.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        break;
      }
      const NvlinkErrorType type = v.fieldId == NVML_FI_DEV_NVLINK_ERROR_DL_REPLAY     ? NvlinkErrorType::replay
                                   : v.fieldId == NVML_FI_DEV_NVLINK_ERROR_DL_RECOVERY ? NvlinkErrorType::recovery
                                                                                       : NvlinkErrorType::crc;
      set_ull(v, p.nvlink_errors(link, type, now));
      break;
    }
    case NVML_FI_DEV_NVLINK_GET_SPEED:
      set_uint(v, p.link_up(link, now) ? spec.speed_mbps : 0);
      break;
    case NVML_FI_DEV_NVLINK_GET_STATE:
      set_uint(v, p.link_up(link, now) ? NVML_NVLINK_STATE_ACTIVE : NVML_NVLINK_STATE_INACTIVE);
      break;
    default:
      set_uint(v, spec.version);
      break;  // NVML_FI_DEV_NVLINK_GET_VERSION
  }
  return true;
}

}  // namespace gpumeter::sim

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                                           unsigned int* is_active) {
  return device_call(Fn::nvmlDeviceGetNvLinkState, device, [&](Session&, DeviceState& d, Micros now) {
    const unsigned links = d.gpu.model().nvlink.links;
    if (links == 0) return NVML_ERROR_NOT_SUPPORTED;
    if (is_active == nullptr || link >= links) return NVML_ERROR_INVALID_ARGUMENT;
    *is_active = d.gpu.profiling().link_up(link, now) ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return NVML_SUCCESS;
  });
}

static_assert(std::is_same_v<decltype(&nvmlDeviceGetNvLinkState), nvmlDeviceGetNvLinkState_fn>);
