// Pricing files (gpumeter report --pricing, gpumeter rules --pricing) and their dates.
#include <cmath>
#include <string>

#include "fuzz_check.h"
#include "pricing/pricing.h"

using namespace gpumeter;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = fuzz::as_text(data, size);

  if (auto t = pricing::parse_timestamp(text)) {
    FUZZ_CHECK(std::isfinite(*t));
    // Whole seconds survive formatting and parsing back.
    if (*t == std::floor(*t)) FUZZ_CHECK(pricing::parse_timestamp(pricing::format_timestamp(*t)) == *t);
  }

  auto p = pricing::parse_pricing(text, "pricing.yaml");
  if (!p) {
    FUZZ_CHECK(p.error().message.rfind("pricing.yaml", 0) == 0);
    return 0;
  }
  for (const auto& [model, prices] : p->gpu_models) {
    // Only the first entry may be undated (in effect since the beginning of time, whatever its
    // `from` holds); the dated ones increase strictly.
    for (std::size_t i = 1; i < prices.size(); ++i) {
      FUZZ_CHECK(prices[i].from_set);
      FUZZ_CHECK(!prices[i - 1].from_set || prices[i - 1].from < prices[i].from);
    }
    for (const auto& d : prices) FUZZ_CHECK(d.value.gpu_hour >= 0 && d.value.busy_gpu_hour >= 0);
  }
  for (std::size_t i = 1; i < p->energy.size(); ++i) {
    FUZZ_CHECK(p->energy[i].from_set);
    FUZZ_CHECK(!p->energy[i - 1].from_set || p->energy[i - 1].from < p->energy[i].from);
  }
  const auto points = p->change_points(-1e12, 1e12);
  for (std::size_t i = 1; i < points.size(); ++i) FUZZ_CHECK(points[i - 1] < points[i]);
  (void)p->gpu_price("NVIDIA H100 80GB HBM3", 1.75e9);
  (void)p->energy_price(1.75e9);
  (void)p->pool_for("gpu-node-1");
  return 0;
}
