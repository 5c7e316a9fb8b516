#include "burn/burn.h"

#include <algorithm>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "burn/spin_kernel.h"

namespace gpumeter::burn {

namespace {

using Clock = std::chrono::steady_clock;

double unix_now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

// One GPU's context, module and memory, released in reverse on every path.
class GpuSession {
 public:
  GpuSession(const CudaSymbols& cuda, int ordinal) : cuda_(cuda), ordinal_(ordinal) {}
  GpuSession(const GpuSession&) = delete;
  GpuSession& operator=(const GpuSession&) = delete;
  ~GpuSession() { release(); }

  Result<void> open(GpuBurn& out, std::uint64_t memory_bytes) {
    CUdevice dev = 0;
    if (CUresult r = cuda_.device_get(&dev, ordinal_); r != CUDA_SUCCESS) return fail("cuDeviceGet", r);
    char name[256] = {};
    if (CUresult r = cuda_.device_name(name, sizeof name, dev); r != CUDA_SUCCESS) return fail("cuDeviceGetName", r);
    out.name = name;
    CUuuid uuid{};
    if (CUresult r = cuda_.device_uuid(&uuid, dev); r != CUDA_SUCCESS) return fail("cuDeviceGetUuid", r);
    out.uuid = format_uuid(uuid);
    if (CUresult r = cuda_.device_attribute(&sms_, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev); r != CUDA_SUCCESS)
      return fail("cuDeviceGetAttribute", r);
    if (CUresult r = cuda_.ctx_create(&ctx_, 0, dev); r != CUDA_SUCCESS) return fail("cuCtxCreate", r);
    out.start_unix = unix_now();
    for (CUevent* e : {&before_, &after_}) {
      if (CUresult r = cuda_.event_create(e, 0); r != CUDA_SUCCESS) return fail("cuEventCreate", r);
    }
    CUmodule module = nullptr;
    if (CUresult r = cuda_.module_load_data(&module, kSpinPtx); r != CUDA_SUCCESS) return fail("cuModuleLoadData", r);
    if (CUresult r = cuda_.module_get_function(&spin_, module, kSpinEntry); r != CUDA_SUCCESS)
      return fail("cuModuleGetFunction", r);
    if (memory_bytes > 0) {
      if (CUresult r = cuda_.mem_alloc(&memory_, memory_bytes); r != CUDA_SUCCESS) return fail("cuMemAlloc", r);
      // Written once, so that the pages are resident, not just reserved.
      if (CUresult r = cuda_.memset_d8(memory_, 0, memory_bytes); r != CUDA_SUCCESS) return fail("cuMemsetD8", r);
      if (CUresult r = cuda_.ctx_synchronize(); r != CUDA_SUCCESS) return fail("cuCtxSynchronize", r);
      out.memory_bytes = memory_bytes;
    }
    return {};
  }

  // Runs the spin kernel for `spin`, waits for it, and returns how long the GPU ran it: the
  // time between events recorded around it, which no host-side delay adds to.
  Result<double> spin(std::chrono::nanoseconds spin) {
    std::uint64_t ns = static_cast<std::uint64_t>(spin.count());
    void* params[] = {&ns};
    const unsigned blocks = static_cast<unsigned>(std::max(sms_, 1));
    if (CUresult r = cuda_.event_record(before_, nullptr); r != CUDA_SUCCESS) return fail("cuEventRecord", r);
    if (CUresult r = cuda_.launch_kernel(spin_, blocks, 1, 1, kSpinThreadsPerBlock, 1, 1, 0, nullptr, params, nullptr);
        r != CUDA_SUCCESS)
      return fail("cuLaunchKernel", r);
    if (CUresult r = cuda_.event_record(after_, nullptr); r != CUDA_SUCCESS) return fail("cuEventRecord", r);
    if (CUresult r = cuda_.event_synchronize(after_); r != CUDA_SUCCESS) return fail("cuEventSynchronize", r);
    float ms = 0;
    if (CUresult r = cuda_.event_elapsed_time(&ms, before_, after_); r != CUDA_SUCCESS)
      return fail("cuEventElapsedTime", r);
    return ms / 1000.0;
  }

