#pragma once
// The identifiers of simulated GPUs: UUIDs, serials and PCI bus ids. Defaults for GPUs a
// scenario does not name are deterministic in the GPU index and the scenario's uuid_seed, so two
// runs of one scenario show the same UUIDs, while two simulated nodes given different seeds never
// share one (UUIDs key every time series downstream).

#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace gpumeter::sim {

std::string default_uuid(std::string_view seed, unsigned index);
// Two 64-bit words drawn from `seed` and `salt` (FNV-1a of the seed, mixed by splitmix64): the
// deterministic bits behind every simulated identifier.
std::pair<std::uint64_t, std::uint64_t> seeded_words(std::string_view seed, std::uint64_t salt, std::uint64_t second);
std::string default_serial(std::string_view seed, unsigned index);

struct PciAddress {
  unsigned domain = 0;
  unsigned bus = 0;
  unsigned device = 0;
};
PciAddress default_pci_address(unsigned index);

// Accepts "00000000:18:00.0" and "0000:18:00.0".
std::optional<PciAddress> parse_pci_bus_id(std::string_view text);
std::string format_pci_bus_id(const PciAddress& a);         // "%08X:%02X:%02X.0"
std::string format_pci_bus_id_legacy(const PciAddress& a);  // "%04X:%02X:%02X.0"

}  // namespace gpumeter::sim
