// Project rules: order, full-match regexes and their groups, map lookups, the default, and
// every validation error.

#include "attribution/project_rules.h"

#include <gtest/gtest.h>

#include "model/owner.h"

namespace gpumeter {
namespace {

ProjectResolver make(std::vector<ProjectRuleSpec> specs, std::string def = "") {
  auto r = ProjectResolver::create(std::move(specs), std::move(def));
  EXPECT_TRUE(r.ok()) << r.error().message;
  return r.ok() ? *r : ProjectResolver();
}

Attributes attrs(std::initializer_list<std::pair<const char*, const char*>> values) {
  Attributes a;
  for (const auto& [k, v] : values) a.set(k, v);
  return a;
}

TEST(attribution_rules, FirstRuleThatGivesAProjectWins) {
  ProjectResolver r =
      make({{"env.GPUMETER_PROJECT", {}, {}, {}}, {"slurm_account", {}, {}, {}}, {"user", {}, {}, {}}}, "unassigned");
  EXPECT_EQ(r.resolve(attrs({{"env.GPUMETER_PROJECT", "vision"}, {"slurm_account", "climate"}, {"user", "alice"}})),
            "vision");
  EXPECT_EQ(r.resolve(attrs({{"slurm_account", "climate"}, {"user", "alice"}})), "climate");
  EXPECT_EQ(r.resolve(attrs({{"env.GPUMETER_PROJECT", ""}, {"user", "alice"}})), "alice")
      << "an empty value does not apply";
  EXPECT_EQ(r.resolve(attrs({})), "unassigned");

  auto why = r.explain(attrs({{"user", "bob"}}));
  EXPECT_EQ(why.project, "bob");
  EXPECT_EQ(why.rule, 2);
  EXPECT_EQ(r.explain(attrs({})).rule, -1);
}

TEST(attribution_rules, SlurmAccountIsTheEnvironmentVariable) {
  ProjectResolver r = make({{"slurm_account", {}, {}, {}}});
  EXPECT_EQ(r.resolve(attrs({{"env.SLURM_JOB_ACCOUNT", "physics"}})), "physics");
  Attributes a;
  a.set("slurm_account", "chem");
  EXPECT_EQ(a.get("env.SLURM_JOB_ACCOUNT"), "chem");
  EXPECT_EQ(r.resolve(a), "chem");
}

TEST(attribution_rules, RegexGroupsAndFullMatch) {
  ProjectResolver r = make({{"namespace", "team-(.*)", "$1", {}},
                            {"pod", "(train|infer)-([a-z]+)-[0-9]+", "${2}-$1$$", {}},
                            {"cgroup", ".*/(slurm)?job_([0-9]+)/.*", "job$1:$2", {}}});
  EXPECT_EQ(r.resolve(attrs({{"namespace", "team-nlp"}})), "nlp");
  EXPECT_EQ(r.resolve(attrs({{"namespace", "ateam-nlp"}})), "") << "the regex must match the whole value";
  EXPECT_EQ(r.resolve(attrs({{"namespace", "team-"}})), "") << "an empty group gives no project";
  EXPECT_EQ(r.resolve(attrs({{"pod", "train-bert-42"}})), "bert-train$");
  EXPECT_EQ(r.resolve(attrs({{"pod", "train-bert-42x"}})), "");
  EXPECT_EQ(r.resolve(attrs({{"cgroup", "/x/job_7/step"}})), "job:7") << "an unmatched group is empty";

  std::string long_value = "team-" + std::string(kMaxMatchedValueBytes, 'a');
  EXPECT_EQ(r.resolve(attrs({{"namespace", long_value.c_str()}})), "");
}

// The common rule `([a-z0-9]+-?)+` against a value the GPU's user controls: a backtracking engine
// takes exponential time on a near-miss (35 characters pinned a worker at 100 % CPU). RE2 answers
// in linear time, so every near-miss up to the length cap is decided; this test would not finish
// with std::regex.
TEST(attribution_rules, UserControlledValuesCostLinearTime) {
  // A constant project: values up to the match cap are longer than a label value may be.
  ProjectResolver r = make({{"env.TEAM", "(([a-z0-9]+-?)+)", "matched", {}}});
  for (std::size_t n : {std::size_t{35}, std::size_t{200}, kMaxMatchedValueBytes - 1}) {
    std::string near_miss = std::string(n, 'a') + "!";
    EXPECT_EQ(r.resolve(attrs({{"env.TEAM", near_miss.c_str()}})), "") << n;
    std::string hit(n, 'a');
    EXPECT_EQ(r.resolve(attrs({{"env.TEAM", hit.c_str()}})), "matched") << n;
  }
}

// A project is a label value on every series of its owner: a rule whose result is longer than
// kMaxLabelValueBytes does not apply (the next rule, then the default, does), and the
// operator's own map entries and default are held to the same limit at load.
TEST(attribution_rules, ResultsLongerThanALabelValueDoNotApply) {
  ProjectResolver r = make({{"env.TEAM", {}, "team-$0", {}}, {"user", {}, {}, {}}}, "unassigned");
  const std::string fits(kMaxLabelValueBytes - 5, 'a');  // "team-" + it: exactly the limit
  EXPECT_EQ(r.resolve(attrs({{"env.TEAM", fits.c_str()}, {"user", "alice"}})), "team-" + fits);
  const std::string over = fits + "a";
  EXPECT_EQ(r.resolve(attrs({{"env.TEAM", over.c_str()}, {"user", "alice"}})), "alice");
  const std::string long_user(kMaxLabelValueBytes + 1, 'u');
  EXPECT_EQ(r.resolve(attrs({{"env.TEAM", over.c_str()}, {"user", long_user.c_str()}})), "unassigned");
  // A megabyte costs no more than being turned away.
  const std::string huge(1 << 20, 'a');
  EXPECT_EQ(r.resolve(attrs({{"env.TEAM", huge.c_str()}})), "unassigned");

  auto long_map = ProjectRule::compile(
      {"user", {}, {}, std::map<std::string, std::string>{{"alice", std::string(kMaxLabelValueBytes + 1, 'p')}}});
  ASSERT_FALSE(long_map.ok());
  EXPECT_EQ(long_map.error().code, static_cast<int>(RuleField::kMap));
  EXPECT_EQ(long_map.error().message, "the project for 'alice' is 257 bytes long; at most 256");
  EXPECT_TRUE(
      ProjectRule::compile(
          {"user", {}, {}, std::map<std::string, std::string>{{"alice", std::string(kMaxLabelValueBytes, 'p')}}})
          .ok());
  auto long_default = ProjectResolver::create({}, std::string(kMaxLabelValueBytes + 1, 'd'));
  ASSERT_FALSE(long_default.ok());
  EXPECT_EQ(long_default.error().message, "default: 257 bytes long; at most 256");
  EXPECT_TRUE(ProjectResolver::create({}, std::string(kMaxLabelValueBytes, 'd')).ok());
}

TEST(attribution_rules, MapLookupAndFallThrough) {
  ProjectResolver r = make({{"user", {}, {}, std::map<std::string, std::string>{{"alice", "climate"}, {"bob", "nlp"}}},
                            {"namespace", "team-(.*)", "$1", std::map<std::string, std::string>{{"ml", "ml-research"}}},
                            {"uid", {}, "uid-$0", {}}},
                           "fallback");
  EXPECT_EQ(r.resolve(attrs({{"user", "alice"}, {"uid", "1000"}})), "climate");
  EXPECT_EQ(r.resolve(attrs({{"user", "carol"}, {"uid", "1002"}})), "uid-1002") << "a map miss falls through";
  EXPECT_EQ(r.resolve(attrs({{"user", "carol"}, {"namespace", "team-ml"}})), "ml-research")
      << "the map looks up the templated value";
  EXPECT_EQ(r.resolve(attrs({{"user", "carol"}, {"namespace", "team-cv"}})), "fallback");
}

struct BadRule {
  ProjectRuleSpec spec;
  RuleField field;
  std::string message_part;
};

TEST(attribution_rules, ValidationNamesTheField) {
  std::vector<BadRule> cases = {
      {{"", {}, {}, {}}, RuleField::kSource, "must name an attribute"},
      {{"namespce", {}, {}, {}}, RuleField::kSource, "unknown attribute 'namespce'"},
      {{"env.", {}, {}, {}}, RuleField::kSource, "unknown attribute"},
      {{"env.BAD-NAME", {}, {}, {}}, RuleField::kSource, "unknown attribute 'env.BAD-NAME'"},
      {{"user", "team-(", {}, {}}, RuleField::kMatch, "invalid regular expression 'team-(':"},
      {{"user", "[z-a]", {}, {}}, RuleField::kMatch, "invalid regular expression"},
      // What Prometheus (RE2) rejects is rejected here too: back-references and look-arounds.
      {{"user", "(a)\\1", {}, {}}, RuleField::kMatch, "invalid regular expression '(a)\\1'"},
      {{"user", "(?=a)a", {}, {}}, RuleField::kMatch, "invalid regular expression '(?=a)a'"},
      {{"user", "team-(.*)", "$2", {}}, RuleField::kProject, "refers to group $2 but the match has 1 group"},
      {{"user", {}, "$1", {}}, RuleField::kProject, "the rule has no match"},
      {{"user", {}, "cost-$x", {}}, RuleField::kProject, "'$' at offset 5 must be followed by a group number"},
      {{"user", {}, "${1", {}}, RuleField::kProject, "must be followed by a group number"},
      {{"user", {}, "a$", {}}, RuleField::kProject, "must be followed by a group number"},
      {{"user", {}, "", {}}, RuleField::kProject, "must not be empty"},
      {{"user", {}, {}, std::map<std::string, std::string>{}}, RuleField::kMap, "at least one entry"},
      {{"user", {}, {}, std::map<std::string, std::string>{{"alice", ""}}},
       RuleField::kMap,
       "the project for 'alice' must not be empty"},
  };
  for (const BadRule& c : cases) {
    SCOPED_TRACE(c.message_part);
    auto rule = ProjectRule::compile(c.spec);
    ASSERT_FALSE(rule.ok());
    EXPECT_EQ(rule.error().code, static_cast<int>(c.field));
    EXPECT_NE(rule.error().message.find(c.message_part), std::string::npos) << rule.error().message;
  }
  // The regex library's own reason is quoted.
  auto paren = ProjectRule::compile({"user", "(a", {}, {}});
  ASSERT_FALSE(paren.ok());
  EXPECT_GT(paren.error().message.size(), std::string("invalid regular expression '(a': ").size());

  auto resolver = ProjectResolver::create({{"user", {}, {}, {}}, {"user", "(", {}, {}}}, "");
  ASSERT_FALSE(resolver.ok());
  EXPECT_EQ(resolver.error().message.rfind("rules[1].match: ", 0), 0u) << resolver.error().message;
}

TEST(attribution_rules, KnownAttributes) {
  for (std::string_view n : kAttributeNames) EXPECT_TRUE(is_known_attribute(n)) << n;
  EXPECT_TRUE(is_known_attribute("env.GPUMETER_PROJECT"));
  EXPECT_FALSE(is_known_attribute("env"));
  EXPECT_FALSE(is_known_attribute("job"));
  EXPECT_EQ(attribute_env_variable("slurm_account"), "SLURM_JOB_ACCOUNT");
  EXPECT_EQ(attribute_env_variable("env.X"), "X");
  EXPECT_EQ(attribute_env_variable("user"), "");
}

}  // namespace
}  // namespace gpumeter
