#include "http/negotiation.h"

#include "util/ascii.h"

#include <algorithm>
#include <charconv>
#include <optional>
#include <string>
#include <vector>

namespace gpumeter {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Splits on `sep` outside double quotes, so a quoted parameter value may contain it.
std::vector<std::string_view> split_unquoted(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  bool quoted = false;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '"') quoted = !quoted;
    if (s[i] == sep && !quoted) {
      out.push_back(trim(s.substr(start, i - start)));
      start = i + 1;
    }
  }
  out.push_back(trim(s.substr(start)));
  return out;
}

std::string_view unquote(std::string_view v) {
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') return v.substr(1, v.size() - 2);
  return v;
}

// RFC 9110 qvalue: 0..1 with up to three decimals. Anything else makes the entry unusable (q = 0).
double parse_q(std::string_view v) {
  v = unquote(v);
  double q = 0;
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), q);
  if (ec != std::errc() || ptr != v.data() + v.size() || !(q >= 0 && q <= 1)) return 0;
  return q;
}

struct Entry {
  std::string_view value;  // media range or coding, without parameters
  double q = 1;
  std::optional<std::string_view> version;
};

std::vector<Entry> parse_list(std::string_view header) {
  std::vector<Entry> out;
  for (std::string_view item : split_unquoted(header, ',')) {
    if (item.empty()) continue;
    auto parts = split_unquoted(item, ';');
    Entry e;
    e.value = parts[0];
    for (size_t i = 1; i < parts.size(); ++i) {
      const size_t eq = parts[i].find('=');
      if (eq == std::string_view::npos) continue;
      std::string_view key = trim(parts[i].substr(0, eq));
      std::string_view val = trim(parts[i].substr(eq + 1));
      if (iequals_ascii(key, "q")) {
        e.q = parse_q(val);
      } else if (iequals_ascii(key, "version")) {
        e.version = unquote(val);
      }
    }
    out.push_back(e);
  }
  return out;
}

// How specifically an Accept entry names text 0.0.4: 3 exact, 2 text/*, 1 */*, 0 not at all.
int text_specificity(const Entry& e) {
  if (iequals_ascii(e.value, "text/plain")) return !e.version || *e.version == "0.0.4" ? 3 : 0;
  if (iequals_ascii(e.value, "text/*")) return 2;
  if (iequals_ascii(e.value, "*/*")) return 1;
  return 0;
}

}  // namespace

ExpositionFormat negotiate_format(std::string_view accept) {
  double om_q = 0, text_q = 0;
  size_t om_pos = SIZE_MAX, text_pos = SIZE_MAX;
  int text_spec = 0;
  const auto entries = parse_list(accept);
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    if (iequals_ascii(e.value, "application/openmetrics-text") && (!e.version || *e.version == "1.0.0")) {
      if (om_pos == SIZE_MAX || e.q > om_q) {
        om_q = e.q;
        om_pos = i;
      }
    }
    // The most specific range decides text's q (RFC 9110 12.5.1), not the highest.
    const int spec = text_specificity(e);
    if (spec > text_spec) {
      text_spec = spec;
      text_q = e.q;
      text_pos = i;
    }
  }
  if (om_pos == SIZE_MAX || om_q <= 0) return ExpositionFormat::kText004;
  if (om_q > text_q || (om_q == text_q && om_pos < text_pos)) return ExpositionFormat::kOpenMetrics100;
  return ExpositionFormat::kText004;
}

bool accepts_gzip(std::string_view accept_encoding) {
  std::optional<double> gzip_q, any_q;
  for (const Entry& e : parse_list(accept_encoding)) {
    if (iequals_ascii(e.value, "gzip") || iequals_ascii(e.value, "x-gzip")) {
      gzip_q = std::max(gzip_q.value_or(0), e.q);
    } else if (e.value == "*") {
      any_q = e.q;
    }
  }
  if (gzip_q) return *gzip_q > 0;
  return any_q && *any_q > 0;
}

}  // namespace gpumeter
