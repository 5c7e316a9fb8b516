#pragma once
// Reading a file a process was told to read (a config, a web config, a counters file, a batch
// system's job file), with the checks every such read needs. A path can be swapped for anything
// while the agent runs (a ConfigMap update, an operator's mistake, a user who can write the
// directory), so each read is bounded in bytes, never blocks (a FIFO, a device), and takes only
// a regular file: a directory or /dev/null must not read as an empty file that means "defaults".

#include <cstddef>
#include <string>

#include "util/result.h"

namespace gpumeter {

struct FileReadOptions {
  std::size_t max_bytes = 1 << 20;
  // What a file longer than max_bytes gives: an error (EFBIG), or its first max_bytes.
  bool truncate = false;
  // Whether a symbolic link is followed. Not where the directory is writable by others than the
  // agent's operator: a link would read any file the agent can read into its output.
  bool follow_symlinks = true;
};

// The content of the regular file at `path`. Errors carry the errno in `code` (ENOENT, EACCES,
// ELOOP for a link not followed, EISDIR for a directory, EINVAL for anything else that is not a
// regular file, EFBIG when too large) and say why in `message`, without the path, to follow
// "cannot read <what> <path>: ".
Result<std::string> read_regular_file(const std::string& path, const FileReadOptions& options = {});

}  // namespace gpumeter
