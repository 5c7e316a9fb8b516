#include "ledger/state_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace gpumeter {
namespace {

namespace fs = std::filesystem;

class StateFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gpumeter-state-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path() const { return (dir_ / "ledger.json").string(); }
  void write(const std::string& s) { std::ofstream(path()) << s; }
  fs::path dir_;
};

TEST_F(StateFileTest, AtomicWriteReplacesTheFileAndLeavesNoTemporary) {
  ASSERT_TRUE(write_file_atomic(path(), "first").ok());
  auto n = write_file_atomic(path(), "second");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 6u);
  std::ifstream in(path());
  std::string s;
  in >> s;
  EXPECT_EQ(s, "second");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(StateFileTest, WriteIntoAMissingDirectoryFailsWithThePath) {
  auto r = write_file_atomic((dir_ / "no" / "such" / "ledger.json").string(), "x");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("no/such"), std::string::npos);
}

TEST_F(StateFileTest, MissingFileIsNotAProblem) {
  auto s = load_ledger_state(path());
  EXPECT_TRUE(s.document.is_null());
  EXPECT_TRUE(s.problem.empty());
}

TEST_F(StateFileTest, ValidStateLoads) {
  write(R"({"format":"gpumeter-ledger-state","version":1,"gpus":{}})");
  auto s = load_ledger_state(path());
  EXPECT_TRUE(s.problem.empty());
  EXPECT_TRUE(s.document.is_object());
  EXPECT_TRUE(fs::exists(path()));
}

struct BadCase {
  const char* contents;
  const char* problem;
};

TEST_F(StateFileTest, CorruptOrForeignFilesAreSetAsideAndReported) {
  for (const BadCase& c : {BadCase{"{\"format\":\"gpumeter-ledger-state\",\"vers", "not valid JSON"},
                           BadCase{"[1,2,3]", "not a gpumeter ledger state file"},
                           BadCase{R"({"format":"something-else","version":1,"gpus":{}})", "not a gpumeter"},
                           BadCase{R"({"format":"gpumeter-ledger-state","version":7,"gpus":{}})",
                                   "unsupported state version 7"},
                           BadCase{R"({"format":"gpumeter-ledger-state","version":1})", "no \"gpus\""}}) {
    write(c.contents);
    auto s = load_ledger_state(path());
    EXPECT_TRUE(s.document.is_null()) << c.contents;
    EXPECT_NE(s.problem.find(c.problem), std::string::npos) << s.problem;
    ASSERT_FALSE(s.set_aside_path.empty());
    EXPECT_FALSE(fs::exists(path()));
    std::ifstream in(s.set_aside_path);
    std::string kept((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(kept, c.contents);  // nothing is lost: the operator can inspect it
    fs::remove(s.set_aside_path);
  }
}

}  // namespace
}  // namespace gpumeter
