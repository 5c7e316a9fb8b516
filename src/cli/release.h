#pragma once
// An operator's release of the GPUs (POST /-/release, SIGUSR1; docs/alerts.md, "Resetting a
// GPU"): every backend closes its vendor library for a period, so that a GPU can be reset, its
// MIG mode changed or the driver unloaded, and opens it again after. No reading is lost: the
// ledger counts the time as gap, and every counter resumes where it stood.

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "util/log.h"
#include "util/result.h"

namespace gpumeter::cli {

// What SIGUSR1 and a query without `for` release for, and the longest a query may ask: a release
// that nobody ends must not stop the billing for long.
inline constexpr std::chrono::minutes kDefaultRelease{10};
inline constexpr std::chrono::hours kLongestRelease{1};

// The period of POST /-/release's query: "for=<duration>" (util/duration.h), at most
// kLongestRelease, kDefaultRelease without it, 0 to take the GPUs back now. An error with code
// 400 names what is wrong.
Result<std::chrono::milliseconds> release_period(std::string_view query);

// Releases each backend for `period` (asked by `by`, for the log); the answer says, a line per
// backend, what it did. An error when a backend could not let go.
Result<std::string> release_backends(const std::vector<Backend*>& backends, std::chrono::milliseconds period,
                                     std::string_view by, Logger& log);

}  // namespace gpumeter::cli
