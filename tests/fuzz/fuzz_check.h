#pragma once
// Shared by the fuzz targets: an invariant that does not hold is a crash, with its reason on
// stderr, so libFuzzer keeps the input as a crash artifact.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#define FUZZ_CHECK(cond)                                                                \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                     \
    }                                                                                   \
  } while (0)

namespace gpumeter::fuzz {

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Targets that drive several small parsers take the first byte as the selector, so one corpus
// and one campaign cover them all.
struct Selected {
  unsigned selector;
  std::string_view rest;
};
inline Selected select(const std::uint8_t* data, std::size_t size, unsigned choices) {
  if (size == 0) return {0, {}};
  return {static_cast<unsigned>(data[0]) % choices, as_text(data + 1, size - 1)};
}

}  // namespace gpumeter::fuzz
