// NVML entry points for the informational queries a typical client makes (pynvml's
// nvidia_smi.DeviceQuery, nvidia-smi -q), first half: what the board is and how it is set up
// (brand, modes, board ids, infoROM, architecture and MIG, accounting) and process names.
// nvml_exports_limits.cpp has the other half: memory, ECC, thresholds, power limits, clocks.
// Each answers what a real driver answers for the simulated model: a value derived from the
// model, or NOT_SUPPORTED where nvml.h says the product lacks the feature.
// docs/nvml-behaviour.md gives the source of every choice.

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "sim/nvml/nvml_exports_info.h"
#include "sim/nvml/nvml_exports_mig.h"

using gpumeter::sim::copy_string;
using gpumeter::sim::device_call;
using gpumeter::sim::DeviceState;
using gpumeter::sim::GpuModelSpec;
using gpumeter::sim::Micros;
using gpumeter::sim::Session;
using gpumeter::sim::system_call;
using namespace gpumeter::sim::info;

namespace {

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

unsigned brand_of(const GpuModelSpec& m) {
  std::string_view name = m.name;
  if (contains(name, "TITAN")) return NVML_BRAND_TITAN;
  if (geforce(m) || contains(name, "GeForce")) return NVML_BRAND_GEFORCE;
  if (contains(name, "Tesla")) return NVML_BRAND_TESLA;
  if (contains(name, "Quadro RTX")) return NVML_BRAND_QUADRO_RTX;
  if (contains(name, "Quadro")) return NVML_BRAND_QUADRO;
  if (contains(name, "RTX")) return NVML_BRAND_NVIDIA_RTX;
  return NVML_BRAND_NVIDIA;
}

const char* inforom_image_of(const GpuModelSpec& m) {
  if (geforce(m)) return "G001.0000.02.04";
  const std::string& a = m.architecture;
  if (a == "volta") return "G503.0202.00.01";
  if (a == "turing") return "G183.0200.00.02";
  if (a == "ampere") return "G153.0200.00.01";
  if (a == "ga100") return "G503.0201.00.03";
  if (a == "ada") return "G193.0200.00.01";
  if (a == "blackwell") return "G525.0210.00.02";
  return "G520.0200.00.05";
}

const char* inforom_ecc_object_of(const GpuModelSpec& m) {
  if (pre_ampere(m)) return "5.0";
  if (m.architecture == "hopper" || m.architecture == "blackwell") return "7.16";
  return "6.16";
}

unsigned architecture_of(const GpuModelSpec& m) {
  const std::string& a = m.architecture;
  if (a == "volta") return NVML_DEVICE_ARCH_VOLTA;
  if (a == "turing") return NVML_DEVICE_ARCH_TURING;
  if (a == "ampere" || a == "ga100") return NVML_DEVICE_ARCH_AMPERE;
  if (a == "ada") return NVML_DEVICE_ARCH_ADA;
  if (a == "hopper") return NVML_DEVICE_ARCH_HOPPER;
  if (a == "blackwell") return NVML_DEVICE_ARCH_BLACKWELL;
  return NVML_DEVICE_ARCH_UNKNOWN;
}

// CUDA's compute capability by chip: GA100 is 8.0 and the other Ampere chips 8.6; datacenter
// Blackwell (B100/B200) is 10.0 and GeForce Blackwell 12.0.
std::pair<int, int> compute_capability_of(const GpuModelSpec& m) {
  const std::string& a = m.architecture;
  if (a == "volta") return {7, 0};
  if (a == "turing") return {7, 5};
  if (a == "ga100") return {8, 0};
  if (a == "ampere") return {8, 6};
  if (a == "ada") return {8, 9};
  if (a == "blackwell") return geforce(m) ? std::pair{12, 0} : std::pair{10, 0};
  return {9, 0};
}

// MIG exists on GA100, Hopper and Blackwell datacenter boards; a scenario's `mig:` enables it.
bool mig_capable(const GpuModelSpec& m) {
  return !geforce(m) && (m.architecture == "ga100" || m.architecture == "hopper" || m.architecture == "blackwell");
}

}  // namespace

// ---- identity and modes ----

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device, unsigned int* type) {
  return get_uint(Fn::nvmlDeviceGetBrand, device, type,
                  [](DeviceState& d, Micros, unsigned& out) { return value(brand_of(d.gpu.model()), out); });
}

