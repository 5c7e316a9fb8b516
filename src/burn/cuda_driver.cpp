#include "burn/cuda_driver.h"

#include <fmt/format.h>

namespace gpumeter::burn {

namespace {

template <typename Fn>
void resolve_one(const SymbolSource& lib, const char* name, Fn& out, std::string& missing) {
  out = reinterpret_cast<Fn>(lib.symbol(name));
  if (out == nullptr) missing += fmt::format(" {}", name);
}

}  // namespace

Result<CudaSymbols> CudaSymbols::resolve(const SymbolSource& lib) {
  CudaSymbols s;
  std::string missing;
  resolve_one(lib, "cuInit", s.init, missing);
  resolve_one(lib, "cuDriverGetVersion", s.driver_version, missing);
  resolve_one(lib, "cuGetErrorString", s.error_string, missing);
  resolve_one(lib, "cuDeviceGetCount", s.device_count, missing);
  resolve_one(lib, "cuDeviceGet", s.device_get, missing);
  resolve_one(lib, "cuDeviceGetName", s.device_name, missing);
  // cuDeviceGetUuid_v2 since CUDA 11.4; the unversioned one answers the same for a whole GPU.
  s.device_uuid = reinterpret_cast<cuDeviceGetUuid_fn>(lib.symbol("cuDeviceGetUuid_v2"));
  if (s.device_uuid == nullptr) resolve_one(lib, "cuDeviceGetUuid", s.device_uuid, missing);
  resolve_one(lib, "cuDeviceGetAttribute", s.device_attribute, missing);
  resolve_one(lib, "cuCtxCreate_v2", s.ctx_create, missing);
  resolve_one(lib, "cuCtxDestroy_v2", s.ctx_destroy, missing);
  resolve_one(lib, "cuCtxSynchronize", s.ctx_synchronize, missing);
  resolve_one(lib, "cuModuleLoadData", s.module_load_data, missing);
  resolve_one(lib, "cuModuleGetFunction", s.module_get_function, missing);
  resolve_one(lib, "cuMemAlloc_v2", s.mem_alloc, missing);
  resolve_one(lib, "cuMemFree_v2", s.mem_free, missing);
  resolve_one(lib, "cuMemsetD8_v2", s.memset_d8, missing);
  resolve_one(lib, "cuLaunchKernel", s.launch_kernel, missing);
  resolve_one(lib, "cuEventCreate", s.event_create, missing);
  resolve_one(lib, "cuEventRecord", s.event_record, missing);
  resolve_one(lib, "cuEventSynchronize", s.event_synchronize, missing);
  resolve_one(lib, "cuEventElapsedTime", s.event_elapsed_time, missing);
  resolve_one(lib, "cuEventDestroy_v2", s.event_destroy, missing);
  if (!missing.empty()) return Error{0, fmt::format("{} lacks CUDA driver entry points:{}", lib.path(), missing)};
  return s;
}

Error cuda_error(const CudaSymbols& cuda, const char* call, CUresult r) {
  const char* text = nullptr;
  if (cuda.error_string == nullptr || cuda.error_string(r, &text) != CUDA_SUCCESS || text == nullptr)
    text = "unknown error";
  return Error{r, fmt::format("{}: {} (CUDA error {})", call, text, r)};
}

std::vector<std::string> cuda_library_candidates(const std::string& explicit_path) {
  if (!explicit_path.empty()) return {explicit_path};
  return {"libcuda.so.1", "libcuda.so"};
}

}  // namespace gpumeter::burn
