#pragma once
// The project resolver: ordered rules from the config file turn a process's attributes
// (user, namespace, Slurm account, an allow-listed environment variable, ...) into the
// `project` label. The first rule that yields a non-empty project wins; when none does, the
// configured default applies. See docs/configuration.md for the rule semantics.

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "util/regex.h"
#include "util/result.h"

namespace gpumeter {

// The attribute names a rule can read, besides "env.<NAME>". "slurm_account" is another name
// for "env.SLURM_JOB_ACCOUNT".
inline constexpr std::string_view kAttributeNames[] = {
    "user",    "uid",       "namespace",     "pod",          "container", "pod_uid", "container_id",
    "hpc_job", "slurm_job", "slurm_account", "systemd_unit", "cgroup",    "comm"};
inline constexpr std::string_view kEnvAttributePrefix = "env.";
inline constexpr std::string_view kSlurmAccountVariable = "SLURM_JOB_ACCOUNT";

// Whether `name` is one of kAttributeNames or "env." followed by a valid variable name.
bool is_known_attribute(std::string_view name);
// The environment variable an attribute reads ("env.X" -> "X", "slurm_account" ->
// "SLURM_JOB_ACCOUNT"), or "" for attributes that do not come from the environment.
std::string_view attribute_env_variable(std::string_view name);

// Named values of one process. Absent and empty are the same: "".
class Attributes {
 public:
  void set(std::string_view name, std::string value);  // "slurm_account" sets env.SLURM_JOB_ACCOUNT
  std::string_view get(std::string_view name) const;
  const std::map<std::string, std::string, std::less<>>& values() const { return values_; }

 private:
  std::map<std::string, std::string, std::less<>> values_;
};

struct ProjectRuleSpec {
  std::string source;                  // an attribute name
  std::optional<std::string> match;    // RE2 regex (Prometheus' dialect) that must match the whole value
  std::optional<std::string> project;  // template with $0 (the whole value), $1.., ${N}, $$; default "$0"
  std::optional<std::map<std::string, std::string>> map;  // exact lookup of the templated value
};

// Which part of a rule an error is about; carried in Error::code by ProjectRule::compile.
enum class RuleField { kSource = 1, kMatch = 2, kProject = 3, kMap = 4 };

// A rule whose result is longer than kMaxLabelValueBytes (owner.h) does not apply, and a map
// entry or default project that long is refused at load.

// Values longer than this never match a rule's regex. RE2 is linear in the value, so this is a
// bound on the work one process's environment can cause, not a guard against backtracking.
inline constexpr std::size_t kMaxMatchedValueBytes = 1024;

class ProjectRule {
 public:
  // Validates the rule: a known source, a regex that compiles (the error quotes the regex
  // library's reason), template groups that the regex has, a non-empty template, and a map
  // with at least one entry and no empty projects.
  static Result<ProjectRule> compile(ProjectRuleSpec spec);

  // The project this rule gives, or nullopt when it does not apply: the source is empty,
  // the regex does not match the whole value, the map has no entry for the templated value,
  // or the result is empty.
  std::optional<std::string> apply(const Attributes& attributes) const;

  const ProjectRuleSpec& spec() const { return spec_; }

 private:
  using Piece = std::variant<std::string, unsigned>;  // literal text or a group number
  ProjectRule() = default;

  ProjectRuleSpec spec_;
  std::optional<FullMatchRegex> regex_;
  std::vector<Piece> pieces_;
};

class ProjectResolver {
 public:
  ProjectResolver() = default;  // no rules; every process gets the empty project
  ProjectResolver(std::vector<ProjectRule> rules, std::string default_project);

  // Compiles every rule; an error names the rule ("rules[2].match: ...").
  static Result<ProjectResolver> create(std::vector<ProjectRuleSpec> specs, std::string default_project);

  std::string resolve(const Attributes& attributes) const;

  struct Resolution {
    std::string project;
    int rule = -1;  // index of the rule that gave the project, -1 for the default
  };
  Resolution explain(const Attributes& attributes) const;

  const std::vector<ProjectRule>& rules() const { return rules_; }
  const std::string& default_project() const { return default_; }

 private:
  std::vector<ProjectRule> rules_;
  std::string default_;
};

}  // namespace gpumeter
