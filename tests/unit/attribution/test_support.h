#pragma once
// Helpers for the attribution tests: the procfs fixture trees and private temporary copies
// of them that a test may change.

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace gpumeter::testing {

inline std::string fixture_root() { return std::string(GPUMETER_SOURCE_DIR) + "/tests/fixtures/procfs"; }
inline std::string fixture(const std::string& layout) { return fixture_root() + "/" + layout; }

// A fresh directory removed again at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string templ = (std::filesystem::temp_directory_path() / "gpumeter-attr-XXXXXX").string();
    char* made = ::mkdtemp(templ.data());
    EXPECT_NE(made, nullptr);
    path_ = templ;
    // Readable by other users: one test reads it as nobody.
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                                            std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
                                            std::filesystem::perms::others_exec);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rest) const { return path_ + "/" + rest; }

  // A copy of a fixture layout (proc/ and etc/) in this directory; returns its root.
  std::string copy_layout(const std::string& layout) const {
    std::string dest = path_ + "/" + layout;
    std::filesystem::copy(fixture(layout), dest, std::filesystem::copy_options::recursive);
    return dest;
  }

 private:
  std::string path_;
};

inline void write_file(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace gpumeter::testing
