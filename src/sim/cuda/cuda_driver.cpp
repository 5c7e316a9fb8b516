// The simulated CUDA driver: a drop-in libcuda.so.1 with the calls `gpumeter burn` makes, over
// the same scenario as the simulated NVML. It runs no code: a module is PTX text whose entries
// it lists, and the one kernel it can run is burn's spin kernel (an entry with a single .u64
// parameter), which it runs for that many nanoseconds of wall time. Each context, allocation
// and kernel is appended to this process's log in GPUMETER_SIM_CUDA_DIR (sim/physics/live.h),
// where the simulated NVML finds it: the process shows up on its GPU under its real pid, with
// its memory, busy exactly while its kernels run. Behaviours and their sources:
// docs/simulator.md, "The simulated CUDA driver".

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "abi/cuda_api.h"
#include "sim/scenario/env_config.h"
#include "util/split.h"

#define GPUMETER_CUDA_EXPORT extern "C" __attribute__((visibility("default")))

struct CUctx_st {
  unsigned gpu = 0;  // NVML index
  std::int64_t last_end_ns = 0;
  std::map<CUdeviceptr, std::size_t> allocations;
  std::uint64_t allocated = 0;
};
struct CUmod_st {
  // Entry name -> whether it is a spin kernel (exactly one .u64 parameter).
  std::map<std::string, bool, std::less<>> entries;
};
// An event stands where it was recorded in its context's stream: the GPU reaches it when the
// work queued before it ends.
struct CUevent_st {
  CUctx_st* ctx = nullptr;
  std::int64_t at_ns = -1;  // -1: never recorded
};
struct CUfunc_st {
  std::string name;
  bool spin = false;
};

namespace gpumeter::sim {
namespace {

// Streaming multiprocessors by architecture, for CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: the
// SXM boards' counts (H100 132, A100 108, V100 80); an assumption for other boards.
int sm_count(const GpuModelSpec& m) {
  if (m.architecture == "hopper") return 132;
  if (m.architecture == "blackwell") return 148;
  if (m.architecture == "ga100") return 108;
  if (m.architecture == "volta") return 80;
  return 84;
}

// The 16 bytes of a "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" UUID.
CUuuid uuid_bytes(std::string_view uuid) {
  CUuuid out{};
  if (uuid.substr(0, 4) == "GPU-") uuid.remove_prefix(4);
  unsigned n = 0;
  int half = -1;
  for (char c : uuid) {
    int v = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (v < 0) continue;
    if (half < 0) {
      half = v;
    } else if (n < sizeof out.bytes) {
      out.bytes[n++] = static_cast<char>(half << 4 | v);
      half = -1;
    }
  }
  return out;
}

// The entries of a PTX module and whether each is a spin kernel.
std::optional<std::map<std::string, bool, std::less<>>> ptx_entries(std::string_view ptx) {
  if (ptx.find(".version") == std::string_view::npos || ptx.find(".target") == std::string_view::npos) return {};
  std::map<std::string, bool, std::less<>> entries;
  for (std::size_t at = ptx.find(".entry"); at != std::string_view::npos; at = ptx.find(".entry", at + 6)) {
    std::size_t name_begin = ptx.find_first_not_of(" \t\r\n", at + 6);
    std::size_t name_end = ptx.find_first_of(" \t\r\n(", name_begin);
    std::size_t open = ptx.find('(', name_end);
    std::size_t close = ptx.find(')', open);
    if (name_begin == std::string_view::npos || open == std::string_view::npos || close == std::string_view::npos)
      return {};
    std::string_view params = ptx.substr(open + 1, close - open - 1);
    std::size_t count = 0;
    for (std::size_t p = params.find(".param"); p != std::string_view::npos; p = params.find(".param", p + 6)) ++count;
    entries[std::string(ptx.substr(name_begin, name_end - name_begin))] =
        count == 1 && params.find(".u64") != std::string_view::npos;
  }
  if (entries.empty()) return {};
  return entries;
}

class Driver {
 public:
  static Driver& instance() {
    static Driver* d = new Driver();  // never destroyed: kernels may still be "running" at exit
    return *d;
  }

