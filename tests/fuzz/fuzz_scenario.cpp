// Simulator scenario files (gpumeter serve --sim.scenario, gpumeter sim).
#include <algorithm>
#include <string>

#include "fuzz_check.h"
#include "sim/scenario/scenario_parse.h"

using namespace gpumeter;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = fuzz::as_text(data, size);
  auto scenario = sim::parse_scenario(text, "scenario.yaml");
  if (!scenario) {
    FUZZ_CHECK(scenario.error().message.rfind("scenario.yaml", 0) == 0);
    return 0;
  }
  FUZZ_CHECK(scenario->time_scale > 0);
  // Every GPU names a model the scenario defines: model_of() indexes without a check.
  for (unsigned g = 0; g < scenario->gpus.size(); ++g) {
    FUZZ_CHECK(scenario->gpus[g].model < scenario->models.size());
    (void)scenario->model_of(g);
  }
  // A job's allocation exists, holds the job's GPUs, and each allocation's GPUs exist.
  for (const sim::Allocation& a : scenario->allocations) {
    for (unsigned g : a.gpus) FUZZ_CHECK(g < scenario->gpus.size());
  }
  for (const sim::Job& j : scenario->jobs) {
    if (j.allocation == sim::kNoAllocation) continue;
    FUZZ_CHECK(j.allocation < scenario->allocations.size());
    const auto& held = scenario->allocations[j.allocation].gpus;
    for (unsigned g : j.gpus) FUZZ_CHECK(std::find(held.begin(), held.end(), g) != held.end());
  }
  return 0;
}
