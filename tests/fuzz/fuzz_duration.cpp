// Durations and quantities, the syntax of every flag and config value with a unit:
// parse_duration ("1m30s") and the exact conversions behind the YAML readers (units::).
#include <cmath>

#include "fuzz_check.h"
#include "util/duration.h"
#include "util/yaml_reader.h"

using namespace gpumeter;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = fuzz::as_text(data, size);

  auto d = parse_duration(text);
  if (d) {
    FUZZ_CHECK(d->count() >= 0);
    auto again = parse_duration(text);
    FUZZ_CHECK(again && *again == *d);
  } else {
    FUZZ_CHECK(!d.error().message.empty());
  }

  if (auto us = units::parse_duration_us(text)) FUZZ_CHECK(*us >= 0);
  (void)units::parse_byte_size(text);
  if (auto v = units::parse_double(text)) FUZZ_CHECK(std::isfinite(*v));
  (void)units::parse_unsigned(text);
  // Scaling is exact: a number that is whole at unit 1 is exactly 1000 times that at unit 1000.
  if (auto v = units::scale_decimal(text, 1); v && *v <= UINT64_MAX / 1000) {
    FUZZ_CHECK(units::scale_decimal(text, 1000) == *v * 1000);
  }
  return 0;
}
