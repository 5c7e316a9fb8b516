#pragma once
// Located reading of YAML nodes for the scenario parser. The generic readers live in
// src/util/yaml_reader.h and are shared with the agent's config parser; this header keeps
// their names in gpumeter::sim and adds the two readers only scenarios use. Every failure
// throws ScenarioError (YamlError) with the node's line and column and the field's dotted
// path, which parse_scenario() turns into an Error value.

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string_view>

#include "sim/scenario/time.h"
#include "util/yaml_reader.h"

namespace gpumeter::sim {

using ScenarioError = gpumeter::YamlError;
using gpumeter::fail_at;
using gpumeter::MapReader;
using gpumeter::read_bool;
using gpumeter::read_bytes;
using gpumeter::read_double;
using gpumeter::read_duration;  // returns Micros (std::int64_t)
using gpumeter::read_string;
using gpumeter::read_unsigned;

int read_ratio_percent(const YAML::Node& node, std::string_view path);
std::int64_t read_milliwatts(const YAML::Node& node, std::string_view path);  // written in watts

}  // namespace gpumeter::sim
