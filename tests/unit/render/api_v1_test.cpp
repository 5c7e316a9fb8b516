// The JSON API's profiling_status (docs/api.md): a null `profiling` says why it is null.

#include "render/api_v1.h"

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "fixture_snapshot.h"

namespace gpumeter {
namespace {

nlohmann::json gpus_of(Snapshot s) {
  PreparedApi api(std::make_shared<const Snapshot>(std::move(s)));
  return nlohmann::json::parse(std::string(api.gpus()) + render_api_tail(0))["gpus"];
}

std::shared_ptr<DeviceReading> copy_of(const std::shared_ptr<const DeviceReading>& r) {
  return std::make_shared<DeviceReading>(*r);
}

TEST(ApiV1, ProfilingStatusSaysWhyProfilingIsNull) {
  Snapshot s = testing::fixture_snapshot();
  auto h100 = copy_of(s.gpus[0].reading);
  h100->profiling_supported = true;
  h100->profiling = ProfilingReading{};
  h100->profiling->sm_active_ratio = 0.61;
  s.gpus[0].reading = h100;
  auto a100 = copy_of(s.gpus[1].reading);
  a100->profiling_supported = false;
  s.gpus[1].reading = a100;

  auto gpus = gpus_of(s);
  EXPECT_EQ(gpus[0]["profiling_status"], "measured");
  EXPECT_EQ(gpus[0]["profiling"]["sm_active_ratio"], 0.61);
  EXPECT_EQ(gpus[1]["profiling_status"], "unsupported");
  EXPECT_TRUE(gpus[1]["profiling"].is_null());
  EXPECT_FALSE(gpus[2].contains("profiling_status")) << "a GPU that is down has no readings";

  // Supported, before its first pair of samples.
  auto first = copy_of(s.gpus[0].reading);
  first->profiling.reset();
  s.gpus[0].reading = first;
  EXPECT_EQ(gpus_of(s)[0]["profiling_status"], "pending");

  // The collector switched off: null on every GPU, and said so.
  s.enabled.set(CollectorId::kProfiling, false);
  gpus = gpus_of(s);
  EXPECT_EQ(gpus[0]["profiling_status"], "off");
  EXPECT_EQ(gpus[1]["profiling_status"], "off");
}

}  // namespace
}  // namespace gpumeter
