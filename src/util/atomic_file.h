#pragma once
// Replaces a file atomically: write a temporary file in the same directory, fsync it, rename
// it over the target, fsync the directory. A crash at any moment leaves either the old file or
// the new one, never a torn one; readers never see a partial file.

#include <sys/types.h>

#include <string>

#include "util/result.h"

namespace gpumeter {

// Returns the bytes written, or an Error naming the path and the failing step.
Result<std::size_t> write_file_atomic(const std::string& path, const std::string& contents, mode_t mode = 0640);

}  // namespace gpumeter
