#include "sim/host/slurm_tree.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>

#include <fmt/format.h>

#include "sim/host/tree_files.h"

namespace gpumeter::sim {

namespace fs = std::filesystem;

namespace {

Micros end_in(const Scenario& s, Micros end) { return std::min(end, s.duration); }

bool numeric(const std::string& name) {
  return !name.empty() && name.size() <= 9 &&
         std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::map<unsigned, std::vector<std::string>> hpc_jobs_at(const Scenario& scenario, Micros t) {
  t = std::max<Micros>(t, 0);
  std::map<unsigned, std::vector<std::string>> out;
  for (const Allocation& a : scenario.allocations) {
    if (a.slurm_job.empty() || t < a.start || t >= end_in(scenario, a.end)) continue;
    for (unsigned g : a.gpus) {
      std::vector<std::string>& ids = out[g];
      if (std::find(ids.begin(), ids.end(), a.slurm_job) == ids.end()) ids.push_back(a.slurm_job);
    }
  }
  return out;
}

std::string hpc_jobs_file(const std::vector<std::string>& job_ids) {
  std::string out;
  for (const std::string& id : job_ids) out += id + "\n";
  return out;
}

HpcJobsTree::HpcJobsTree(fs::path dir, const Scenario& scenario) : dir_(std::move(dir)), scenario_(scenario) {
  for (const Allocation& a : scenario.allocations) {
    if (a.slurm_job.empty()) continue;
    edges_.push_back(a.start);
    if (const Micros end = end_in(scenario, a.end); end != kForever) edges_.push_back(end);
  }
  std::sort(edges_.begin(), edges_.end());
  edges_.erase(std::unique(edges_.begin(), edges_.end()), edges_.end());
}

Result<std::unique_ptr<HpcJobsTree>> HpcJobsTree::open(const fs::path& dir, const Scenario& scenario) {
  std::unique_ptr<HpcJobsTree> tree(new HpcJobsTree(dir / kHpcJobsDir, scenario));
  std::error_code ec;
  fs::create_directories(tree->dir_, ec);
  if (ec) return fs_error("cannot create", tree->dir_, ec);
  for (auto it = fs::directory_iterator(tree->dir_, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (numeric(name)) {
      tree->present_[static_cast<unsigned>(std::stoul(name))] = std::string();  // never equal to a wanted file
    } else if (name.size() > 1 && name[0] == '.' && name.ends_with(".tmp")) {
      std::error_code rm;
      fs::remove(it->path(), rm);
      if (rm) return fs_error("cannot remove", it->path(), rm);
    }
  }
  if (ec) return fs_error("cannot list", tree->dir_, ec);
  return tree;
}

Result<void> HpcJobsTree::sync(Micros t) {
  std::map<unsigned, std::string> wanted;
  for (const auto& [gpu, ids] : hpc_jobs_at(scenario_, t)) wanted[gpu] = hpc_jobs_file(ids);
  for (auto it = present_.begin(); it != present_.end();) {
    if (wanted.count(it->first)) {
      ++it;
      continue;
    }
    const fs::path path = dir_ / std::to_string(it->first);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return Error{errno, fmt::format("cannot remove {}: {}", path.string(), std::strerror(errno))};
    }
    it = present_.erase(it);
  }
  for (const auto& [gpu, content] : wanted) {
    auto it = present_.find(gpu);
    if (it != present_.end() && it->second == content) continue;
    const fs::path path = dir_ / std::to_string(gpu);
    const fs::path tmp = dir_ / fmt::format(".{}.tmp", gpu);
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      if (!out) return Error{errno, fmt::format("cannot create {}: {}", tmp.string(), std::strerror(errno))};
      out.write(content.data(), static_cast<std::streamsize>(content.size()));
      out.close();
      if (!out) return Error{EIO, fmt::format("cannot write {}", tmp.string())};
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) return fs_error("cannot rename into", path, ec);
    present_[gpu] = content;
  }
  return {};
}

Micros HpcJobsTree::next_change_after(Micros t) const {
  t = std::max<Micros>(t, 0);
  auto it = std::upper_bound(edges_.begin(), edges_.end(), t);
  return it == edges_.end() ? kForever : *it;
}

}  // namespace gpumeter::sim
