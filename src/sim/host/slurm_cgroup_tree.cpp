#include "sim/host/slurm_cgroup_tree.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <set>
#include <system_error>

#include <fmt/format.h>

#include "sim/host/tree_files.h"

namespace gpumeter::sim {

namespace fs = std::filesystem;

namespace {

constexpr const char* kScope = "system.slice/slurmstepd.scope";
// What the kernel lists for a default-allow devices cgroup, whatever it denies: every level of a
// Slurm 22.05 job under ConstrainDevices=yes (docs/simulator.md).
constexpr const char* kAllowAll = "a *:* rwm\n";

bool v1(SlurmCgroupLayout l) { return l == SlurmCgroupLayout::kV1 || l == SlurmCgroupLayout::kV1Whitelist; }

// The v1 devices hierarchy's Slurm root, relative to the cgroup root.
std::string v1_root(SlurmCgroupLayout layout) {
  return layout == SlurmCgroupLayout::kV1 ? fmt::format("devices/slurm_{}", kSlurmNodeName) : "devices/slurm";
}

Micros end_in(const Scenario& s, Micros end) { return std::min(end, s.duration); }

bool slurm(const Allocation& a) { return !a.slurm_job.empty(); }

// The job's directory relative to the cgroup root.
std::string job_dir(const Allocation& a, SlurmCgroupLayout layout) {
  switch (layout) {
    case SlurmCgroupLayout::kV1:
    case SlurmCgroupLayout::kV1Whitelist:
      return fmt::format("{}/uid_{}/job_{}", v1_root(layout), a.uid, a.slurm_job);
    case SlurmCgroupLayout::kV2:
      return fmt::format("{}/job_{}", kScope, a.slurm_job);
    case SlurmCgroupLayout::kV2Sluid:
      return fmt::format("{}/{}", kScope, sluid_of(a.slurm_job));
    case SlurmCgroupLayout::kNone:
      break;
  }
  return {};
}

std::string gpu_list(const std::vector<unsigned>& gpus, bool renumbered) {
  std::string out;
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    out += fmt::format("{}{}", i ? "," : "", renumbered ? static_cast<unsigned>(i) : gpus[i]);
  }
  return out;
}

std::string procs_file(const std::vector<unsigned>& pids) {
  std::set<unsigned> sorted(pids.begin(), pids.end());
  std::string out;
  for (unsigned p : sorted) out += std::to_string(p) + "\n";
  return out;
}

}  // namespace

std::string_view to_string(SlurmCgroupLayout l) {
  switch (l) {
    case SlurmCgroupLayout::kNone:
      return "none";
    case SlurmCgroupLayout::kV1:
      return "v1";
    case SlurmCgroupLayout::kV1Whitelist:
      return "v1-whitelist";
    case SlurmCgroupLayout::kV2:
      return "v2";
    case SlurmCgroupLayout::kV2Sluid:
      return "v2-sluid";
  }
  return "none";
}

std::optional<SlurmCgroupLayout> parse_slurm_cgroup_layout(std::string_view s) {
  for (auto l : {SlurmCgroupLayout::kNone, SlurmCgroupLayout::kV1, SlurmCgroupLayout::kV1Whitelist,
                 SlurmCgroupLayout::kV2, SlurmCgroupLayout::kV2Sluid}) {
    if (s == to_string(l)) return l;
  }
  return std::nullopt;
}

