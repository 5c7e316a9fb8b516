#pragma once
// A small structured logger in the two formats Prometheus exporters offer (--log.format
// logfmt|json). One instance is made in main and passed by reference; there is no global.

#include <cstdio>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpumeter {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };
enum class LogFormat { kLogfmt, kJson };

std::optional<LogLevel> parse_log_level(std::string_view s);
std::optional<LogFormat> parse_log_format(std::string_view s);

using LogFields = std::vector<std::pair<std::string, std::string>>;

class Logger {
 public:
  explicit Logger(LogLevel level = LogLevel::kInfo, LogFormat format = LogFormat::kLogfmt, std::FILE* out = stderr)
      : level_(level), format_(format), out_(out) {}

  bool enabled(LogLevel level) const { return level >= level_; }
  void log(LogLevel level, std::string_view msg, const LogFields& fields = {});
  void debug(std::string_view msg, const LogFields& f = {}) { log(LogLevel::kDebug, msg, f); }
  void info(std::string_view msg, const LogFields& f = {}) { log(LogLevel::kInfo, msg, f); }
  void warn(std::string_view msg, const LogFields& f = {}) { log(LogLevel::kWarn, msg, f); }
  void error(std::string_view msg, const LogFields& f = {}) { log(LogLevel::kError, msg, f); }

  // Formats one line without the timestamp; exposed for tests.
  static std::string format_line(LogFormat format, std::string_view ts, LogLevel level, std::string_view msg,
                                 const LogFields& fields);

 private:
  LogLevel level_;
  LogFormat format_;
  std::FILE* out_;
  std::mutex mu_;
};

}  // namespace gpumeter
