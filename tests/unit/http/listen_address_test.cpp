#include "http/listen_address.h"

#include <gtest/gtest.h>

namespace gpumeter {
namespace {

TEST(ListenAddress, PrometheusForms) {
  auto all = parse_listen_address(":9400");
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->all_interfaces());
  EXPECT_EQ(all->port, 9400);

  auto v4 = parse_listen_address("127.0.0.1:9400");
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ(v4->host, "127.0.0.1");
  EXPECT_EQ(v4->port, 9400);

  auto v6 = parse_listen_address("[::1]:9400");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->to_string(), "[::1]:9400");

  auto any6 = parse_listen_address("[::]:0");
  ASSERT_TRUE(any6.ok());
  EXPECT_EQ(any6->host, "::");
  EXPECT_EQ(any6->port, 0);

  auto name = parse_listen_address("localhost:65535");
  ASSERT_TRUE(name.ok());
  EXPECT_EQ(name->host, "localhost");
  EXPECT_EQ(name->port, 65535);
}

TEST(ListenAddress, RejectsWithAReason) {
  struct Case {
    const char* input;
    const char* reason;
  };
  for (const Case& c :
       {Case{"9400", "missing port"}, Case{"127.0.0.1", "missing port"}, Case{"127.0.0.1:", "missing port"},
        Case{"::1:9400", "brackets"}, Case{"[::1]9400", "missing port after"}, Case{"[::1:9400", "missing ']'"},
        Case{"[]:9400", "empty IPv6 host"}, Case{":65536", "0 to 65535"}, Case{":-1", "0 to 65535"},
        Case{":94x0", "0 to 65535"}, Case{"", "missing port"}, Case{"a b:80", "bad character"}}) {
    auto r = parse_listen_address(c.input);
    ASSERT_FALSE(r.ok()) << c.input;
    EXPECT_NE(r.error().message.find(c.reason), std::string::npos) << c.input << ": " << r.error().message;
    EXPECT_NE(r.error().message.find(std::string("\"") + c.input + "\""), std::string::npos)
        << "the message names the input";
  }
}

}  // namespace
}  // namespace gpumeter