std::string sluid_of(std::string_view job_id) {
  static constexpr char kDigits[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
  std::uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (char c : job_id) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  std::string out = "s";
  for (int i = 12; i >= 0; --i) out += kDigits[(h >> (5 * i)) & 31];
  return out;
}

std::vector<Job> slurm_batch_jobs(const Scenario& scenario, SlurmCgroupLayout layout) {
  std::vector<Job> out;
  if (layout == SlurmCgroupLayout::kNone) return out;
  std::set<unsigned> taken;
  for (const Job& j : scenario.jobs) taken.insert(j.pids.begin(), j.pids.end());
  unsigned pid = kFirstBatchPid;
  for (std::size_t a = 0; a < scenario.allocations.size(); ++a) {
    const Allocation& alloc = scenario.allocations[a];
    if (!slurm(alloc)) continue;
    while (taken.count(pid)) ++pid;
    Job j;
    j.name = "slurm_script";
    j.start = alloc.start;
    j.end = alloc.end;
    j.pids = {pid++};
    j.uid = alloc.uid;
    j.cgroup_version = v1(layout) ? 1 : 2;
    // v1: the path below the hierarchy's mount, devices/ left out.
    j.cgroup = v1(layout)
                   ? "/" + job_dir(alloc, layout).substr(std::string_view("devices/").size()) + "/step_batch/task_0"
                   : "/" + job_dir(alloc, layout) + "/step_batch/user/task_0";
    j.env = {{"SLURM_JOB_ID", alloc.slurm_job},
             {"SLURM_JOB_UID", std::to_string(alloc.uid)},
             {"SLURM_JOB_GPUS", gpu_list(alloc.gpus, false)},
             {"CUDA_VISIBLE_DEVICES", gpu_list(alloc.gpus, true)}};
    j.allocation = a;
    out.push_back(std::move(j));
  }
  return out;
}

SlurmCgroupTree::SlurmCgroupTree(fs::path root, const Scenario& scenario, SlurmCgroupLayout layout)
    : root_(std::move(root)), scenario_(scenario), layout_(layout) {
  auto add_edges = [&](Micros start, Micros end) {
    edges_.push_back(start);
    if (end != kForever) edges_.push_back(end);
  };
  for (const Allocation& a : scenario.allocations) {
    if (slurm(a)) add_edges(a.start, end_in(scenario, a.end));
  }
  for (const Job& j : scenario.jobs) {
    if (j.allocation != kNoAllocation && slurm(scenario.allocations[j.allocation])) {
      add_edges(j.start, end_in(scenario, j.end));
    }
  }
  std::sort(edges_.begin(), edges_.end());
  edges_.erase(std::unique(edges_.begin(), edges_.end()), edges_.end());
}

Result<std::unique_ptr<SlurmCgroupTree>> SlurmCgroupTree::open(const fs::path& dir, const Scenario& scenario,
                                                               SlurmCgroupLayout layout) {
  std::unique_ptr<SlurmCgroupTree> tree(new SlurmCgroupTree(dir / kCgroupRoot, scenario, layout));
  // The directories that hold job directories: the scope on v2, each uid_<N> on v1.
  std::vector<fs::path> parents;
  std::error_code ec;
  if (v1(layout)) {
    const fs::path slurm_root = tree->root_ / v1_root(layout);
    fs::create_directories(slurm_root, ec);
    if (ec) return fs_error("cannot create", slurm_root, ec);
    for (auto it = fs::directory_iterator(slurm_root, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
      if (it->path().filename().string().starts_with("uid_")) parents.push_back(it->path());
    }
    if (ec) return fs_error("cannot list", slurm_root, ec);
  } else {
    parents.push_back(tree->root_ / kScope);
    fs::create_directories(parents.back(), ec);
    if (ec) return fs_error("cannot create", parents.back(), ec);
  }
  for (const fs::path& parent : parents) {
    for (auto it = fs::directory_iterator(parent, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (name.starts_with(".") && (name.ends_with(".tmp") || name.ends_with(".old"))) {
        std::error_code rm;
        fs::remove_all(it->path(), rm);
        if (rm) return fs_error("cannot remove", it->path(), rm);
      } else if (name.starts_with("job_") || (name.size() == 14 && name[0] == 's')) {
        // Never equal to a wanted directory: replaced or removed by the first sync.
        tree->present_[fs::relative(it->path(), tree->root_).string()] = CgroupFiles{{"", ""}};
      }
    }
    if (ec) return fs_error("cannot list", parent, ec);
  }
  return tree;
}

std::map<std::string, CgroupFiles> SlurmCgroupTree::wanted_at(Micros t) const {
  t = std::max<Micros>(t, 0);
  std::map<std::string, CgroupFiles> out;
  for (std::size_t a = 0; a < scenario_.allocations.size(); ++a) {
    const Allocation& alloc = scenario_.allocations[a];
    if (!slurm(alloc) || t < alloc.start || t >= end_in(scenario_, alloc.end)) continue;
    CgroupFiles files;
    if (layout_ == SlurmCgroupLayout::kV1Whitelist) {
      std::string list;
      for (unsigned g : alloc.gpus) list += fmt::format("c 195:{} rwm\n", g);
      list += "c 195:254 rwm\nc 195:255 rwm\n";
      files["devices.list"] = list;
      files["cgroup.procs"] = "";
    } else {
      if (layout_ == SlurmCgroupLayout::kV1) {
        // The job level holds no process; slurmstepd sits in the step, its tasks in task_0.
        files["devices.list"] = kAllowAll;
        files["cgroup.procs"] = "";
      }
      unsigned step = 0;
      for (const Job& j : scenario_.jobs) {
        if (j.allocation != a) continue;
        const bool batch = j.gpus.empty();
        const std::string name = batch ? "step_batch" : fmt::format("step_{}", step++);
        if (t < j.start || t >= end_in(scenario_, j.end)) continue;
        if (layout_ == SlurmCgroupLayout::kV1) {
          files[name + "/devices.list"] = kAllowAll;
          files[name + "/cgroup.procs"] = "";
          files[name + "/task_0/devices.list"] = kAllowAll;
          files[name + "/task_0/cgroup.procs"] = procs_file(j.pids);
        } else {
          files[name + "/user/task_0/cgroup.procs"] = procs_file(j.pids);
          files[name + "/slurm/cgroup.procs"] = "";
        }
      }
    }
    out[job_dir(alloc, layout_)] = std::move(files);
  }
  return out;
}

Result<void> SlurmCgroupTree::write_job(const std::string& rel, const CgroupFiles& files, const CgroupFiles* old) {
  // A new job, or one an earlier writer left (its content unknown): the directory whole.
  if (old == nullptr || old->count("") != 0) {
    return publish_directory(root_ / rel, DirectoryFiles(files.begin(), files.end()), old != nullptr);
  }
  // A job's cgroup stays while its steps come and go, as on a real node: each step's directory
  // is added or removed whole, and a file of the job's own is replaced in one rename. A reader
  // walking the job therefore always finds it, and its batch step, whole.
  auto by_step = [](const CgroupFiles& f) {
    std::map<std::string, DirectoryFiles> steps;  // "" holds the job's own files
    for (const auto& [name, content] : f) {
      const auto slash = name.find('/');
      if (slash == std::string::npos) {
        steps[""].emplace_back(name, content);
      } else {
        steps[name.substr(0, slash)].emplace_back(name.substr(slash + 1), content);
      }
    }
    return steps;
  };
  const auto now = by_step(files);
  const auto before = by_step(*old);
  const fs::path job = root_ / rel;
  for (const auto& [step, step_files] : before) {
    if (!step.empty() && !now.count(step)) {
      if (auto r = remove_directory(job / step); !r) return r;
    }
  }
  for (const auto& [step, step_files] : now) {
    auto was = before.find(step);
    if (was != before.end() && was->second == step_files) continue;
    if (step.empty()) {
      for (const auto& [name, content] : step_files) {
        if (auto r = write_file_atomic(job / name, content); !r) return r;
      }
    } else if (auto r = publish_directory(job / step, step_files, was != before.end()); !r) {
      return r;
    }
  }
  return {};
}

Result<void> SlurmCgroupTree::remove_job(const std::string& rel) { return remove_directory(root_ / rel); }

Result<void> SlurmCgroupTree::sync(Micros t) {
  const std::map<std::string, CgroupFiles> wanted = wanted_at(t);
  for (auto it = present_.begin(); it != present_.end();) {
    if (wanted.count(it->first)) {
      ++it;
      continue;
    }
    if (auto r = remove_job(it->first); !r) return r;
    it = present_.erase(it);
  }
  for (const auto& [rel, files] : wanted) {
    auto it = present_.find(rel);
    if (it != present_.end() && it->second == files) continue;
    if (auto r = write_job(rel, files, it != present_.end() ? &it->second : nullptr); !r) return r;
    present_[rel] = files;
  }
  return {};
}

Micros SlurmCgroupTree::next_change_after(Micros t) const {
  t = std::max<Micros>(t, 0);
  auto it = std::upper_bound(edges_.begin(), edges_.end(), t);
  return it == edges_.end() ? kForever : *it;
}

}  // namespace gpumeter::sim
