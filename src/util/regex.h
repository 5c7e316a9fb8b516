#pragma once
// Regular expressions a user writes (project rules, pricing pools) compile with RE2: matching
// takes time linear in the value, whatever the pattern, so a value the user controls (an
// environment variable, a node name) can never pin a CPU; and RE2 is the dialect Prometheus
// uses for `=~`, so a pattern accepted here is accepted by promtool in a generated rule.

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace re2 {
class RE2;
}

namespace gpumeter {

// A compiled pattern matched against whole values, as a Prometheus `=~` matcher is. Immutable
// and cheap to copy (the compiled program is shared).
class FullMatchRegex {
 public:
  // The error is RE2's reason, e.g. "invalid escape sequence: \1".
  static Result<FullMatchRegex> compile(const std::string& pattern);

  // Capturing groups, not counting the whole match.
  unsigned groups() const;
  bool matches(std::string_view value) const;
  // On a match, the whole value then each group; a group that did not take part is nullopt.
  bool match(std::string_view value, std::vector<std::optional<std::string_view>>& groups) const;

 private:
  std::shared_ptr<const re2::RE2> re_;
};

}  // namespace gpumeter
