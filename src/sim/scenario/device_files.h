#pragma once
// The simulated driver's device files. A real NVML opens /dev/nvidiactl and each GPU's
// /dev/nvidia<N> at nvmlInit and closes them at its last nvmlShutdown; while any process holds
// them, `nvidia-smi -r` refuses to reset a GPU ("In use by another client") and the kernel
// module cannot be unloaded (docs/nvml-behaviour.md, "Device files"). The simulator stands for
// them with the scenario file, the simulated machine: a holder keeps a shared lock on it, and a
// reset needs the exclusive one. Nothing is created, so nothing is left behind.

#include <string>

#include "util/result.h"

namespace gpumeter::sim {

// A process's hold on the device files, from its first nvmlInit to its last nvmlShutdown.
class DeviceFileHold {
 public:
  // Opens the scenario file at `path` and takes a shared lock; the error says why not.
  static Result<DeviceFileHold> open(const std::string& path);
  DeviceFileHold(DeviceFileHold&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  DeviceFileHold& operator=(DeviceFileHold&& other) noexcept;
  DeviceFileHold(const DeviceFileHold&) = delete;
  DeviceFileHold& operator=(const DeviceFileHold&) = delete;
  ~DeviceFileHold();

 private:
  explicit DeviceFileHold(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// Whether some process holds the device files of the scenario at `path`: asks for the
// exclusive lock without waiting and lets it go at once.
Result<bool> device_files_in_use(const std::string& path);

}  // namespace gpumeter::sim
