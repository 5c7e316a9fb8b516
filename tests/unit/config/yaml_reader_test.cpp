// The shared located YAML reader (src/util/yaml_reader.h): its quantity parsers agree with
// the simulator's, and its errors carry the node's position and the field's path.

#include "util/yaml_reader.h"

#include <gtest/gtest.h>

#include "sim/units.h"

namespace gpumeter {
namespace {

TEST(config_yaml_reader, QuantitiesAgreeWithTheSimulator) {
  const char* inputs[] = {"0",
                          "90",
                          "0.2",
                          "1.5",
                          "1h30m",
                          "1.5h",
                          "500ms",
                          "250us",
                          "2d",
                          "1e3",
                          "-5",
                          "5 minutes",
                          "h",
                          "",
                          " 7 ",
                          "0x10",
                          "0X1f",
                          "12abc",
                          "81559MiB",
                          "80GiB",
                          "1.5GiB",
                          "4GB",
                          "1024",
                          "2TiB",
                          "1.5",
                          "80 GiBs",
                          "-1GiB",
                          "99999999999TiB",
                          "1.",
                          ".5",
                          "+3",
                          "nan",
                          "inf",
                          "1.7e308",
                          "18446744073709551616",
                          "0.0000001",
                          "3kB",
                          "3KB",
                          "9223372036854775807",
                          "106751991167d"};
  for (const char* in : inputs) {
    SCOPED_TRACE(in);
    EXPECT_EQ(units::parse_duration_us(in), sim::parse_duration(in));
    EXPECT_EQ(units::parse_byte_size(in), sim::parse_byte_size(in));
    EXPECT_EQ(units::parse_unsigned(in), sim::parse_unsigned(in));
    EXPECT_EQ(units::parse_double(in), sim::parse_double(in));
    EXPECT_EQ(units::scale_decimal(in, 1000), sim::scale_decimal(in, 1000));
  }
  EXPECT_EQ(units::parse_duration_us("1h30m"), 5'400'000'000);
  EXPECT_EQ(units::parse_byte_size("1.5GiB"), 3ULL << 29);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const YamlError& e) {
    return located_message("f.yaml", e.line, e.column, e.what());
  }
  return "no error";
}

TEST(config_yaml_reader, ErrorsCarryPositionAndPath) {
  YAML::Node doc = YAML::Load("a:\n  b: 12x\n  c: [1, 2]\n  d: {x: 1, 'y z': 2}\n");
  const YAML::Node& root = doc;
  EXPECT_EQ(error_of([&] { read_unsigned(root["a"]["b"], "a.b", 0, 100); }),
            "f.yaml:2:6: a.b: expected a non-negative integer, got '12x'");
  EXPECT_EQ(error_of([&] { read_string(root["a"]["c"], "a.c"); }),
            "f.yaml:3:6: a.c: expected a string, got a list");
  EXPECT_EQ(error_of([&] {
              MapReader(root["a"], "a", {"b", "c"});
            }),
            "f.yaml:4:3: a: unknown key 'd' (expected one of: b, c)");
  EXPECT_EQ(error_of([&] {
              MapReader(root["a"], "a", {"b", "c", "d"}).require("e");
            }),
            "f.yaml:2:3: a: missing required key 'e'");
  EXPECT_EQ(error_of([&] { read_string_list(root["a"]["b"], "a.b"); }),
            "f.yaml:2:6: a.b: expected a list such as [a, b], got a single value");
  EXPECT_EQ(located_message("f.yaml", -1, 0, "m"), "f.yaml: m");

  auto entries = read_entries(root["a"]["d"], "a.d");
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].path, "a.d.x");
  EXPECT_EQ(entries[1].path, "a.d[\"y z\"]");
  EXPECT_EQ(read_unsigned(entries[1].value, entries[1].path, 0, 5), 2u);
  EXPECT_TRUE(read_entries(YAML::Load("k:")["k"], "k").empty());
  EXPECT_TRUE(read_string_list(YAML::Load("k:")["k"], "k").empty());
  EXPECT_EQ(read_string_list(YAML::Load("[a, b]"), "k"), (std::vector<std::string>{"a", "b"}));

  YAML::Node dup = YAML::Load("m: {a: 1, a: 2}");
  const YAML::Node& dup_root = dup;
  EXPECT_EQ(error_of([&] { read_entries(dup_root["m"], "m"); }), "f.yaml:1:11: m: duplicate key 'a'");
}

TEST(config_yaml_reader, SyntaxErrorsBecomeLocatedErrors) {
  try {
    (void)YAML::Load("a: [1, 2\n");
    FAIL() << "no syntax error";
  } catch (const YAML::Exception& e) {
    Error err = to_error("f.yaml", e);
    EXPECT_EQ(err.message.rfind("f.yaml:", 0), 0u) << err.message;
  }
}

}  // namespace
}  // namespace gpumeter
