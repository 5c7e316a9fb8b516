#include "sim/host/tree_files.h"

#include <fcntl.h>
#include <stdio.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

namespace gpumeter::sim {

namespace fs = std::filesystem;

Error fs_error(const std::string& what, const fs::path& path, const std::error_code& ec) {
  return Error{ec.value(), fmt::format("{} {}: {}", what, path.string(), ec.message())};
}

Result<void> write_file(const fs::path& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Error{errno, fmt::format("cannot create {}: {}", path.string(), std::strerror(errno))};
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  out.close();
  if (!out) return Error{EIO, fmt::format("cannot write {}", path.string())};
  return {};
}

Result<void> write_file_atomic(const fs::path& path, const std::string& content) {
  const fs::path tmp = beside(path, "tmp");
  if (auto r = write_file(tmp, content); !r) return r;
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return fs_error("cannot rename into", path, ec);
  return {};
}

fs::path beside(const fs::path& path, const char* suffix) {
  return path.parent_path() / fmt::format(".{}.{}", path.filename().string(), suffix);
}

Result<void> publish_directory(const fs::path& dir, const DirectoryFiles& files, bool replace) {
  const fs::path tmp = beside(dir, "tmp");
  std::error_code ec;
  fs::create_directories(dir.parent_path(), ec);
  if (ec) return fs_error("cannot create", dir.parent_path(), ec);
  fs::remove_all(tmp, ec);
  if (ec) return fs_error("cannot remove", tmp, ec);
  fs::create_directory(tmp, ec);
  if (ec) return fs_error("cannot create", tmp, ec);
  for (const auto& [name, content] : files) {
    const fs::path path = tmp / name;
    fs::create_directories(path.parent_path(), ec);
    if (ec) return fs_error("cannot create", path.parent_path(), ec);
    if (auto r = write_file(path, content); !r) return r;
  }
  if (replace) {
    // Swap the complete new directory with the old one in one step, then drop the old one.
    if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, dir.c_str(), RENAME_EXCHANGE) == 0) {
      fs::remove_all(tmp, ec);
      if (ec) return fs_error("cannot remove", tmp, ec);
      return {};
    }
    if (errno != EINVAL && errno != ENOSYS && errno != ENOENT) {
      return Error{errno,
                   fmt::format("cannot exchange {} with {}: {}", tmp.string(), dir.string(), std::strerror(errno))};
    }
    if (auto r = remove_directory(dir); !r) return r;
  }
  fs::rename(tmp, dir, ec);
  if (ec) return fs_error("cannot rename into", dir, ec);
  return {};
}

Result<void> remove_directory(const fs::path& dir) {
  const fs::path old = beside(dir, "old");
  std::error_code ec;
  fs::remove_all(old, ec);
  if (ec) return fs_error("cannot remove", old, ec);
  fs::rename(dir, old, ec);
  if (ec == std::errc::no_such_file_or_directory) return {};
  if (ec) return fs_error("cannot rename", dir, ec);
  fs::remove_all(old, ec);
  if (ec) return fs_error("cannot remove", old, ec);
  return {};
}

}  // namespace gpumeter::sim
