#include "render/text_writer.h"

#include <cstdint>

#include "render/number_format.h"
#include "util/utf8.h"

namespace gpumeter {

namespace {

constexpr std::string_view kTotalSuffix = "_total";

bool ends_with_total(std::string_view name) {
  return name.size() > kTotalSuffix.size() && name.ends_with(kTotalSuffix);
}

void append_metadata(std::string& out, std::string_view keyword, std::string_view name) {
  out.append("# ").append(keyword).push_back(' ');
  out.append(name);
}

}  // namespace

void append_label_value(std::string& out, std::string_view value) {
  for_each_utf8(out, value, [&](char c) {
    switch (c) {
      case '\\':
        out.append("\\\\");
        break;
      case '"':
        out.append("\\\"");
        break;
      case '\n':
        out.append("\\n");
        break;
      default:
        out.push_back(c);
    }
  });
}

void append_help_text(std::string& out, std::string_view help, ExpositionFormat format) {
  const bool om = format == ExpositionFormat::kOpenMetrics100;
  for_each_utf8(out, help, [&](char c) {
    switch (c) {
      case '\\':
        out.append("\\\\");
        break;
      case '\n':
        out.append("\\n");
        break;
      case '"':
        // Text 0.0.4 has no \" escape in HELP (the parser would keep the backslash); OM requires it.
        out.append(om ? "\\\"" : "\"");
        break;
      default:
        out.push_back(c);
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
