#include "http/basic_auth.h"

#include <gtest/gtest.h>

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
  EXPECT_TRUE(auth.check(header("alice:secret")));
  EXPECT_TRUE(auth.check(header("bob:hunter2")));
  EXPECT_TRUE(auth.check("basic " + header("alice:secret").substr(6))) << "the scheme is case-insensitive";
}

TEST_F(BasicAuthTest, RejectsEverythingElse) {
  BasicAuth auth({{"alice", alice_}});
  EXPECT_FALSE(auth.check(header("alice:wrong")));
  EXPECT_FALSE(auth.check(header("alice:")));
  EXPECT_FALSE(auth.check(header("alice:secret ")));
  EXPECT_FALSE(auth.check(header("mallory:secret")));
  EXPECT_FALSE(auth.check(header("bob:hunter2")));
  EXPECT_FALSE(auth.check(""));
  EXPECT_FALSE(auth.check("Bearer abc"));
  EXPECT_FALSE(auth.check("Basic not-base64!"));
  EXPECT_FALSE(auth.check(header("alicesecret"))) << "no colon";
}

TEST_F(BasicAuthTest, CachesSuccessesButNotFailures) {
  BasicAuth auth({{"alice", alice_}});
  ASSERT_TRUE(auth.check(header("alice:secret")));
  const auto after_first = auth.bcrypt_runs();
  EXPECT_EQ(after_first, 1u);
  ASSERT_TRUE(auth.check(header("alice:secret")));
  EXPECT_EQ(auth.bcrypt_runs(), after_first) << "a repeated success must come from the cache";
  EXPECT_FALSE(auth.check(header("alice:wrong")));
  EXPECT_FALSE(auth.check(header("alice:wrong")));
  EXPECT_EQ(auth.bcrypt_runs(), after_first + 2) << "every failed guess pays for bcrypt";
  EXPECT_FALSE(auth.check(header("nobody:x")));
  EXPECT_EQ(auth.bcrypt_runs(), after_first + 3) << "unknown users cost the same as known ones";
}

}  // namespace
}  // namespace gpumeter
