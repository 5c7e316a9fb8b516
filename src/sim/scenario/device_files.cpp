#include "sim/scenario/device_files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gpumeter::sim {

namespace {

Error system_error(const std::string& what, const std::string& path) {
  return Error{errno, what + " " + path + ": " + std::strerror(errno)};
}

}  // namespace

Result<DeviceFileHold> DeviceFileHold::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return system_error("cannot open", path);
  if (::flock(fd, LOCK_SH) != 0) {
    Error e = system_error("cannot lock", path);
    ::close(fd);
    return e;
  }
  return DeviceFileHold(fd);
}

DeviceFileHold& DeviceFileHold::operator=(DeviceFileHold&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

DeviceFileHold::~DeviceFileHold() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor lets the lock go
}

Result<bool> device_files_in_use(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return system_error("cannot open", path);
  const bool held = ::flock(fd, LOCK_EX | LOCK_NB) != 0;
  const int err = errno;
  ::close(fd);
  if (held && err != EWOULDBLOCK) {
    errno = err;
    return system_error("cannot lock", path);
  }
  return held;
}

}  // namespace gpumeter::sim
