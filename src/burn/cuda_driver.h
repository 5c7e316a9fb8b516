#pragma once
// The CUDA driver API calls `gpumeter burn` makes, resolved from libcuda.so.1 (or the
// simulated driver) at run time, with every CUresult turned into an Error that names the call.

#include <memory>
#include <string>

#include "backend/dynamic_library.h"
#include "abi/cuda_api.h"
#include "util/result.h"

namespace gpumeter::burn {

struct CudaSymbols {
  cuInit_fn init = nullptr;
  cuDriverGetVersion_fn driver_version = nullptr;
  cuGetErrorString_fn error_string = nullptr;
  cuDeviceGetCount_fn device_count = nullptr;
  cuDeviceGet_fn device_get = nullptr;
  cuDeviceGetName_fn device_name = nullptr;
  cuDeviceGetUuid_fn device_uuid = nullptr;
  cuDeviceGetAttribute_fn device_attribute = nullptr;
  cuCtxCreate_fn ctx_create = nullptr;
  cuCtxDestroy_fn ctx_destroy = nullptr;
  cuCtxSynchronize_fn ctx_synchronize = nullptr;
  cuModuleLoadData_fn module_load_data = nullptr;
  cuModuleGetFunction_fn module_get_function = nullptr;
  cuMemAlloc_fn mem_alloc = nullptr;
  cuMemFree_fn mem_free = nullptr;
  cuMemsetD8_fn memset_d8 = nullptr;
  cuLaunchKernel_fn launch_kernel = nullptr;
  cuEventCreate_fn event_create = nullptr;
  cuEventRecord_fn event_record = nullptr;
  cuEventSynchronize_fn event_synchronize = nullptr;
  cuEventElapsedTime_fn event_elapsed_time = nullptr;
  cuEventDestroy_fn event_destroy = nullptr;

  // Every symbol is required; the error lists those the library lacks.
  static Result<CudaSymbols> resolve(const SymbolSource& lib);
};

// An Error for a failed call: "<call>: <the driver's text> (CUDA error <code>)".
Error cuda_error(const CudaSymbols& cuda, const char* call, CUresult r);

// The candidates for the driver library: `explicit_path`, else libcuda.so.1 then libcuda.so.
std::vector<std::string> cuda_library_candidates(const std::string& explicit_path);

}  // namespace gpumeter::burn
