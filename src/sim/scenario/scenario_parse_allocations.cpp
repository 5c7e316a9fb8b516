// `allocations:`: GPUs a scheduler holds for an owner whether or not a process runs on them,
// and the checks that tie jobs (`allocation:`) to them.

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <set>

#include "sim/scenario/scenario_parse_parts.h"
#include "sim/scenario/yaml_reader.h"

namespace gpumeter::sim::parse {

namespace {

bool all_digits(std::string_view s) {
  return !s.empty() && s.size() <= 20 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

Micros end_in(const Scenario& s, Micros end) { return std::min(end, s.duration); }

std::string describe_end(Micros end) {
  return end == kForever ? std::string("forever") : fmt::format("{} s", to_seconds(end));
}

Allocation parse_allocation(const Scenario& s, const YAML::Node& node, const std::string& path) {
  MapReader m(node, path, {"name", "start", "end", "gpus", "kubernetes", "slurm", "uid", "mig"});
  Allocation a;
  a.name = read_bounded_string(m.require("name"), m.path("name"), 256);
  if (m.has("start")) a.start = read_duration(m.get("start"), m.path("start"));
  if (m.has("end")) {
    a.end = read_duration(m.get("end"), m.path("end"));
    if (a.end <= a.start) fail_at(m.get("end"), m.path("end"), "must be later than start");
  }
  YAML::Node gpus = m.require("gpus");
  if (!gpus.IsSequence() || gpus.size() == 0) fail_at(gpus, m.path("gpus"), "expected a non-empty list of GPU indices");
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const std::string gp = indexed(m.path("gpus"), i);
    if (s.gpus.empty()) fail_at(gpus[i], gp, "the scenario has no GPUs");
    const auto g = static_cast<unsigned>(read_unsigned(gpus[i], gp, 0, s.gpus.size() - 1));
    if (std::find(a.gpus.begin(), a.gpus.end(), g) != a.gpus.end()) {
      fail_at(gpus[i], gp, fmt::format("GPU {} is listed twice", g));
    }
    a.gpus.push_back(g);
  }
  if (m.has("kubernetes") == m.has("slurm")) {
    m.fail("needs exactly one of 'kubernetes' (a pod's container) or 'slurm' (a Slurm job)");
  }
  if (m.has("kubernetes")) a.kubernetes = parse_kubernetes_ref(m.get("kubernetes"), m.path("kubernetes"));
  if (m.has("slurm")) {
    MapReader sl(m.get("slurm"), m.path("slurm"), {"job_id"});
    a.slurm_job = read_string(sl.require("job_id"), sl.path("job_id"));
    if (!all_digits(a.slurm_job)) {
      fail_at(sl.get("job_id"), sl.path("job_id"),
              fmt::format("expected a Slurm job id (decimal digits), got '{}'", a.slurm_job));
    }
  }
  if (m.has("uid")) a.uid = static_cast<unsigned>(read_unsigned(m.get("uid"), m.path("uid"), 0, 4294967294U));
  if (m.has("mig")) a.mig = resolve_mig(s, m.get("mig"), m.path("mig"));
  return a;
}

}  // namespace

void parse_allocations(Scenario& s, const YAML::Node& node, std::vector<YAML::Node>& nodes) {
  if (!node.IsSequence()) fail_at(node, "allocations", "expected a list of allocations");
  std::map<std::string, std::size_t> names;
  for (std::size_t i = 0; i < node.size(); ++i) {
    const std::string path = indexed("allocations", i);
    s.allocations.push_back(parse_allocation(s, node[i], path));
    nodes.push_back(node[i]);
    const Allocation& a = s.allocations.back();
    if (auto [it, fresh] = names.emplace(a.name, i); !fresh) {
      fail_at(node[i]["name"], path + ".name",
              fmt::format("allocation name '{}' is also used by allocations[{}]", a.name, it->second));
    }
  }
  // One container, or one Slurm job, holds one allocation at a time.
  for (std::size_t b = 0; b < s.allocations.size(); ++b) {
    for (std::size_t a = 0; a < b; ++a) {
      const Allocation& x = s.allocations[a];
      const Allocation& y = s.allocations[b];
      const bool same_owner = x.slurm_job.empty()
                                  ? y.slurm_job.empty() && x.kubernetes.namespace_ == y.kubernetes.namespace_ &&
                                        x.kubernetes.pod == y.kubernetes.pod &&
                                        x.kubernetes.container == y.kubernetes.container
                                  : x.slurm_job == y.slurm_job;
      if (!same_owner) continue;
      if (std::max(x.start, y.start) >= std::min(end_in(s, x.end), end_in(s, y.end))) continue;
      fail_at(nodes[b], indexed("allocations", b),
              fmt::format("overlaps allocations[{}] ('{}'), which names the same {} at the same time", a, x.name,
                          x.slurm_job.empty() ? "container" : "Slurm job"));
    }
  }
}

std::size_t resolve_allocation(const Scenario& s, const YAML::Node& node, const std::string& path) {
  const std::string name = read_string(node, path);
  for (std::size_t i = 0; i < s.allocations.size(); ++i) {
    if (s.allocations[i].name == name) return i;
  }
  std::string known;
  for (const Allocation& a : s.allocations) known += fmt::format("{}{}", known.empty() ? "" : ", ", a.name);
  fail_at(node, path, fmt::format("unknown allocation '{}' (allocations: {})", name, known.empty() ? "none" : known));
}

void check_allocation_jobs(Scenario& s, const std::vector<YAML::Node>& job_nodes,
                           const std::vector<YAML::Node>& allocation_nodes) {
  std::set<std::string> job_names;
  for (const Job& j : s.jobs) job_names.insert(j.name);
  for (std::size_t i = 0; i < s.allocations.size(); ++i) {
    if (job_names.count(s.allocations[i].name)) {
      fail_at(allocation_nodes[i]["name"], indexed("allocations", i) + ".name",
              fmt::format("'{}' is also a job's name; owners in the ground truth are named by both",
                          s.allocations[i].name));
    }
  }
  for (std::size_t j = 0; j < s.jobs.size(); ++j) {
    Job& job = s.jobs[j];
    if (job.allocation == kNoAllocation) continue;
    const Allocation& a = s.allocations[job.allocation];
    const std::string path = indexed("jobs", j);
    const YAML::Node& node = job_nodes[j];
    for (unsigned g : job.gpus) {
      if (std::find(a.gpus.begin(), a.gpus.end(), g) == a.gpus.end()) {
        fail_at(node, path, fmt::format("runs on GPU {}, which its allocation '{}' does not hold", g, a.name));
      }
    }
    const Micros job_end = end_in(s, job.end);
    const Micros alloc_end = end_in(s, a.end);
    if (job.start < a.start || job_end > alloc_end) {
      fail_at(node, path,
              fmt::format("runs over [{} s, {}), outside its allocation '{}' [{} s, {})", to_seconds(job.start),
                          describe_end(job_end), a.name, to_seconds(a.start), describe_end(alloc_end)));
    }
    if (!a.kubernetes.empty()) {
      if (!job.kubernetes.empty()) {
        fail_at(node, path,
                fmt::format("takes its pod and container from its allocation '{}'; drop 'kubernetes'", a.name));
      }
      job.kubernetes = a.kubernetes;
    }
  }
}

}  // namespace gpumeter::sim::parse