// Real boards report display mode enabled whether or not a monitor is attached (Tesla V100 and
// GeForce outputs of nvidia-smi -q alike); no simulated node runs an X server on its GPUs.
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetDisplayMode(nvmlDevice_t device, unsigned int* display) {
  return constant(Fn::nvmlDeviceGetDisplayMode, device, display, NVML_FEATURE_ENABLED);
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetDisplayActive(nvmlDevice_t device, unsigned int* is_active) {
  return constant(Fn::nvmlDeviceGetDisplayActive, device, is_active, NVML_FEATURE_DISABLED);
}

// Datacenter nodes run nvidia-persistenced; a GeForce box keeps the driver's default (off).
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, unsigned int* mode) {
  return get_uint(Fn::nvmlDeviceGetPersistenceMode, device, mode, [](DeviceState& d, Micros, unsigned& out) {
    return value(geforce(d.gpu.model()) ? NVML_FEATURE_DISABLED : NVML_FEATURE_ENABLED, out);
  });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, unsigned int* mode) {
  if (gpumeter::sim::is_mig_handle(device)) return gpumeter::sim::mig::compute_mode(device, mode);
  return constant(Fn::nvmlDeviceGetComputeMode, device, mode, NVML_COMPUTEMODE_DEFAULT);
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int* minor_number) {
  return get_uint(Fn::nvmlDeviceGetMinorNumber, device, minor_number,
                  [](DeviceState& d, Micros, unsigned& out) { return value(d.gpu.index(), out); });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMultiGpuBoard(nvmlDevice_t device, unsigned int* multi_gpu) {
  return constant(Fn::nvmlDeviceGetMultiGpuBoard, device, multi_gpu, 0);
}

// Unique per GPU of the node and stable: real boards report bus << 8 | device (0x600 for
// 00000000:06:00.0, 0x1e for 00000000:00:1E.0); the domain goes above them so that GPUs of two
// PCI domains stay distinct.
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetBoardId(nvmlDevice_t device, unsigned int* board_id) {
  return get_uint(Fn::nvmlDeviceGetBoardId, device, board_id, [](DeviceState& d, Micros, unsigned& out) {
    const auto& pci = d.gpu.spec().pci;
    return value((pci.domain << 16) | (pci.bus << 8) | pci.device, out);
  });
}

// "For windows only": every Linux driver answers NOT_SUPPORTED.
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetDriverModel(nvmlDevice_t device, unsigned int* /*current*/,
                                                           unsigned int* /*pending*/) {
  return not_supported(Fn::nvmlDeviceGetDriverModel, device);
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetDriverModel_v2(nvmlDevice_t device, unsigned int* /*current*/,
                                                              unsigned int* /*pending*/) {
  return not_supported(Fn::nvmlDeviceGetDriverModel_v2, device);
}

// GPU operation modes exist on Kepler Tesla boards only.
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetGpuOperationMode(nvmlDevice_t device, unsigned int* /*current*/,
                                                                unsigned int* /*pending*/) {
  return not_supported(Fn::nvmlDeviceGetGpuOperationMode, device);
}

// Bridge chips sit on multi-GPU boards only; every simulated board carries one GPU.
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetBridgeChipInfo(nvmlDevice_t device,
                                                              nvmlBridgeChipHierarchy_t* /*hierarchy*/) {
  return not_supported(Fn::nvmlDeviceGetBridgeChipInfo, device);
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetInforomImageVersion(nvmlDevice_t device, char* version,
                                                                   unsigned int length) {
  return device_call(Fn::nvmlDeviceGetInforomImageVersion, device,
                     [&](Session&, DeviceState& d, Micros) -> nvmlReturn_t {
                       return copy_string(inforom_image_of(d.gpu.model()), version, length);
                     });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetInforomVersion(nvmlDevice_t device, unsigned int object, char* version,
                                                              unsigned int length) {
  return device_call(Fn::nvmlDeviceGetInforomVersion, device, [&](Session&, DeviceState& d, Micros) -> nvmlReturn_t {
    const auto& m = d.gpu.model();
    if (object >= NVML_INFOROM_COUNT) return NVML_ERROR_INVALID_ARGUMENT;
    switch (object) {
      case NVML_INFOROM_OEM:
        return copy_string(geforce(m) || pre_ampere(m) ? "1.1" : "2.1", version, length);
      case NVML_INFOROM_ECC:
        if (!has_ecc_memory(m)) return NVML_ERROR_NOT_SUPPORTED;
        return copy_string(inforom_ecc_object_of(m), version, length);
      default:
        // Kepler and newer need no power object; no simulated board encrypts DRAM.
        return NVML_ERROR_NOT_SUPPORTED;
    }
  });
}
// ---- architecture and MIG ----

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, unsigned int* arch) {
  return get_uint(Fn::nvmlDeviceGetArchitecture, device, arch,
                  [](DeviceState& d, Micros, unsigned& out) { return value(architecture_of(d.gpu.model()), out); });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int* major, int* minor) {
  return device_call(Fn::nvmlDeviceGetCudaComputeCapability, device, [&](Session&, DeviceState& d, Micros) {
    if (major == nullptr || minor == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    std::tie(*major, *minor) = compute_capability_of(d.gpu.model());
    return NVML_SUCCESS;
  });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* current,
                                                       unsigned int* pending) {
  return device_call(Fn::nvmlDeviceGetMigMode, device, [&](Session& s, DeviceState& d, Micros) {
    if (!mig_capable(d.gpu.model())) return NVML_ERROR_NOT_SUPPORTED;
    if (current == nullptr || pending == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    // A GPU under the scenario's `mig:` is in MIG mode for the whole run.
    *current = *pending = s.scenario().mig.enabled(d.gpu.index()) ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
    return NVML_SUCCESS;
  });
}

// ---- vGPU software licensing ----

// Bare metal licenses no vGPU software: the call succeeds with isGridLicenseSupported 0 and no
// features, which DCGM reports as DCGM_FI_DEV_VGPU_LICENSE_STATUS 0 (dcgm-exporter on bare-metal
// A30s). A scenario's `vgpu_license` makes the node a vGPU guest with one licensable feature,
// vGPU, licensed or not.
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetGridLicensableFeatures_v4(nvmlDevice_t device,
                                                                         nvmlGridLicensableFeatures_t* features) {
  return device_call(Fn::nvmlDeviceGetGridLicensableFeatures_v4, device, [&](Session& s, DeviceState&, Micros) {
    if (features == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *features = {};
    const std::optional<bool> licensed = s.scenario().vgpu_license;
    if (!licensed) return NVML_SUCCESS;
    features->isGridLicenseSupported = 1;
    features->licensableFeaturesCount = 1;
    nvmlGridLicensableFeature_t& f = features->gridLicensableFeatures[0];
    f.featureCode = NVML_GRID_LICENSE_FEATURE_CODE_VGPU;
    f.featureState = *licensed ? 1 : 0;
    f.featureEnabled = 1;
    (void)copy_string("NVIDIA Virtual Compute Server", f.productName, sizeof f.productName);
    f.licenseExpiry.status = *licensed ? NVML_GRID_LICENSE_EXPIRY_VALID : NVML_GRID_LICENSE_EXPIRY_NOT_AVAILABLE;
    return NVML_SUCCESS;
  });
}

// ---- accounting ----

// Accounting is off unless an administrator turns it on (nvidia-smi -am 1); no scenario does.
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetAccountingMode(nvmlDevice_t device, unsigned int* mode) {
  return constant(Fn::nvmlDeviceGetAccountingMode, device, mode, NVML_FEATURE_DISABLED);
}

// nvml.h says NOT_SUPPORTED "if ... accounting mode is disabled", but real drivers answer the
// buffer's size with accounting off (nvidia-smi -q prints 4000 next to "Accounting Mode:
// Disabled" on Tesla and GeForce boards alike).
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetAccountingBufferSize(nvmlDevice_t device, unsigned int* buffer_size) {
  return constant(Fn::nvmlDeviceGetAccountingBufferSize, device, buffer_size, 4000);
}

// Pids and stats need accounting on: "NOT_SUPPORTED if ... accounting mode is disabled".
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetAccountingPids(nvmlDevice_t device, unsigned int* /*count*/,
                                                              unsigned int* /*pids*/) {
  return not_supported(Fn::nvmlDeviceGetAccountingPids, device);
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetAccountingStats(nvmlDevice_t device, unsigned int /*pid*/,
                                                               nvmlAccountingStats_t* /*stats*/) {
  return not_supported(Fn::nvmlDeviceGetAccountingStats, device);
}

// ---- system ----

// The name a real driver reports is the process's command (argv[0]); a simulated job's process
// is started as the job's name (`gpumeter sim procfs` writes that as its cmdline). Processes
// exist from the job's start to its end, whatever their GPUs are doing.
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char* name, unsigned int length) {
  return system_call(Fn::nvmlSystemGetProcessName, [&](Session& s) -> nvmlReturn_t {
    if (name == nullptr || length == 0) return NVML_ERROR_INVALID_ARGUMENT;
    const auto& sc = s.scenario();
    const Micros now = s.now();
    for (const auto& job : sc.jobs) {
      if (now < job.start || now >= std::min(job.end, sc.duration)) continue;
      if (std::find(job.pids.begin(), job.pids.end(), pid) == job.pids.end()) continue;
      // "Returned process name is cropped to provided length."
      const std::size_t n = std::min<std::size_t>(job.name.size(), length - 1);
      std::copy_n(job.name.data(), n, name);
      name[n] = '\0';
      return NVML_SUCCESS;
    }
    return NVML_ERROR_NOT_FOUND;
  });
}
static_assert(std::is_same_v<decltype(&nvmlDeviceGetBrand), nvmlDeviceGetEnum_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetMinorNumber), nvmlDeviceGetUInt_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetBoardId), nvmlDeviceGetUInt_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetDriverModel_v2), nvmlDeviceGetEnumPair_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetBridgeChipInfo), nvmlDeviceGetBridgeChipInfo_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetInforomVersion), nvmlDeviceGetInforomVersion_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetInforomImageVersion), nvmlDeviceGetString_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetAccountingPids), nvmlDeviceGetAccountingPids_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetAccountingStats), nvmlDeviceGetAccountingStats_fn>);
static_assert(std::is_same_v<decltype(&nvmlSystemGetProcessName), nvmlSystemGetProcessName_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetArchitecture), nvmlDeviceGetEnum_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetCudaComputeCapability), nvmlDeviceGetCudaComputeCapability_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetMigMode), nvmlDeviceGetEnumPair_fn>);
static_assert(
    std::is_same_v<decltype(&nvmlDeviceGetGridLicensableFeatures_v4), nvmlDeviceGetGridLicensableFeatures_fn>);
