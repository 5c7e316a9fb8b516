#pragma once
// The scenario parser's pieces, one file per part of the format: the root, jobs and GPUs in
// scenario_parse.cpp, GPU models in scenario_parse_model.cpp, faults and quirks in
// scenario_parse_faults.cpp. Every function throws ScenarioError (see yaml_reader.h).

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "sim/model/scenario.h"

namespace gpumeter::sim::parse {

std::string read_bounded_string(const YAML::Node& node, std::string_view path, std::size_t max_len);

GpuModelSpec parse_model(const std::string& id, const YAML::Node& node, const std::string& path);

// One entry of `faults`, appended to the scenario's fault lists.
void parse_fault(Scenario& s, const YAML::Node& node, const std::string& path);

// The `quirks` list.
void parse_quirks(Scenario& s, const YAML::Node& node);

}  // namespace gpumeter::sim::parse
