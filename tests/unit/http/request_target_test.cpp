#include "http/request_target.h"

#include <gtest/gtest.h>

namespace gpumeter {
namespace {

TEST(RequestTarget, Valid) {
  for (const char* t : {"/", "/metrics", "/metrics?x=1&y=%20", "/-/ready", "/a%2Fb", "/%7e", "/a?b#c"}) {
    EXPECT_TRUE(valid_request_target(t)) << t;
  }
}

TEST(RequestTarget, Invalid) {
  for (const char* t : {"", "*", "metrics", "http://host/metrics", "/metrics%", "/metrics%2", "/metrics%zz", "/%g0",
                        "/%00", "/a%0Ab", "/a%7Fb", "/a b", "/a\tb", "/\x7f", "/caf\xC3\xA9"}) {
    EXPECT_FALSE(valid_request_target(t)) << t;
  }
  EXPECT_FALSE(valid_request_target(std::string_view("/a\0b", 4)));
  EXPECT_TRUE(valid_request_target("/?q=%0A")) << "control escapes are only refused in the path";
}

}  // namespace
}  // namespace gpumeter
