#pragma once
// HTTP basic authentication against bcrypt hashes, as exporter-toolkit does it: verification through
// libxcrypt's crypt_r, one bcrypt at a time (each costs tens of milliseconds of CPU), unknown users
// checked against a dummy hash so that timing does not reveal which users exist, and successful
// checks cached so that a scraper does not pay bcrypt on every scrape. Failures are not cached:
// every guess keeps its full cost.

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

namespace gpumeter {

class BasicAuth {
 public:
  explicit BasicAuth(std::map<std::string, std::string> users);  // user -> bcrypt hash

  // True when `authorization` (the Authorization header value) carries valid Basic credentials.
  bool check(std::string_view authorization);

  uint64_t bcrypt_runs() const { return bcrypt_runs_.load(); }  // for tests of the cache

 private:
  bool verify(const std::string& password, const std::string& hash);

  const std::map<std::string, std::string> users_;
  std::mutex bcrypt_mu_;
  std::mutex cache_mu_;
  std::set<std::string> cache_;  // SHA-256 of user, hash and password; never the password itself
  std::atomic<uint64_t> bcrypt_runs_{0};
};

// Standard base64 with padding, as in the Authorization header; false on malformed input.
bool decode_base64(std::string_view in, std::string& out);

}  // namespace gpumeter
