#pragma once
// The subset of the CUDA driver API (cuda.h) that `gpumeter burn` calls, declared by the
// project itself so that building needs no CUDA toolkit: burn dlopen()s libcuda.so.1, which
// every NVIDIA driver installs. Types, constants and the versioned entry-point names follow
// cuda.h (CUDA 12); the simulated driver (src/sim/cuda) implements exactly these functions.

#include <cstddef>

extern "C" {

typedef int CUresult;  // a C enum in cuda.h
typedef int CUdevice;
typedef struct CUctx_st* CUcontext;
typedef struct CUmod_st* CUmodule;
typedef struct CUfunc_st* CUfunction;
typedef struct CUstream_st* CUstream;
typedef struct CUevent_st* CUevent;
typedef unsigned long long CUdeviceptr;  // CUdeviceptr_v2: 64 bits on every 64-bit platform
struct CUuuid {
  char bytes[16];
};

enum : CUresult {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_IMAGE = 200,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_INVALID_PTX = 218,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_NOT_READY = 600,
  CUDA_ERROR_NOT_SUPPORTED = 801,
  CUDA_ERROR_UNKNOWN = 999,
};

enum : int { CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16 };

typedef CUresult (*cuInit_fn)(unsigned int flags);
typedef CUresult (*cuDriverGetVersion_fn)(int* version);
typedef CUresult (*cuGetErrorString_fn)(CUresult error, const char** text);
typedef CUresult (*cuDeviceGetCount_fn)(int* count);
typedef CUresult (*cuDeviceGet_fn)(CUdevice* device, int ordinal);
typedef CUresult (*cuDeviceGetName_fn)(char* name, int length, CUdevice device);
typedef CUresult (*cuDeviceGetUuid_fn)(CUuuid* uuid, CUdevice device);  // cuDeviceGetUuid_v2
typedef CUresult (*cuDeviceGetAttribute_fn)(int* value, int attribute, CUdevice device);
typedef CUresult (*cuDeviceTotalMem_fn)(std::size_t* bytes, CUdevice device);                 // _v2
typedef CUresult (*cuCtxCreate_fn)(CUcontext* context, unsigned int flags, CUdevice device);  // _v2
typedef CUresult (*cuCtxDestroy_fn)(CUcontext context);                                       // _v2
typedef CUresult (*cuCtxSetCurrent_fn)(CUcontext context);
typedef CUresult (*cuCtxSynchronize_fn)();
typedef CUresult (*cuModuleLoadData_fn)(CUmodule* module, const void* image);
typedef CUresult (*cuModuleUnload_fn)(CUmodule module);
typedef CUresult (*cuModuleGetFunction_fn)(CUfunction* function, CUmodule module, const char* name);
typedef CUresult (*cuMemAlloc_fn)(CUdeviceptr* pointer, std::size_t bytes);                  // _v2
typedef CUresult (*cuMemFree_fn)(CUdeviceptr pointer);                                       // _v2
typedef CUresult (*cuMemsetD8_fn)(CUdeviceptr pointer, unsigned char value, std::size_t n);  // _v2
typedef CUresult (*cuEventCreate_fn)(CUevent* event, unsigned int flags);
typedef CUresult (*cuEventRecord_fn)(CUevent event, CUstream stream);
typedef CUresult (*cuEventSynchronize_fn)(CUevent event);
typedef CUresult (*cuEventElapsedTime_fn)(float* milliseconds, CUevent start, CUevent end);
typedef CUresult (*cuEventDestroy_fn)(CUevent event);  // _v2
typedef CUresult (*cuLaunchKernel_fn)(CUfunction function, unsigned int grid_x, unsigned int grid_y,
                                      unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                                      unsigned int block_z, unsigned int shared_bytes, CUstream stream, void** params,
                                      void** extra);

}  // extern "C"
