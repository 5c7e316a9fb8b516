// The agent's config file (--config.file), project rules included.
#include <string>

#include "config/config.h"
#include "fuzz_check.h"

using namespace gpumeter;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = fuzz::as_text(data, size);
  auto config = parse_config(text, "config.yaml");
  if (!config) {
    // Every error is located in the file it names.
    FUZZ_CHECK(config.error().message.rfind("config.yaml", 0) == 0);
    return 0;
  }
  FUZZ_CHECK(config->ledger.checkpoint_interval.count() >= 0);
  FUZZ_CHECK(config->ledger.owner_retention.count() >= 0);
  FUZZ_CHECK(config->processes.retention.count() >= 0);
  FUZZ_CHECK(config->attribution.kubelet.refresh_interval.count() >= 0);
  FUZZ_CHECK(config->attribution.kubelet.timeout.count() >= 0);
  for (const auto& [model, watts] : config->ledger.idle_power_watts) FUZZ_CHECK(watts >= 0);
  (void)config->attribution.kubelet.effective_socket("/nonexistent-rootfs");
  return 0;
}
