#include "util/log.h"

#include <chrono>
#include <ctime>

#include <nlohmann/json.hpp>

namespace gpumeter {

namespace {
const char* level_name(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

void append_logfmt_value(std::string& out, std::string_view v) {
  bool quote = v.empty() || v.find_first_of(" =\"\\\n\t") != std::string_view::npos;
  if (!quote) {
    out.append(v);
    return;
  }
  out.push_back('"');
  for (char c : v) {
    switch (c) {
      case '"':
        out.append("\\\"");
        break;
      case '\\':
        out.append("\\\\");
        break;
      case '\n':
        out.append("\\n");
        break;
      case '\t':
        out.append("\\t");
        break;
      default:
        out.push_back(c);
    }
  }
  out.push_back('"');
}

std::string now_rfc3339() {
  auto now = std::chrono::system_clock::now();
  auto secs = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03lldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long long>(ms));
  return buf;
}
}  // namespace

std::optional<LogLevel> parse_log_level(std::string_view s) {
  if (s == "debug") return LogLevel::kDebug;
  if (s == "info") return LogLevel::kInfo;
  if (s == "warn") return LogLevel::kWarn;
  if (s == "error") return LogLevel::kError;
  return std::nullopt;
}

std::optional<LogFormat> parse_log_format(std::string_view s) {
  if (s == "logfmt") return LogFormat::kLogfmt;
  if (s == "json") return LogFormat::kJson;
  return std::nullopt;
}

std::string Logger::format_line(LogFormat format, std::string_view ts, LogLevel level, std::string_view msg,
                                const LogFields& fields) {
  if (format == LogFormat::kJson) {
    nlohmann::ordered_json j;
    j["ts"] = ts;
    j["level"] = level_name(level);
    j["msg"] = msg;
    for (const auto& [k, v] : fields) j[k] = v;
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  std::string out = "ts=";
  out.append(ts);
  out.append(" level=");
  out.append(level_name(level));
  out.append(" msg=");
  append_logfmt_value(out, msg);
  for (const auto& [k, v] : fields) {
    out.push_back(' ');
    out.append(k);
    out.push_back('=');
    append_logfmt_value(out, v);
  }
  return out;
}

void Logger::log(LogLevel level, std::string_view msg, const LogFields& fields) {
  if (!enabled(level)) return;
  std::string line = format_line(format_, now_rfc3339(), level, msg, fields);
  line.push_back('\n');
  std::lock_guard lock(mu_);
  std::fwrite(line.data(), 1, line.size(), out_);
  std::fflush(out_);
}

}  // namespace gpumeter
