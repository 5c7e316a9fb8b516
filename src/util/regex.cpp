#include "util/regex.h"

#include <re2/re2.h>

#include <cerrno>
#include <optional>

namespace gpumeter {

Result<FullMatchRegex> FullMatchRegex::compile(const std::string& pattern) {
  re2::RE2::Options options;
  options.set_log_errors(false);
  auto re = std::make_shared<const re2::RE2>(pattern, options);
  if (!re->ok()) return Error{EINVAL, re->error()};
  FullMatchRegex r;
  r.re_ = std::move(re);
  return r;
}

unsigned FullMatchRegex::groups() const { return static_cast<unsigned>(re_->NumberOfCapturingGroups()); }

bool FullMatchRegex::matches(std::string_view value) const {
  return re_->Match(re2::StringPiece(value.data(), value.size()), 0, value.size(), re2::RE2::ANCHOR_BOTH, nullptr, 0);
}

bool FullMatchRegex::match(std::string_view value, std::vector<std::optional<std::string_view>>& groups) const {
  std::vector<re2::StringPiece> m(static_cast<std::size_t>(re_->NumberOfCapturingGroups()) + 1);
  if (!re_->Match(re2::StringPiece(value.data(), value.size()), 0, value.size(), re2::RE2::ANCHOR_BOTH, m.data(),
                  static_cast<int>(m.size()))) {
    return false;
  }
  groups.clear();
  for (const re2::StringPiece& p : m) {
    if (p.data() == nullptr) {
      groups.emplace_back(std::nullopt);
    } else {
      groups.emplace_back(std::string_view(p.data(), p.size()));
    }
  }
  return true;
}

}  // namespace gpumeter
