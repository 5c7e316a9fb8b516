#include "cli/release.h"

#include "util/duration.h"

namespace gpumeter::cli {

Result<std::chrono::milliseconds> release_period(std::string_view query) {
  std::chrono::milliseconds period = kDefaultRelease;
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    const std::size_t eq = pair.find('=');
    if (pair.substr(0, eq) != "for" || eq == std::string_view::npos) {
      return Error{400, "unknown parameter \"" + std::string(pair) + "\": POST /-/release?for=<duration> (e.g. 10m)"};
    }
    auto parsed = parse_duration(pair.substr(eq + 1));
    if (!parsed) return Error{400, "for: " + parsed.error().message};
    period = *parsed;
  }
  if (period > kLongestRelease) {
    return Error{400, "for: at most 1h: the GPUs go unread for as long (repeat the release to extend it)"};
  }
  return period;
}

Result<std::string> release_backends(const std::vector<Backend*>& backends, std::chrono::milliseconds period,
                                     std::string_view by, Logger& log) {
  std::string answer;
  const std::string seconds = std::to_string(period.count() / 1000);
  for (Backend* b : backends) {
    const std::string name = b->status().backend;
    auto done = b->release(period);
    if (!done) {
      log.warn("cannot release the GPUs", {{"backend", name}, {"by", std::string(by)}, {"err", done.error().message}});
      return Error{500, name + ": " + done.error().message};
    }
    if (!*done) {
      answer += name + ": nothing to release\n";
    } else if (period.count() == 0) {
      answer += name + ": taken back at the next collection\n";
    } else {
      answer += name + ": released for " + seconds + " s; closed until then, and the ledger counts the time as gap\n";
    }
  }
  log.info("release", {{"by", std::string(by)}, {"seconds", seconds}});
  return answer;
}

}  // namespace gpumeter::cli
