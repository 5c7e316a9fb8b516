// The shared located YAML reader (src/util/yaml_reader.h): its errors carry the node's
// position and the field's path. Its quantity parsers are the ones the simulator uses, tested
// in tests/unit/sim/units_test.cpp.

#include "util/yaml_reader.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

namespace gpumeter {
namespace {

TEST(yaml_reader, LoadDocuments) {
  EXPECT_EQ(load_documents("").size(), 0u);
  EXPECT_EQ(load_documents("a: 1\n").size(), 1u);
  auto docs = load_documents("a: 1\n---\nb: [1, 2]\n---\n");
  ASSERT_GE(docs.size(), 2u);
  EXPECT_EQ(docs[1]["b"][1].as<int>(), 2);
  // yaml-cpp's own LoadAll never returns on these: it does not consume the ','.
  for (const auto& [yaml, line, column] :
       std::vector<std::tuple<std::string, int, int>>{{",", 0, 0}, {"a: 1\n---\n  ,b", 2, 2}, {"---\n,\n", 1, 0}}) {
    try {
      load_documents(yaml);
      ADD_FAILURE() << "no error for " << yaml;
    } catch (const YAML::ParserException& e) {
      EXPECT_EQ(e.msg, "unexpected ','") << yaml;
      EXPECT_EQ(e.mark.line, line) << yaml;
      EXPECT_EQ(e.mark.column, column) << yaml;
    }
  }
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
  EXPECT_EQ(error_of([&] { read_string(root["a"]["c"], "a.c"); }), "f.yaml:3:6: a.c: expected a string, got a list");
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
