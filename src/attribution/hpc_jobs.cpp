#include "attribution/hpc_jobs.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <system_error>

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

Result<HpcJobMapping> read_hpc_job_mapping(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return Error{ec.value(), fmt::format("HPC job mapping directory {}: {}", dir, ec.message())};
  HpcJobMapping mapping;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec)
      return Error{ec.value(), fmt::format("listing HPC job mapping directory {}: {}", dir, ec.message())};
    std::string name = it->path().filename().string();
    if (!is_hpc_job_file_name(name)) continue;
    std::error_code type_ec;
    if (!it->is_regular_file(type_ec)) continue;
    std::ifstream in(it->path(), std::ios::binary);
    if (!in) continue;  // removed by an epilog since the listing
    std::string text(kMaxFileBytes, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<std::size_t>(in.gcount()));
    std::vector<std::string> jobs;
    std::string_view rest = text;
    while (!rest.empty()) {
      std::size_t nl = rest.find('\n');
      std::string_view line = trim(rest.substr(0, nl));
      rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
      if (!line.empty() && line.size() <= kMaxJobIdBytes) add_unique(jobs, line);
    }
    mapping.emplace(std::move(name), std::move(jobs));
  }
  return mapping;
}

std::vector<std::string> hpc_jobs_for_gpu(const HpcJobMapping& mapping, unsigned index,
                                          std::string_view uuid) {
  std::vector<std::string> out;
  if (auto it = mapping.find(std::to_string(index)); it != mapping.end()) {
    for (const auto& j : it->second) add_unique(out, j);
  }
  if (!uuid.empty()) {
    if (auto it = mapping.find(std::string(uuid)); it != mapping.end()) {
      for (const auto& j : it->second) add_unique(out, j);
    }
  }
  return out;
}

}  // namespace gpumeter
