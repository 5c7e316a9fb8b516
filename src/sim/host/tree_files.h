#pragma once
// Writing the simulated host's trees so that a reader running at the same time (the agent, the
// real rocm-smi, a test) never sees a file or a directory half-written: each is built beside its
// place (".<name>.tmp") and renamed into it, and removed by one rename out of the way
// (".<name>.old") before it is deleted.

#include <filesystem>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "util/result.h"

namespace gpumeter::sim {

Error fs_error(const std::string& what, const std::filesystem::path& path, const std::error_code& ec);

// Creates or truncates `path` with `content`; not atomic (for files inside a directory that is
// published whole).
Result<void> write_file(const std::filesystem::path& path, const std::string& content);

// Replaces `path` with `content` in one rename: a reader sees the old or the new content.
Result<void> write_file_atomic(const std::filesystem::path& path, const std::string& content);

// ".<name>.<suffix>" beside `path`.
std::filesystem::path beside(const std::filesystem::path& path, const char* suffix);

// The files of a directory: (path relative to it, content). Sub-directories are created.
using DirectoryFiles = std::vector<std::pair<std::string, std::string>>;

// Makes `dir` hold exactly `files`, whole for every reader. With `replace` (the directory may
// exist), the new one is swapped in with RENAME_EXCHANGE; on a file system without it, the old
// one is removed first, so the directory is briefly absent, never partial.
Result<void> publish_directory(const std::filesystem::path& dir, const DirectoryFiles& files, bool replace);

// Removes `dir` and everything in it in one rename; a missing directory is not an error.
Result<void> remove_directory(const std::filesystem::path& dir);

}  // namespace gpumeter::sim
