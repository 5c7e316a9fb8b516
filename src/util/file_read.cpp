#include "util/file_read.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

namespace gpumeter {

namespace {

Error errno_error(int err) { return Error{err, std::strerror(err)}; }

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

Result<std::string> read_regular_file(const std::string& path, const FileReadOptions& options) {
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer, and nothing could stop it.
  int flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
  if (!options.follow_symlinks) flags |= O_NOFOLLOW;
  Fd fd{::open(path.c_str(), flags)};
  if (fd.fd < 0) {
    if (errno == ELOOP && !options.follow_symlinks) return Error{ELOOP, "it is a symbolic link, which is not followed"};
    return errno_error(errno);
  }
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) return errno_error(errno);
  if (S_ISDIR(st.st_mode)) return Error{EISDIR, "it is a directory, not a file"};
  if (!S_ISREG(st.st_mode)) return Error{EINVAL, "it is not a regular file"};
  const auto too_large = [&] {
    return Error{EFBIG, "it is larger than " + std::to_string(options.max_bytes) + " bytes"};
  };
  if (!options.truncate && static_cast<std::uint64_t>(st.st_size) > options.max_bytes) return too_large();
  // Read to one byte past the limit: the size fstat gave may change while reading.
  std::string text;
  char buf[16384];
  while (text.size() <= options.max_bytes) {
    const ssize_t n = ::read(fd.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error(errno);
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  if (text.size() > options.max_bytes) {
    if (!options.truncate) return too_large();
    text.resize(options.max_bytes);
  }
  return text;
}

}  // namespace gpumeter
