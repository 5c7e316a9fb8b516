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
  for (const BadCase& c :
       {BadCase{"{\"format\":\"gpumeter-ledger-state\",\"vers", "not valid JSON"},
        BadCase{"[1,2,3]", "not a gpumeter ledger state file"},
        BadCase{R"({"format":"something-else","version":1,"gpus":{}})", "not a gpumeter"},
        BadCase{R"({"format":"gpumeter-ledger-state","version":7,"gpus":{}})", "unsupported state version 7"},
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

// One GPU whose ledger carries `patch` (a JSON object merged into a valid ledger).
std::string state_with(const std::string& ledger_fields) {
  return R"({"format":"gpumeter-ledger-state","version":1,"gpus":{"GPU-a":{"index":0,"model":"m","ledger":{)"
         R"("mode":"samples","cursor_us":1,"covered_seconds":1,"busy_seconds":0,"energy_joules":0,)"
         R"("gap_seconds":0,"gaps":0,"processes":[],)" +
         ledger_fields + "}}}}";
}

constexpr const char* kOwner =
    R"({"owner":{"project":"p","user":"","namespace":"","pod":"","container":"","hpc_job":""},)"
    R"("allocated_seconds":1,"busy_seconds":0,"memory_byte_seconds":0,"energy_joules":0,"last_active_us":5})";

TEST_F(StateFileTest, DuplicateOwnersAreSetAsideNamingTheFile) {
  const std::string once = state_with(std::string(R"("owners":[)") + kOwner + "]");
  const std::string twice = state_with(std::string(R"("owners":[)") + kOwner + "," + kOwner + "]");
  ASSERT_EQ(load_ledger_state((write(once), path())).problem, "");  // the valid base loads
  fs::remove(path());
  write(twice);
  auto s = load_ledger_state(path());
  EXPECT_TRUE(s.document.is_null());
  EXPECT_FALSE(s.fatal);
  EXPECT_NE(s.problem.find("twice"), std::string::npos) << s.problem;
  EXPECT_NE(s.problem.find(path()), std::string::npos) << s.problem;
  ASSERT_FALSE(s.set_aside_path.empty());
  EXPECT_FALSE(fs::exists(path()));
  std::ifstream in(s.set_aside_path);
  std::string kept((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(kept, twice);
  fs::remove(s.set_aside_path);
}

// A NaN is saved as null. One bad number never costs the file: the file loads, every valid
// owner and amount is kept, and each bad amount is listed with its GPU, owner and key.
TEST_F(StateFileTest, ImpossibleNumbersAreDroppedAndListedAndTheRestLoads) {
  const std::string other =
      R"({"owner":{"project":"q","user":"","namespace":"","pod":"","container":"","hpc_job":""},)"
      R"("allocated_seconds":7,"busy_seconds":3,"memory_byte_seconds":2,"energy_joules":9,"last_active_us":5})";
  std::string bad_owner = kOwner;
  bad_owner.replace(bad_owner.find(R"("busy_seconds":0)"), 16, R"("busy_seconds":null)");
  std::string contents = state_with(std::string(R"("owners":[)") + bad_owner + "," + other + "]");
  contents.replace(contents.find(R"("covered_seconds":1)"), 19, R"("covered_seconds":-1e9)");
  write(contents);
  auto s = load_ledger_state(path());
  EXPECT_EQ(s.problem, "");
  EXPECT_FALSE(s.fatal);
  EXPECT_TRUE(s.set_aside_path.empty());
  ASSERT_TRUE(s.document.is_object());
  ASSERT_EQ(s.dropped.size(), 2u);
  EXPECT_NE(s.dropped[0].find("GPU GPU-a"), std::string::npos) << s.dropped[0];
  EXPECT_NE(s.dropped[0].find("covered_seconds"), std::string::npos) << s.dropped[0];
  EXPECT_NE(s.dropped[1].find("\"project\":\"p\""), std::string::npos) << s.dropped[1];
  EXPECT_NE(s.dropped[1].find("\"busy_seconds\" was null"), std::string::npos) << s.dropped[1];
  // The document is what the agent resumes from: both owners are there.
  EXPECT_EQ(s.document["gpus"]["GPU-a"]["ledger"]["owners"].size(), 2u);
}

// A state file that cannot be read is left exactly as it is and stops the agent: starting
// would replace billing data nobody has read with an empty ledger at the first checkpoint.
TEST_F(StateFileTest, AStateFileThatCannotBeReadIsFatalAndLeftAlone) {
  fs::create_directories(path());  // a mis-mounted volume, say
  std::ofstream(fs::path(path()) / "inside") << "kept";
  auto s = load_ledger_state(path());
  EXPECT_TRUE(s.fatal);
  EXPECT_NE(s.problem.find(path()), std::string::npos) << s.problem;
  EXPECT_TRUE(s.set_aside_path.empty());
  EXPECT_TRUE(fs::is_directory(path()));
  EXPECT_TRUE(fs::exists(fs::path(path()) / "inside"));
}

}  // namespace
}  // namespace gpumeter