  CUresult init() {
    std::lock_guard lock(mu_);
    if (scenario_) return CUDA_SUCCESS;
    auto setup = load_sim_setup([](const char* name) { return std::getenv(name); });
    if (!setup) {
      std::fprintf(stderr, "gpumeter-sim (cuda): %s\n", setup.error().message.c_str());
      return CUDA_ERROR_NO_DEVICE;
    }
    scenario_ = std::make_unique<Scenario>(std::move(setup->scenario));
    dir_ = setup->env.cuda_dir;
    devices_ = visible_devices(*scenario_, std::getenv("CUDA_VISIBLE_DEVICES"));
    return CUDA_SUCCESS;
  }

  bool initialized() const {
    std::lock_guard lock(mu_);
    return scenario_ != nullptr;
  }
  const Scenario& scenario() const { return *scenario_; }
  int device_count() const { return static_cast<int>(devices_.size()); }
  // The NVML index of a CUDA device ordinal.
  std::optional<unsigned> gpu(CUdevice d) const {
    if (d < 0 || d >= device_count()) return std::nullopt;
    return devices_[static_cast<std::size_t>(d)];
  }

  // Appends one event to this process's log; false when the log cannot be written.
  bool log(const std::string& line) {
    std::lock_guard lock(mu_);
    if (log_fd_ < 0) {
      ::mkdir(dir_.c_str(), 01777);
      log_fd_ = ::open(fmt::format("{}/{}.log", dir_, ::getpid()).c_str(),
                       O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
      if (log_fd_ < 0) {
        std::fprintf(stderr, "gpumeter-sim (cuda): cannot write %s/%d.log: %s\n", dir_.c_str(), ::getpid(),
                     std::strerror(errno));
        return false;
      }
    }
    return ::write(log_fd_, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  }

 private:
  Driver() = default;

  // The NVIDIA GPUs of the scenario in NVML order, narrowed and reordered by
  // CUDA_VISIBLE_DEVICES (indices or UUIDs, comma-separated; the list ends at the first entry
  // that names no GPU, as the real driver's does).
  static std::vector<unsigned> visible_devices(const Scenario& s, const char* visible) {
    std::vector<unsigned> all;
    for (unsigned i = 0; i < s.gpus.size(); ++i) {
      if (!s.is_amd(i)) all.push_back(i);
    }
    if (visible == nullptr) return all;
    std::vector<unsigned> out;
    for (std::string_view item : split(visible, ',')) {
      std::optional<unsigned> found;
      if (item.substr(0, 4) == "GPU-") {
        for (unsigned g : all) {
          if (std::string_view(s.gpus[g].uuid).substr(0, item.size()) == item) found = g;
        }
      } else {
        char* end = nullptr;
        const std::string text(item);
        const unsigned long v = std::strtoul(text.c_str(), &end, 10);
        if (!text.empty() && *end == '\0' && v < all.size()) found = all[v];
      }
      if (!found || std::find(out.begin(), out.end(), *found) != out.end()) break;
      out.push_back(*found);
    }
    return out;
  }

  mutable std::mutex mu_;
  std::unique_ptr<Scenario> scenario_;
  std::string dir_;
  std::vector<unsigned> devices_;
  int log_fd_ = -1;
};

thread_local CUcontext current = nullptr;

Driver& driver() { return Driver::instance(); }

template <typename Body>
CUresult call(Body&& body) noexcept {
  try {
    if (!driver().initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    return body(driver());
  } catch (...) {
    return CUDA_ERROR_UNKNOWN;
  }
}

template <typename Body>
CUresult device_call(CUdevice device, Body&& body) noexcept {
  return call([&](Driver& d) -> CUresult {
    auto gpu = d.gpu(device);
    if (!gpu) return CUDA_ERROR_INVALID_DEVICE;
    return body(d, d.scenario().model_of(*gpu), *gpu);
  });
}

template <typename Body>
CUresult context_call(Body&& body) noexcept {
  return call([&](Driver& d) -> CUresult {
    if (current == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
    return body(d, *current);
  });
}

std::int64_t us(std::int64_t ns) { return ns / 1000; }

// Blocks until the wall clock reaches `unix_ns`: the GPU reaching a point of a stream.
void wait_until(std::int64_t unix_ns) {
  const timespec until{static_cast<time_t>(unix_ns / 1'000'000'000), static_cast<long>(unix_ns % 1'000'000'000)};
  while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &until, nullptr) == EINTR) {
  }
}

}  // namespace
}  // namespace gpumeter::sim

using gpumeter::sim::call;
using gpumeter::sim::context_call;
using gpumeter::sim::device_call;
using gpumeter::sim::Driver;
using gpumeter::sim::GpuModelSpec;

GPUMETER_CUDA_EXPORT CUresult cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  try {
    return gpumeter::sim::driver().init();
  } catch (...) {
    return CUDA_ERROR_UNKNOWN;
  }
}

GPUMETER_CUDA_EXPORT CUresult cuDriverGetVersion(int* version) {
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  // Answered before cuInit, as the real driver does.
  *version = 12040;
  if (gpumeter::sim::driver().initialized() && gpumeter::sim::driver().scenario().cuda_driver_version > 0)
    *version = gpumeter::sim::driver().scenario().cuda_driver_version;
  return CUDA_SUCCESS;
}

GPUMETER_CUDA_EXPORT CUresult cuGetErrorString(CUresult error, const char** text) {
  if (text == nullptr) return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
    case CUDA_SUCCESS:
      *text = "no error";
      break;
    case CUDA_ERROR_INVALID_VALUE:
      *text = "invalid argument";
      break;
    case CUDA_ERROR_OUT_OF_MEMORY:
      *text = "out of memory";
      break;
    case CUDA_ERROR_NOT_INITIALIZED:
      *text = "initialization error";
      break;
    case CUDA_ERROR_NO_DEVICE:
      *text = "no CUDA-capable device is detected";
      break;
    case CUDA_ERROR_INVALID_DEVICE:
      *text = "invalid device ordinal";
      break;
    case CUDA_ERROR_INVALID_IMAGE:
      *text = "device kernel image is invalid";
      break;
    case CUDA_ERROR_INVALID_CONTEXT:
      *text = "invalid device context";
      break;
    case CUDA_ERROR_INVALID_PTX:
      *text = "a PTX JIT compilation failed";
      break;
    case CUDA_ERROR_INVALID_HANDLE:
      *text = "invalid resource handle";
      break;
    case CUDA_ERROR_NOT_FOUND:
      *text = "named symbol not found";
      break;
    case CUDA_ERROR_NOT_READY:
      *text = "device not ready";
      break;
    case CUDA_ERROR_NOT_SUPPORTED:
      *text = "operation not supported";
      break;
    case CUDA_ERROR_UNKNOWN:
      *text = "unknown error";
      break;
    default:
      *text = nullptr;
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

GPUMETER_CUDA_EXPORT CUresult cuDeviceGetCount(int* count) {
  return call([&](Driver& d) {
    if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *count = d.device_count();
    return CUDA_SUCCESS;
  });
}

GPUMETER_CUDA_EXPORT CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  return call([&](Driver& d) {
    if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (!d.gpu(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
  });
}

GPUMETER_CUDA_EXPORT CUresult cuDeviceGetName(char* name, int length, CUdevice device) {
  return device_call(device, [&](Driver&, const GpuModelSpec& m, unsigned) {
    if (name == nullptr || length <= 0) return CUDA_ERROR_INVALID_VALUE;
    // The real driver truncates to the buffer.
    const std::size_t n = std::min(m.name.size(), static_cast<std::size_t>(length - 1));
    std::memcpy(name, m.name.data(), n);
    name[n] = '\0';
    return CUDA_SUCCESS;
  });
}

GPUMETER_CUDA_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice device) {
  return device_call(device, [&](Driver& d, const GpuModelSpec&, unsigned gpu) {
    if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *uuid = gpumeter::sim::uuid_bytes(d.scenario().gpus[gpu].uuid);
    return CUDA_SUCCESS;
  });
}

GPUMETER_CUDA_EXPORT CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice device) {
  return cuDeviceGetUuid_v2(uuid, device);
}

GPUMETER_CUDA_EXPORT CUresult cuDeviceGetAttribute(int* value, int attribute, CUdevice device) {
  return device_call(device, [&](Driver&, const GpuModelSpec& m, unsigned) {
    if (value == nullptr || attribute != CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT) return CUDA_ERROR_INVALID_VALUE;
    *value = gpumeter::sim::sm_count(m);
    return CUDA_SUCCESS;
  });
}

GPUMETER_CUDA_EXPORT CUresult cuDeviceTotalMem_v2(std::size_t* bytes, CUdevice device) {
  return device_call(device, [&](Driver&, const GpuModelSpec& m, unsigned) {
    if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *bytes = m.memory_total_bytes;
    return CUDA_SUCCESS;
  });
}

GPUMETER_CUDA_EXPORT CUresult cuCtxCreate_v2(CUcontext* context, unsigned int flags, CUdevice device) {
  (void)flags;
  return device_call(device, [&](Driver& d, const GpuModelSpec&, unsigned gpu) {
    if (context == nullptr) return CUDA_ERROR_INVALID_VALUE;
    auto ctx = std::make_unique<CUctx_st>();
    ctx->gpu = gpu;
    if (!d.log(fmt::format("ctx {} {}\n", gpu, gpumeter::sim::us(gpumeter::sim::ScenarioClock::wall_now_ns()))))
      return CUDA_ERROR_UNKNOWN;
    *context = ctx.release();
    gpumeter::sim::current = *context;
    return CUDA_SUCCESS;
  });
}

GPUMETER_CUDA_EXPORT CUresult cuCtxDestroy_v2(CUcontext context) {
  return call([&](Driver& d) {
    if (context == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::unique_ptr<CUctx_st> ctx(context);
    // Destroying a context waits for its work, as the real driver does.
    gpumeter::sim::wait_until(ctx->last_end_ns);
    d.log(fmt::format("end {} {}\n", ctx->gpu, gpumeter::sim::us(gpumeter::sim::ScenarioClock::wall_now_ns())));
    if (gpumeter::sim::current == context) gpumeter::sim::current = nullptr;
    return CUDA_SUCCESS;
  });
}

GPUMETER_CUDA_EXPORT CUresult cuCtxSetCurrent(CUcontext context) {
  return call([&](Driver&) {
    gpumeter::sim::current = context;
    return CUDA_SUCCESS;
  });
}

GPUMETER_CUDA_EXPORT CUresult cuCtxSynchronize() {
  return context_call([&](Driver&, CUctx_st& ctx) {
    gpumeter::sim::wait_until(ctx.last_end_ns);
    return CUDA_SUCCESS;
  });
}

GPUMETER_CUDA_EXPORT CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  return context_call([&](Driver&, CUctx_st&) {
    if (module == nullptr || image == nullptr) return CUDA_ERROR_INVALID_VALUE;
    auto entries = gpumeter::sim::ptx_entries(static_cast<const char*>(image));
    if (!entries) return CUDA_ERROR_INVALID_PTX;
    *module = new CUmod_st{std::move(*entries)};
    return CUDA_SUCCESS;
  });
}

GPUMETER_CUDA_EXPORT CUresult cuModuleUnload(CUmodule module) {
  return call([&](Driver&) {
    if (module == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    delete module;
    return CUDA_SUCCESS;
  });
}

GPUMETER_CUDA_EXPORT CUresult cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
  return context_call([&](Driver&, CUctx_st&) {
    if (function == nullptr || module == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
    auto it = module->entries.find(std::string_view(name));
    if (it == module->entries.end()) return CUDA_ERROR_NOT_FOUND;
    *function = new CUfunc_st{it->first, it->second};  // lives as long as the process, as the module's would
    return CUDA_SUCCESS;
  });
}

GPUMETER_CUDA_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* pointer, std::size_t bytes) {
  return context_call([&](Driver& d, CUctx_st& ctx) {
    if (pointer == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    const GpuModelSpec& m = d.scenario().model_of(ctx.gpu);
    if (ctx.allocated + bytes > m.memory_total_bytes - m.memory_reserved_bytes) return CUDA_ERROR_OUT_OF_MEMORY;
    static CUdeviceptr next = 0x7f0000000000ULL;
    const CUdeviceptr p = next;
    next += (bytes + 0xFFFFF) & ~CUdeviceptr{0xFFFFF};
    ctx.allocations[p] = bytes;
    ctx.allocated += bytes;
    d.log(fmt::format("mem {} {} {}\n", ctx.gpu, gpumeter::sim::us(gpumeter::sim::ScenarioClock::wall_now_ns()),
                      ctx.allocated));
    *pointer = p;
    return CUDA_SUCCESS;
  });
}

GPUMETER_CUDA_EXPORT CUresult cuMemFree_v2(CUdeviceptr pointer) {
  return context_call([&](Driver& d, CUctx_st& ctx) {
    auto it = ctx.allocations.find(pointer);
    if (it == ctx.allocations.end()) return CUDA_ERROR_INVALID_VALUE;
    ctx.allocated -= it->second;
    ctx.allocations.erase(it);
    d.log(fmt::format("mem {} {} {}\n", ctx.gpu, gpumeter::sim::us(gpumeter::sim::ScenarioClock::wall_now_ns()),
                      ctx.allocated));
    return CUDA_SUCCESS;
  });
}

GPUMETER_CUDA_EXPORT CUresult cuMemsetD8_v2(CUdeviceptr pointer, unsigned char, std::size_t n) {
  return context_call([&](Driver&, CUctx_st& ctx) {
    auto it = ctx.allocations.upper_bound(pointer);
    if (it == ctx.allocations.begin()) return CUDA_ERROR_INVALID_VALUE;
    --it;
    if (pointer + n > it->first + it->second) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
  });
}

GPUMETER_CUDA_EXPORT CUresult cuEventCreate(CUevent* event, unsigned int) {
  return context_call([&](Driver&, CUctx_st& ctx) {
    if (event == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *event = new CUevent_st{&ctx, -1};
    return CUDA_SUCCESS;
  });
}

GPUMETER_CUDA_EXPORT CUresult cuEventRecord(CUevent event, CUstream stream) {
  return context_call([&](Driver&, CUctx_st& ctx) {
    if (event == nullptr || event->ctx != &ctx) return CUDA_ERROR_INVALID_HANDLE;
    if (stream != nullptr) return CUDA_ERROR_NOT_SUPPORTED;
    event->at_ns = std::max(gpumeter::sim::ScenarioClock::wall_now_ns(), ctx.last_end_ns);
    return CUDA_SUCCESS;
  });
}

GPUMETER_CUDA_EXPORT CUresult cuEventSynchronize(CUevent event) {
  return call([&](Driver&) {
    if (event == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    if (event->at_ns < 0) return CUDA_SUCCESS;  // never recorded: nothing to wait for
    gpumeter::sim::wait_until(event->at_ns);
    return CUDA_SUCCESS;
  });
}

GPUMETER_CUDA_EXPORT CUresult cuEventElapsedTime(float* milliseconds, CUevent start, CUevent end) {
  return call([&](Driver&) {
    if (milliseconds == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (start == nullptr || end == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    if (start->at_ns < 0 || end->at_ns < 0) return CUDA_ERROR_INVALID_HANDLE;
    if (std::max(start->at_ns, end->at_ns) > gpumeter::sim::ScenarioClock::wall_now_ns()) return CUDA_ERROR_NOT_READY;
    *milliseconds = static_cast<float>(static_cast<double>(end->at_ns - start->at_ns) / 1e6);
    return CUDA_SUCCESS;
  });
}

GPUMETER_CUDA_EXPORT CUresult cuEventDestroy_v2(CUevent event) {
  return call([&](Driver&) {
    if (event == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    delete event;
    return CUDA_SUCCESS;
  });
}

GPUMETER_CUDA_EXPORT CUresult cuLaunchKernel(CUfunction function, unsigned int grid_x, unsigned int grid_y,
                                             unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                                             unsigned int block_z, unsigned int, CUstream stream, void** params,
                                             void** extra) {
  return context_call([&](Driver& d, CUctx_st& ctx) {
    if (function == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    if (grid_x * grid_y * grid_z == 0 || block_x * block_y * block_z == 0 || block_x * block_y * block_z > 1024)
      return CUDA_ERROR_INVALID_VALUE;
    if (stream != nullptr || extra != nullptr) return CUDA_ERROR_NOT_SUPPORTED;
    if (!function->spin) return CUDA_ERROR_NOT_SUPPORTED;
    if (params == nullptr || params[0] == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::uint64_t spin_ns = 0;
    std::memcpy(&spin_ns, params[0], sizeof spin_ns);
    // Work on one context runs in launch order: a kernel starts when the last one ends.
    const std::int64_t start = std::max(gpumeter::sim::ScenarioClock::wall_now_ns(), ctx.last_end_ns);
    ctx.last_end_ns = start + static_cast<std::int64_t>(spin_ns);
    d.log(fmt::format("run {} {} {}\n", ctx.gpu, gpumeter::sim::us(start), gpumeter::sim::us(ctx.last_end_ns)));
    return CUDA_SUCCESS;
  });
}
