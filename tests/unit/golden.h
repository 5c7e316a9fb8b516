#pragma once
// Golden files under tests/golden/: output compared byte for byte. With GPUMETER_UPDATE_GOLDEN=1
// in the environment the files are rewritten instead; review the diff.

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>

namespace gpumeter::testing {

inline std::string golden_path(const std::string& name) {
  return std::string(GPUMETER_SOURCE_DIR) + "/tests/golden/" + name;
}

inline bool update_golden() {
  const char* v = std::getenv("GPUMETER_UPDATE_GOLDEN");
  return v != nullptr && std::string(v) == "1";
}

// The golden file's text; nullopt when it is missing.
inline std::optional<std::string> read_golden(const std::string& name) {
  std::ifstream in(golden_path(name), std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

inline void check_golden(const std::string& name, const std::string& actual) {
  const std::string path = golden_path(name);
  if (update_golden()) {
    std::ofstream(path, std::ios::binary) << actual;
    std::cout << "GPUMETER_UPDATE_GOLDEN=1: rewrote " << path << "\n";
    return;
  }
  auto expected = read_golden(name);
  ASSERT_TRUE(expected) << "missing golden file " << path << " (create it with GPUMETER_UPDATE_GOLDEN=1)";
  EXPECT_EQ(actual, *expected) << "output differs from " << path
                               << "; if the change is intended, rerun with GPUMETER_UPDATE_GOLDEN=1";
}

}  // namespace gpumeter::testing
