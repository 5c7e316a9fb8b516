#include "attribution/hpc_jobs.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <system_error>

#include "util/file_read.h"

namespace gpumeter {

namespace {

constexpr std::size_t kMaxFileBytes = 64 * 1024;
constexpr std::size_t kMaxJobIdBytes = 256;

bool digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool uuid_tail(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == '-';
  });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

void add_unique(std::vector<std::string>& out, std::string_view job) {
  if (std::find(out.begin(), out.end(), job) == out.end()) out.emplace_back(job);
}

}  // namespace

bool is_hpc_job_file_name(std::string_view name) {
  if (digits(name)) return true;
  if (std::size_t dot = name.find('.'); dot != std::string_view::npos) {
    return digits(name.substr(0, dot)) && digits(name.substr(dot + 1));
  }
  if (name.substr(0, 4) == "GPU-" || name.substr(0, 4) == "MIG-") return uuid_tail(name.substr(4));
  return false;
}

HpcJobFile parse_hpc_job_file(std::string_view text) {
  HpcJobFile out;
  std::vector<std::string> beyond;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    const std::string_view line = trim(text.substr(0, nl));
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (line.empty() || line.size() > kMaxJobIdBytes) continue;
    if (out.jobs.size() < kMaxHpcJobsPerFile) {
      add_unique(out.jobs, line);
    } else if (std::find(out.jobs.begin(), out.jobs.end(), line) == out.jobs.end()) {
      beyond.emplace_back(line);
    }
  }
  std::sort(beyond.begin(), beyond.end());
  out.dropped = static_cast<std::size_t>(std::unique(beyond.begin(), beyond.end()) - beyond.begin());
  return out;
}

Result<HpcJobMapping> read_hpc_job_mapping(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return Error{ec.value(), fmt::format("HPC job mapping directory {}: {}", dir, ec.message())};
  HpcJobMapping mapping;
  std::size_t files = 0;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) return Error{ec.value(), fmt::format("listing HPC job mapping directory {}: {}", dir, ec.message())};
    std::string name = it->path().filename().string();
    if (!is_hpc_job_file_name(name)) continue;
    if (++files > kMaxHpcJobFiles) {
      ++mapping.files_skipped;
      continue;
    }
    // Not a link, not a FIFO or device: only the regular file an epilog can remove.
    auto text = read_regular_file(it->path().string(),
                                  {.max_bytes = kMaxFileBytes + 1, .truncate = true, .follow_symlinks = false});
    if (!text) {
      if (text.error().code == ELOOP || text.error().code == EINVAL) ++mapping.links_skipped;
      continue;  // a directory named like a GPU, or a file removed by an epilog since the listing
    }
    if (text->size() > kMaxFileBytes) {  // cut: its last line may be part of an id
      const std::size_t nl = text->rfind('\n', kMaxFileBytes - 1);
      text->resize(nl == std::string::npos ? 0 : nl + 1);
    }
    HpcJobFile parsed = parse_hpc_job_file(*text);
    if (parsed.dropped > 0) mapping.dropped.emplace(name, parsed.dropped);
    mapping.files.emplace(std::move(name), std::move(parsed.jobs));
  }
  return mapping;
}

std::vector<std::string> hpc_jobs_for_gpu(const HpcJobMapping& mapping, unsigned index, std::string_view uuid) {
  std::vector<std::string> out;
  if (auto it = mapping.files.find(std::to_string(index)); it != mapping.files.end()) {
    for (const auto& j : it->second) add_unique(out, j);
  }
  if (!uuid.empty()) {
    if (auto it = mapping.files.find(std::string(uuid)); it != mapping.files.end()) {
      for (const auto& j : it->second) {
        if (out.size() < kMaxHpcJobsPerFile) add_unique(out, j);
      }
    }
  }
  return out;
}

}  // namespace gpumeter