  // Frees the memory and destroys the context; the time it was destroyed.
  double release() {
    if (ctx_ == nullptr) return 0;
    if (memory_ != 0) cuda_.mem_free(memory_);
    memory_ = 0;
    for (CUevent* e : {&before_, &after_}) {
      if (*e != nullptr) cuda_.event_destroy(*e);
      *e = nullptr;
    }
    cuda_.ctx_destroy(ctx_);  // also unloads the module
    ctx_ = nullptr;
    return unix_now();
  }

 private:
  Error fail(const char* call, CUresult r) const {
    Error e = cuda_error(cuda_, call, r);
    e.message = fmt::format("GPU {}: {}", ordinal_, e.message);
    return e;
  }

  const CudaSymbols& cuda_;
  int ordinal_;
  int sms_ = 1;
  CUcontext ctx_ = nullptr;
  CUfunction spin_ = nullptr;
  CUdeviceptr memory_ = 0;
  CUevent before_ = nullptr, after_ = nullptr;
};

// The busy loop on one GPU: period after period until the duration is over or `stop`.
Result<void> run_loop(GpuSession& gpu, const BurnOptions& o, const std::atomic<bool>& stop, GpuBurn& out,
                      const BurnProgress& progress) {
  const Clock::time_point begin = Clock::now();
  const Clock::time_point end = begin + o.duration;
  const auto busy_per_period = o.period * o.duty_percent / 100;
  Clock::time_point next_progress = begin + std::chrono::seconds(10);
  for (Clock::time_point period_start = begin; period_start < end && !stop.load(); period_start += o.period) {
    const auto busy = std::min<std::chrono::nanoseconds>(busy_per_period, end - period_start);
    if (busy.count() > 0) {
      auto ran = gpu.spin(o.half_duty_fault ? busy / 2 : busy);
      if (!ran) return ran.error();
      out.busy_seconds += o.half_duty_fault ? std::chrono::duration<double>(busy).count() : *ran;
      ++out.kernels;
    }
    std::this_thread::sleep_until(std::min(period_start + o.period, end));
    if (progress && Clock::now() >= next_progress) {
      next_progress += std::chrono::seconds(10);
      progress(fmt::format("GPU {}: {:.0f} of {:.0f} s, busy {:.1f} s", out.ordinal,
                           std::chrono::duration<double>(Clock::now() - begin).count(),
                           std::chrono::duration<double>(o.duration).count(), out.busy_seconds));
    }
  }
  out.run_seconds = std::chrono::duration<double>(std::min(Clock::now(), end) - begin).count();
  return {};
}

Result<void> burn_one(const CudaSymbols& cuda, const BurnOptions& o, const std::atomic<bool>& stop, GpuBurn& out,
                      const BurnProgress& progress) {
  GpuSession gpu(cuda, out.ordinal);
  if (auto r = gpu.open(out, o.memory_bytes); !r) return r;
  auto r = run_loop(gpu, o, stop, out, progress);
  out.end_unix = gpu.release();
  return r;
}

}  // namespace

std::string format_uuid(const CUuuid& uuid) {
  std::string hex;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) hex += '-';
    hex += fmt::format("{:02x}", static_cast<unsigned char>(uuid.bytes[i]));
  }
  return "GPU-" + hex;
}

Result<BurnReport> run_burn(const CudaSymbols& cuda, const BurnOptions& options, const std::atomic<bool>& stop,
                            const BurnProgress& progress) {
  if (CUresult r = cuda.init(0); r != CUDA_SUCCESS) return cuda_error(cuda, "cuInit", r);
  BurnReport report;
  cuda.driver_version(&report.driver_version);
  int count = 0;
  if (CUresult r = cuda.device_count(&count); r != CUDA_SUCCESS) return cuda_error(cuda, "cuDeviceGetCount", r);
  for (int g : options.gpus) {
    if (g < 0 || g >= count)
      return Error{0, fmt::format("GPU {}: the driver has {} GPUs (0 to {})", g, count, count - 1)};
  }
  report.gpus.resize(options.gpus.size());
  std::vector<std::optional<Error>> errors(options.gpus.size());
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < options.gpus.size(); ++i) {
    report.gpus[i].ordinal = options.gpus[i];
    threads.emplace_back([&, i] {
      if (auto r = burn_one(cuda, options, stop, report.gpus[i], progress); !r) errors[i] = r.error();
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) return *e;
  }
  report.interrupted = stop.load();
  return report;
}

}  // namespace gpumeter::burn
