#include "http/basic_auth.h"

#include <crypt.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "util/ascii.h"

namespace gpumeter {

namespace {

// bcrypt of "fakepassword" (the hash exporter-toolkit uses for the same purpose).
constexpr const char* kDummyHash = "$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi";
constexpr size_t kMaxCached = 256;

std::string sha256(std::string_view a, std::string_view b, std::string_view c) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  // Length-prefixed so that ("ab", "c") and ("a", "bc") differ.
  for (std::string_view part : {a, b, c}) {
    const uint64_t n = part.size();
    EVP_DigestUpdate(ctx.get(), &n, sizeof n);
    EVP_DigestUpdate(ctx.get(), part.data(), part.size());
  }
  EVP_DigestFinal_ex(ctx.get(), digest, &len);
  return std::string(reinterpret_cast<char*>(digest), len);
}

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace

bool decode_base64(std::string_view in, std::string& out) {
  out.clear();
  if (in.size() % 4 != 0) return false;
  for (size_t i = 0; i < in.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = in[i + k];
      if (c == '=' && i + 4 == in.size() && k >= 2) {
        v[k] = 0;
        ++pad;
      } else {
        if (pad > 0) return false;  // data after padding
        v[k] = base64_value(c);
        if (v[k] < 0) return false;
      }
    }
    const uint32_t triple = (v[0] << 18) | (v[1] << 12) | (v[2] << 6) | v[3];
    out.push_back(static_cast<char>((triple >> 16) & 0xff));
    if (pad < 2) out.push_back(static_cast<char>((triple >> 8) & 0xff));
    if (pad < 1) out.push_back(static_cast<char>(triple & 0xff));
  }
  return true;
}

BasicAuth::BasicAuth(std::map<std::string, std::string> users, size_t max_concurrent_bcrypt)
    : users_(std::move(users)), max_bcrypt_(std::max<size_t>(1, max_concurrent_bcrypt)) {}

bool BasicAuth::verify(const std::string& password, const std::string& hash) {
  ++bcrypt_runs_;
  auto data = std::make_unique<crypt_data>();  // about 32 KiB: too large for a worker's stack
  std::memset(data.get(), 0, sizeof *data);
  const char* result = crypt_r(password.c_str(), hash.c_str(), data.get());
  if (result == nullptr || result[0] == '*' || std::strlen(result) != hash.size()) return false;
  unsigned char diff = 0;  // constant-time comparison
  for (size_t i = 0; i < hash.size(); ++i) diff |= static_cast<unsigned char>(result[i] ^ hash[i]);
  return diff == 0;
}

std::optional<BasicAuth::Parsed> BasicAuth::parse(std::string_view authorization) const {
  static const std::string kDummy = kDummyHash;
  constexpr std::string_view kScheme = "Basic ";
  if (!starts_with_ascii_icase(authorization, kScheme)) return std::nullopt;
  std::string_view encoded = authorization.substr(kScheme.size());
  while (!encoded.empty() && encoded.front() == ' ') encoded.remove_prefix(1);
  std::string decoded;
  if (!decode_base64(encoded, decoded)) return std::nullopt;
  const size_t colon = decoded.find(':');
  if (colon == std::string::npos) return std::nullopt;
  Parsed p;
  p.user = decoded.substr(0, colon);
  p.password = decoded.substr(colon + 1);
  auto it = users_.find(p.user);
  p.known = it != users_.end();
  p.hash = p.known ? &it->second : &kDummy;
  p.cache_key = sha256(p.user, *p.hash, p.password);
  return p;
}

std::optional<AuthVerdict> BasicAuth::check_without_bcrypt(std::string_view authorization) {
  auto parsed = parse(authorization);
  if (!parsed) return AuthVerdict::kDenied;
  std::lock_guard lock(cache_mu_);
  if (cache_.count(parsed->cache_key)) return AuthVerdict::kGranted;
  return std::nullopt;
}

AuthVerdict BasicAuth::check(std::string_view authorization) {
  auto parsed = parse(authorization);
  if (!parsed) return AuthVerdict::kDenied;
  {
    std::lock_guard lock(cache_mu_);
    if (cache_.count(parsed->cache_key)) return AuthVerdict::kGranted;
  }
  if (bcrypt_in_flight_.fetch_add(1) >= max_bcrypt_) {
    bcrypt_in_flight_.fetch_sub(1);
    return AuthVerdict::kBusy;
  }
  const bool ok = verify(parsed->password, *parsed->hash) && parsed->known;
  bcrypt_in_flight_.fetch_sub(1);
  if (!ok) return AuthVerdict::kDenied;
  std::lock_guard lock(cache_mu_);
  if (cache_.size() >= kMaxCached) cache_.clear();  // bounded; a miss only costs one bcrypt
  cache_.insert(parsed->cache_key);
  return AuthVerdict::kGranted;
}

}  // namespace gpumeter
