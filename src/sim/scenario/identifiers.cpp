#include "sim/scenario/identifiers.h"

#include <array>
#include <cstdint>

#include <fmt/format.h>

#include "sim/scenario/units.h"

namespace gpumeter::sim {

namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 0xCBF29CE484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ULL;
  return h;
}

// The PCI buses of the eight GPUs in a typical HGX H100 baseboard, in index order.
constexpr std::array<unsigned, 8> kHgxBuses = {0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB};

}  // namespace

std::pair<std::uint64_t, std::uint64_t> seeded_words(std::string_view seed, std::uint64_t salt, std::uint64_t second) {
  const std::uint64_t a = splitmix64(fnv1a(seed) ^ salt);
  return {a, splitmix64(a ^ second)};
}

std::string default_uuid(std::string_view seed, unsigned index) {
  auto [a, b] = seeded_words(seed, static_cast<std::uint64_t>(index) << 32, 0x5555555555555555ULL);
  return fmt::format("GPU-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", a >> 32, (a >> 16) & 0xFFFF, a & 0xFFFF, b >> 48,
                     b & 0xFFFFFFFFFFFFULL);
}

std::string default_serial(std::string_view seed, unsigned index) {
  std::uint64_t h = splitmix64(fnv1a(seed) + 0x1000 + index);
  return fmt::format("165{:010}", h % 10'000'000'000ULL);
}

PciAddress default_pci_address(unsigned index) { return PciAddress{index / 8, kHgxBuses[index % 8], 0}; }

std::optional<PciAddress> parse_pci_bus_id(std::string_view text) {
  // domain:bus:device.function
  std::size_t c1 = text.find(':');
  std::size_t c2 = c1 == std::string_view::npos ? c1 : text.find(':', c1 + 1);
  std::size_t dot = c2 == std::string_view::npos ? c2 : text.find('.', c2 + 1);
  if (dot == std::string_view::npos) return std::nullopt;
  auto hex = [](std::string_view s, std::size_t max_digits) -> std::optional<unsigned> {
    if (s.empty() || s.size() > max_digits) return std::nullopt;
    auto v = parse_unsigned(fmt::format("0x{}", s));
    if (!v) return std::nullopt;
    return static_cast<unsigned>(*v);
  };
  auto domain = hex(text.substr(0, c1), 8);
  auto bus = hex(text.substr(c1 + 1, c2 - c1 - 1), 2);
  auto device = hex(text.substr(c2 + 1, dot - c2 - 1), 2);
  auto function = hex(text.substr(dot + 1), 1);
  if (!domain || !bus || !device || !function || *device > 0x1F || *function != 0) return std::nullopt;
  return PciAddress{*domain, *bus, *device};
}

std::string format_pci_bus_id(const PciAddress& a) {
  return fmt::format("{:08X}:{:02X}:{:02X}.0", a.domain, a.bus, a.device);
}

std::string format_pci_bus_id_legacy(const PciAddress& a) {
  return fmt::format("{:04X}:{:02X}:{:02X}.0", a.domain, a.bus, a.device);
}

}  // namespace gpumeter::sim
