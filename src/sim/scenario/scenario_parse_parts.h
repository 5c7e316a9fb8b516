#pragma once
// The scenario parser's pieces, one file per part of the format: the root, jobs and GPUs in
// scenario_parse.cpp, GPU models in scenario_parse_model.cpp, faults and quirks in
// scenario_parse_faults.cpp, allocations in
// scenario_parse_allocations.cpp. Every function throws ScenarioError (see yaml_reader.h).

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "sim/scenario/scenario.h"

namespace gpumeter::sim::parse {

std::string read_bounded_string(const YAML::Node& node, std::string_view path, std::size_t max_len);

GpuModelSpec parse_model(const std::string& id, const YAML::Node& node, const std::string& path);

// One entry of `faults`, appended to the scenario's fault lists.
void parse_fault(Scenario& s, const YAML::Node& node, const std::string& path);

// Profiling and NVLink (scenario_parse_profiling.cpp): a model's `nvlink`, a job's `profile`
// and `nvlink`, and the faults `nvlink_down`/`nvlink_errors` (false for other kinds).
NvlinkSpec parse_nvlink_spec(const YAML::Node& node, const std::string& path);
JobProfile parse_job_profile(const YAML::Node& node, const std::string& path);
JobNvlink parse_job_nvlink(const Scenario& s, const std::vector<unsigned>& gpus, const YAML::Node& node,
                           const std::string& path);
bool parse_nvlink_fault(Scenario& s, const std::string& kind, const YAML::Node& node, const std::string& path);

// The `quirks` list.
void parse_quirks(Scenario& s, const YAML::Node& node);

// `{namespace, pod, container}`, validated as the API server does.
KubernetesRef parse_kubernetes_ref(const YAML::Node& node, const std::string& path);

// The `allocations` list (scenario_parse_allocations.cpp), after the GPUs; `nodes` receives
// each entry's node, for later messages.
void parse_allocations(Scenario& s, const YAML::Node& node, std::vector<YAML::Node>& nodes);

// A job's `allocation:` name, as an index into s.allocations.
std::size_t resolve_allocation(const Scenario& s, const YAML::Node& node, const std::string& path);

// After the jobs: a job runs on its allocation's GPUs and within its span; a job in a pod's
// allocation takes the allocation's pod and container; allocation and job names differ.
void check_allocation_jobs(Scenario& s, const std::vector<YAML::Node>& job_nodes,
                           const std::vector<YAML::Node>& allocation_nodes);

// `mig:` (scenario_parse_mig.cpp), after the GPUs and before allocations and jobs.
void parse_mig(Scenario& s, const YAML::Node& node, const std::string& uuid_seed);

// A job's, allocation's or Xid's `mig:` instance name, as an index into s.mig.instances.
std::size_t resolve_mig(const Scenario& s, const YAML::Node& node, const std::string& path);

// An event at `at` on `gpu` inside instance `mig`: the instance is on that GPU and alive then.
void check_mig_event(const Scenario& s, const YAML::Node& node, const std::string& path, unsigned gpu, std::size_t mig,
                     Micros at);

// After the jobs: a job or allocation on a MIG-mode GPU names an instance of that GPU and lies
// within the instance's life; the jobs of an instance fit in its memory.
void check_mig_holders(const Scenario& s, const std::vector<YAML::Node>& job_nodes,
                       const std::vector<YAML::Node>& allocation_nodes);

}  // namespace gpumeter::sim::parse
