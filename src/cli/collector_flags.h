#pragma once
// `--collector.<name>` and `--no-collector.<name>`, as node_exporter spells them, for every
// collector of model/collectors.h. The two flags of one collector exclude each other.

#include <CLI/CLI.hpp>

#include "collect/collection_plan.h"

namespace gpumeter::cli {

void add_collector_flags(CLI::App& cmd, CollectorSwitches& switches);

}  // namespace gpumeter::cli
