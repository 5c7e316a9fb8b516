#include "attribution/project_rules.h"

#include <fmt/format.h>

#include <algorithm>

#include "model/owner.h"
#include "attribution/procfs.h"
#include "util/utf8.h"

namespace gpumeter {

namespace {

Error field_error(RuleField f, std::string message) { return Error{static_cast<int>(f), std::move(message)}; }

std::string_view field_name(RuleField f) {
  switch (f) {
    case RuleField::kSource:
      return "source";
    case RuleField::kMatch:
      return "match";
    case RuleField::kProject:
      return "project";
    case RuleField::kMap:
      return "map";
  }
  return "";
}

}  // namespace

bool is_known_attribute(std::string_view name) {
  if (name.substr(0, kEnvAttributePrefix.size()) == kEnvAttributePrefix) {
    return valid_env_name(name.substr(kEnvAttributePrefix.size()));
  }
  return std::find(std::begin(kAttributeNames), std::end(kAttributeNames), name) != std::end(kAttributeNames);
}

std::string_view attribute_env_variable(std::string_view name) {
  if (name == "slurm_account") return kSlurmAccountVariable;
  if (name.substr(0, kEnvAttributePrefix.size()) == kEnvAttributePrefix) return name.substr(kEnvAttributePrefix.size());
  return {};
}

void Attributes::set(std::string_view name, std::string value) {
  std::string key =
      name == "slurm_account" ? fmt::format("{}{}", kEnvAttributePrefix, kSlurmAccountVariable) : std::string(name);
  values_.insert_or_assign(std::move(key), std::move(value));
}

std::string_view Attributes::get(std::string_view name) const {
  if (name == "slurm_account") return get(fmt::format("{}{}", kEnvAttributePrefix, kSlurmAccountVariable));
  auto it = values_.find(name);
  return it == values_.end() ? std::string_view{} : std::string_view(it->second);
}

Result<ProjectRule> ProjectRule::compile(ProjectRuleSpec spec) {
  ProjectRule rule;
  if (spec.source.empty()) return field_error(RuleField::kSource, "must name an attribute");
  if (!is_known_attribute(spec.source)) {
    std::string names;
    for (std::string_view n : kAttributeNames) names += fmt::format("{}, ", n);
    return field_error(RuleField::kSource,
                       fmt::format("unknown attribute '{}' (expected one of: {}env.<NAME>)", spec.source, names));
  }

  unsigned groups = 0;
  if (spec.match) {
    auto re = FullMatchRegex::compile(*spec.match);
    if (!re) {
      return field_error(RuleField::kMatch,
                         fmt::format("invalid regular expression '{}': {}", *spec.match, re.error().message));
    }
    rule.regex_ = std::move(re).value();
    groups = rule.regex_->groups();
  }

  std::string_view t = spec.project ? std::string_view(*spec.project) : std::string_view("$0");
  if (t.empty()) return field_error(RuleField::kProject, "must not be empty (it would never give a project)");
  std::string literal;
  for (std::size_t i = 0; i < t.size();) {
    if (t[i] != '$') {
      literal += t[i++];
      continue;
    }
    if (i + 1 < t.size() && t[i + 1] == '$') {
      literal += '$';
      i += 2;
      continue;
    }
    std::size_t begin = i + 1;
    std::size_t end = begin;
    bool braced = begin < t.size() && t[begin] == '{';
    if (braced) ++begin, ++end;
    while (end < t.size() && t[end] >= '0' && t[end] <= '9' && end - begin < 6) ++end;
    if (end == begin || (braced && (end >= t.size() || t[end] != '}'))) {
      return field_error(RuleField::kProject,
                         fmt::format("'$' at offset {} must be followed by a group number ($1 or ${{1}}), or "
                                     "written $$",
                                     i));
    }
    unsigned group = static_cast<unsigned>(std::stoul(std::string(t.substr(begin, end - begin))));
    if (group > groups) {
      return field_error(RuleField::kProject,
                         spec.match ? fmt::format("refers to group ${} but the match has {} group{}", group, groups,
                                                  groups == 1 ? "" : "s")
                                    : fmt::format("refers to group ${} but the rule has no match (only $0, the "
                                                  "whole value, is available)",
                                                  group));
    }
    if (!literal.empty()) rule.pieces_.emplace_back(std::move(literal));
    literal.clear();
    rule.pieces_.emplace_back(group);
    i = braced ? end + 1 : end;
  }
  if (!literal.empty()) rule.pieces_.emplace_back(std::move(literal));

  if (spec.map) {
    if (spec.map->empty()) return field_error(RuleField::kMap, "must have at least one entry");
    for (const auto& [from, to] : *spec.map) {
      if (to.empty()) {
        return field_error(RuleField::kMap, fmt::format("the project for '{}' must not be empty", from));
      }
      if (to.size() > kMaxLabelValueBytes) {
        return field_error(RuleField::kMap, fmt::format("the project for '{}' is {} bytes long; at most {}", from,
                                                        to.size(), kMaxLabelValueBytes));
      }
    }
  }
  rule.spec_ = std::move(spec);
  return rule;
}

std::optional<std::string> ProjectRule::apply(const Attributes& attributes) const {
  std::string_view value = attributes.get(spec_.source);
  if (value.empty()) return std::nullopt;
  std::vector<std::optional<std::string_view>> m;
  if (regex_) {
    if (value.size() > kMaxMatchedValueBytes) return std::nullopt;
    if (!regex_->match(value, m)) return std::nullopt;
  }
  std::string out;
  for (const Piece& p : pieces_) {
    if (const auto* text = std::get_if<std::string>(&p)) {
      out += *text;
    } else {
      unsigned g = std::get<unsigned>(p);
      if (g == 0) {
        out += value;
      } else if (g < m.size() && m[g]) {  // an optional group that did not take part adds nothing
        out += *m[g];
      }
    }
  }
  if (spec_.map) {
    auto it = spec_.map->find(out);
    if (it == spec_.map->end()) return std::nullopt;
    out = it->second;
  }
  // As every owner label value (owner_builder.cpp), before its length is judged.
  out = valid_utf8(out);
  if (out.empty() || out.size() > kMaxLabelValueBytes) return std::nullopt;
  return out;
}

ProjectResolver::ProjectResolver(std::vector<ProjectRule> rules, std::string default_project)
    : rules_(std::move(rules)), default_(std::move(default_project)) {}

Result<ProjectResolver> ProjectResolver::create(std::vector<ProjectRuleSpec> specs, std::string default_project) {
  if (default_project.size() > kMaxLabelValueBytes) {
    return Error{0, fmt::format("default: {} bytes long; at most {}", default_project.size(), kMaxLabelValueBytes)};
  }
  std::vector<ProjectRule> rules;
  rules.reserve(specs.size());
  for (std::size_t i = 0; i < specs.size(); ++i) {
    auto rule = ProjectRule::compile(std::move(specs[i]));
    if (!rule) {
      RuleField f = static_cast<RuleField>(rule.error().code);
      return Error{rule.error().code, fmt::format("rules[{}].{}: {}", i, field_name(f), rule.error().message)};
    }
    rules.push_back(std::move(*rule));
  }
  return ProjectResolver(std::move(rules), std::move(default_project));
}

ProjectResolver::Resolution ProjectResolver::explain(const Attributes& attributes) const {
  for (std::size_t i = 0; i < rules_.size(); ++i) {
    if (auto project = rules_[i].apply(attributes)) return {std::move(*project), static_cast<int>(i)};
  }
  return {default_, -1};
}

std::string ProjectResolver::resolve(const Attributes& attributes) const { return explain(attributes).project; }

}  // namespace gpumeter
