#include "render/text_writer.h"

#include <cstdint>

#include "render/number_format.h"

namespace gpumeter {

namespace {

constexpr std::string_view kTotalSuffix = "_total";
constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

bool ends_with_total(std::string_view name) {
  return name.size() > kTotalSuffix.size() && name.ends_with(kTotalSuffix);
}

// Length of the valid UTF-8 sequence starting at s[i], or 0 when it is not one (overlong forms,
// surrogates and code points above U+10FFFF count as invalid, as in Go's utf8.ValidString).
size_t utf8_sequence_length(std::string_view s, size_t i) {
  auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  uint8_t c = b(i);
  if (c < 0x80) return 1;
  size_t len;
  uint8_t lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  if (b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (size_t k = 2; k < len; ++k) {
    if (b(i + k) < 0x80 || b(i + k) > 0xBF) return 0;
  }
  return len;
}

// Calls emit(char) for plain ASCII and appends multi-byte sequences (or U+FFFD) directly.
template <typename EmitAscii>
void for_each_utf8(std::string& out, std::string_view s, EmitAscii emit) {
  size_t i = 0;
  while (i < s.size()) {
    size_t n = utf8_sequence_length(s, i);
    if (n == 1) {
      emit(s[i]);
      i += 1;
    } else if (n == 0) {
      out.append(kReplacementChar);
      i += 1;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
}

void append_metadata(std::string& out, std::string_view keyword, std::string_view name) {
  out.append("# ").append(keyword).push_back(' ');
  out.append(name);
}

}  // namespace

void append_label_value(std::string& out, std::string_view value) {
  for_each_utf8(out, value, [&](char c) {
    switch (c) {
      case '\\': out.append("\\\\"); break;
      case '"': out.append("\\\""); break;
      case '\n': out.append("\\n"); break;
      default: out.push_back(c);
    }
  });
}

void append_help_text(std::string& out, std::string_view help, ExpositionFormat format) {
  const bool om = format == ExpositionFormat::kOpenMetrics100;
  for_each_utf8(out, help, [&](char c) {
    switch (c) {
      case '\\': out.append("\\\\"); break;
      case '\n': out.append("\\n"); break;
      case '"':
        // Text 0.0.4 has no \" escape in HELP (the parser would keep the backslash); OM requires it.
        out.append(om ? "\\\"" : "\"");
        break;
      default: out.push_back(c);
    }
  });
}

void append_family(std::string& out, const MetricFamily& family, ExpositionFormat format) {
  const bool om = format == ExpositionFormat::kOpenMetrics100;
  bool counter = family.type == MetricType::kCounter;
  std::string_view type_name = counter ? "counter" : "gauge";
  if (om && counter && family.foreign_name && !ends_with_total(family.name)) {
    counter = false;
    type_name = "unknown";
  }

  std::string_view family_name = family.name;
  std::string om_sample_name;  // only differs from family.name for a counter missing its suffix
  std::string_view sample_name = family.name;
  if (om && counter) {
    if (ends_with_total(family.name)) {
      family_name.remove_suffix(kTotalSuffix.size());
    } else {
      om_sample_name = family.name + std::string(kTotalSuffix);
      sample_name = om_sample_name;
    }
  }

  if (om) {
    append_metadata(out, "TYPE", family_name);
    out.push_back(' ');
    out.append(type_name).push_back('\n');
  }
  append_metadata(out, "HELP", family_name);
  out.push_back(' ');
  append_help_text(out, family.help, format);
  out.push_back('\n');
  if (!om) {
    append_metadata(out, "TYPE", family_name);
    out.push_back(' ');
    out.append(type_name).push_back('\n');
  }

  for (const MetricSample& sample : family.samples) {
    out.append(sample_name);
    if (!sample.labels.empty()) {
      out.push_back('{');
      bool first = true;
      for (const auto& [name, value] : sample.labels) {
        if (!first) out.push_back(',');
        first = false;
        out.append(name).append("=\"");
        append_label_value(out, value);
        out.push_back('"');
      }
      out.push_back('}');
    }
    out.push_back(' ');
    append_sample_value(out, sample.value);
    out.push_back('\n');
  }
}

std::string render(const std::vector<MetricFamily>& families, ExpositionFormat format) {
  std::string out;
  size_t samples = 0;
  for (const auto& f : families) samples += f.samples.size();
  out.reserve(families.size() * 160 + samples * 96);  // typical line lengths; avoids regrowth
  for (const auto& f : families) append_family(out, f, format);
  return out;
}

}  // namespace gpumeter
