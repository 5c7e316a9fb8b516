#pragma once
// Shared helpers for the simulator tests: scenarios written to a private temp directory and
// a minimal model every test can extend.

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "sim/scenario/scenario_parse.h"

namespace gpumeter::sim::testing {

// The test program's own directory under $TMPDIR, removed with its contents when the program
// exits.
inline std::filesystem::path temp_dir() {
  struct Owned {
    std::filesystem::path path;
    ~Owned() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static const Owned dir{[] {
    auto path = std::filesystem::temp_directory_path() / ("gpumeter-sim-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(path);
    return path;
  }()};
  return dir.path;
}

// An empty directory `name` in the program's temp directory (what an earlier test left is removed).
inline std::filesystem::path fresh_dir(const std::string& name) {
  std::filesystem::path dir = temp_dir() / name;
  std::filesystem::remove_all(dir);
  return dir;
}

// A file's whole content ("" when it cannot be read).
inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The names in a directory, hidden ones included; empty when it does not exist.
inline std::set<std::string> entries(const std::filesystem::path& dir) {
  std::set<std::string> out;
  if (!std::filesystem::exists(dir)) return out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

inline std::string write_file(const std::string& name, const std::string& text) {
  auto path = temp_dir() / name;
  std::ofstream(path) << text;
  return path.string();
}

// One model, "m": 16 GiB, 50 W idle, 250 W at full load, 300 W limit.
inline const char* kModel = R"(
models:
  m:
    name: Test GPU 16GB
    architecture: hopper
    memory: 16GiB
    power: {limit: 300, idle: 50, max: 250}
    temperature: {idle: 30, max: 80, memory_offset: 5}
    clocks:
      graphics: {idle: 300, max: 1800}
      sm: {idle: 310, max: 1810}
      memory: {idle: 5000, max: 5001}
      video: {idle: 500, max: 1500}
)";

// An AMD model `mi` (MI300X): the entry alone, to add to a models list, and as a models list.
inline const char* kAmdModelEntry = R"(
  mi:
    vendor: amd
    name: AMD Instinct MI300X
    memory: 192GiB
    power: {limit: 750, idle: 150, max: 750}
    temperature: {idle: 40, max: 80, memory_offset: 4}
    clocks:
      graphics: {idle: 500, max: 2100}
      memory: {idle: 1300, max: 1300}
    pcie: {generation: 5, width: 16, device_id: 0x74a1}
    compute_units: 304
)";
inline const std::string kAmdModel = std::string("\nmodels:") + kAmdModelEntry;

inline Scenario parse_ok(const std::string& yaml) {
  auto s = parse_scenario(yaml, "test.yaml");
  if (!s) {
    ADD_FAILURE() << s.error().message;
    return Scenario{};
  }
  return std::move(s).value();
}

}  // namespace gpumeter::sim::testing
