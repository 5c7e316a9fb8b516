#pragma once
// HTTP basic authentication against bcrypt hashes, as exporter-toolkit does it: verification through
// libxcrypt's crypt_r, unknown users checked against a dummy hash so that timing does not reveal which
// users exist, and successful checks cached so that a scraper does not pay bcrypt on every scrape.
// Failures are not cached: every guess keeps its full cost.
//
// Each bcrypt costs tens of milliseconds of CPU. At most max_concurrent_bcrypt run at once, without a
// lock around them; a check beyond that is answered kBusy at once instead of waiting, so a flood of
// wrong passwords can neither queue up good scrapes nor take more than that many cores.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace gpumeter {

enum class AuthVerdict {
  kGranted,
  kDenied,
  kBusy,  // bcrypt was needed and every slot was taken: try again later
};

class BasicAuth {
 public:
  // `users`: user -> bcrypt hash.
  explicit BasicAuth(std::map<std::string, std::string> users, size_t max_concurrent_bcrypt = 2);

  // The verdict on `authorization` (the Authorization header value) when it needs no bcrypt: denied
  // when malformed, granted when cached. Never blocks; nullopt when only bcrypt can tell.
  std::optional<AuthVerdict> check_without_bcrypt(std::string_view authorization);
  // The full verdict; may run one bcrypt in the calling thread, never waits for another.
  AuthVerdict check(std::string_view authorization);

  uint64_t bcrypt_runs() const { return bcrypt_runs_.load(); }  // for tests of the cache
  size_t bcrypt_in_flight() const { return bcrypt_in_flight_.load(); }
  // A hint: check() may still find every slot taken by the time it runs.
  bool bcrypt_slot_free() const { return bcrypt_in_flight_.load() < max_bcrypt_; }

 private:
  struct Parsed {
    std::string user, password;
    const std::string* hash;  // the user's, or the dummy for unknown users
    bool known;
    std::string cache_key;
  };
  std::optional<Parsed> parse(std::string_view authorization) const;
  bool verify(const std::string& password, const std::string& hash);

  const std::map<std::string, std::string> users_;
  const size_t max_bcrypt_;
  std::atomic<size_t> bcrypt_in_flight_{0};
  std::mutex cache_mu_;
  std::set<std::string> cache_;  // SHA-256 of user, hash and password; never the password itself
  std::atomic<uint64_t> bcrypt_runs_{0};
};

// Standard base64 with padding, as in the Authorization header; false on malformed input.
bool decode_base64(std::string_view in, std::string& out);

}  // namespace gpumeter
