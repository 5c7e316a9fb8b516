#include "http/basic_auth.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "test_certs.h"

namespace gpumeter {
namespace {

std::string header(const std::string& user_colon_password) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out = "Basic ";
  const std::string& s = user_colon_password;
  for (size_t i = 0; i < s.size(); i += 3) {
    uint32_t n = static_cast<uint8_t>(s[i]) << 16;
    if (i + 1 < s.size()) n |= static_cast<uint8_t>(s[i + 1]) << 8;
    if (i + 2 < s.size()) n |= static_cast<uint8_t>(s[i + 2]);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < s.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += i + 2 < s.size() ? kAlphabet[n & 63] : '=';
  }
  return out;
}

TEST(Base64, Decode) {
  std::string out;
  EXPECT_TRUE(decode_base64("YWxpY2U6c2VjcmV0", out));
  EXPECT_EQ(out, "alice:secret");
  EXPECT_TRUE(decode_base64("YTpi", out));
  EXPECT_EQ(out, "a:b");
  EXPECT_TRUE(decode_base64("YTo=", out));
  EXPECT_EQ(out, "a:");
  EXPECT_TRUE(decode_base64("YQ==", out));
  EXPECT_EQ(out, "a");
  EXPECT_TRUE(decode_base64("", out));
  EXPECT_EQ(out, "");
  for (const char* bad : {"YWxpY2U", "YW=pY2U6", "Y===", "YWxp!2U6", "YQ==YQ==", "=AAA"}) {
    EXPECT_FALSE(decode_base64(bad, out)) << bad;
  }
}

class BasicAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    alice_ = testing::bcrypt_hash("secret", "$2b$");
    bob_ = testing::bcrypt_hash("hunter2", "$2y$");
    ASSERT_EQ(alice_.size(), 60u);
    ASSERT_EQ(bob_.size(), 60u);
  }
  std::string alice_, bob_;
};

TEST_F(BasicAuthTest, AcceptsRightPasswordsForBothHashPrefixes) {
  BasicAuth auth({{"alice", alice_}, {"bob", bob_}});
  EXPECT_EQ(auth.check(header("alice:secret")), AuthVerdict::kGranted);
  EXPECT_EQ(auth.check(header("bob:hunter2")), AuthVerdict::kGranted);
  EXPECT_EQ(auth.check("basic " + header("alice:secret").substr(6)), AuthVerdict::kGranted)
      << "the scheme is case-insensitive";
}

TEST_F(BasicAuthTest, RejectsEverythingElse) {
  BasicAuth auth({{"alice", alice_}});
  EXPECT_EQ(auth.check(header("alice:wrong")), AuthVerdict::kDenied);
  EXPECT_EQ(auth.check(header("alice:")), AuthVerdict::kDenied);
  EXPECT_EQ(auth.check(header("alice:secret ")), AuthVerdict::kDenied);
  EXPECT_EQ(auth.check(header("mallory:secret")), AuthVerdict::kDenied);
  EXPECT_EQ(auth.check(header("bob:hunter2")), AuthVerdict::kDenied);
  EXPECT_EQ(auth.check(""), AuthVerdict::kDenied);
  EXPECT_EQ(auth.check("Bearer abc"), AuthVerdict::kDenied);
  EXPECT_EQ(auth.check("Basic not-base64!"), AuthVerdict::kDenied);
  EXPECT_EQ(auth.check(header("alicesecret")), AuthVerdict::kDenied) << "no colon";
}

TEST_F(BasicAuthTest, CachesSuccessesButNotFailures) {
  BasicAuth auth({{"alice", alice_}});
  ASSERT_EQ(auth.check(header("alice:secret")), AuthVerdict::kGranted);
  const auto after_first = auth.bcrypt_runs();
  EXPECT_EQ(after_first, 1u);
  ASSERT_EQ(auth.check(header("alice:secret")), AuthVerdict::kGranted);
  EXPECT_EQ(auth.bcrypt_runs(), after_first) << "a repeated success must come from the cache";
  EXPECT_EQ(auth.check(header("alice:wrong")), AuthVerdict::kDenied);
  EXPECT_EQ(auth.check(header("alice:wrong")), AuthVerdict::kDenied);
  EXPECT_EQ(auth.bcrypt_runs(), after_first + 2) << "every failed guess pays for bcrypt";
  EXPECT_EQ(auth.check(header("nobody:x")), AuthVerdict::kDenied);
  EXPECT_EQ(auth.bcrypt_runs(), after_first + 3) << "unknown users cost the same as known ones";
}

TEST_F(BasicAuthTest, CachedAndMalformedNeedNoBcrypt) {
  BasicAuth auth({{"alice", alice_}});
  EXPECT_EQ(auth.check_without_bcrypt("Bearer abc"), AuthVerdict::kDenied);
  EXPECT_EQ(auth.check_without_bcrypt(header("alice:secret")), std::nullopt);
  ASSERT_EQ(auth.check(header("alice:secret")), AuthVerdict::kGranted);
  EXPECT_EQ(auth.check_without_bcrypt(header("alice:secret")), AuthVerdict::kGranted);
  EXPECT_EQ(auth.check_without_bcrypt(header("alice:wrong")), std::nullopt);
  EXPECT_EQ(auth.bcrypt_runs(), 1u);
}

// Wrong passwords used to be checked one at a time under a lock, so a flood of them queued every
// other check behind it. Now they run side by side up to the limit, and beyond it are refused at once.
TEST_F(BasicAuthTest, BcryptRunsConcurrentlyUpToTheLimitAndIsBusyBeyond) {
  const std::string slow = testing::bcrypt_hash("secret", "$2b$", 13);  // most of a second per check
  ASSERT_EQ(slow.size(), 60u);
  BasicAuth auth({{"alice", slow}, {"bob", bob_}}, 2);
  std::vector<std::thread> guessers;
  std::atomic<int> denied{0};
  for (int i = 0; i < 2; ++i) {
    guessers.emplace_back([&] {
      if (auth.check(header("alice:wrong")) == AuthVerdict::kDenied) ++denied;
    });
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (auth.bcrypt_in_flight() < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  EXPECT_EQ(auth.bcrypt_in_flight(), 2u) << "two bcrypts must be able to run at the same time";
  // A third would wait for a slot under a lock; it must be turned away instead.
  const bool overlapping = auth.bcrypt_in_flight() == 2;
  const AuthVerdict third = auth.check(header("bob:hunter2"));
  for (auto& t : guessers) t.join();
  if (overlapping) {
    EXPECT_EQ(third, AuthVerdict::kBusy);
  }
  EXPECT_EQ(denied.load(), 2);
  EXPECT_EQ(auth.check(header("bob:hunter2")), AuthVerdict::kGranted) << "slots are given back";
}

}  // namespace
}  // namespace gpumeter
