// ConfigReloader and restart_only_changes: a reload reads both files again and applies them
// whole or not at all, says which settings wait for a restart, and notices a changed file
// (a ConfigMap's symlink swap included) without reloading an unchanged one.

#include "cli/config_reload.h"
#include "fake_clock.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

namespace gpumeter::cli {
namespace {

namespace fs = std::filesystem;
using Strings = std::vector<std::string>;

Config parse_ok(const std::string& yaml) {
  auto c = parse_config(yaml, "test.yaml");
  EXPECT_TRUE(c.ok()) << c.error().message;
  return c.ok() ? std::move(*c) : Config{};
}

constexpr const char* kBase =
    "attribution:\n  environment: [GPUMETER_PROJECT]\n  kubelet:\n    socket: off\n"
    "project:\n  default: unknown\n  rules:\n    - {source: env.GPUMETER_PROJECT}\n";

TEST(RestartOnlyChanges, ProjectEnvironmentAndCompatAreLive) {
  const Config before = parse_ok(kBase);
  EXPECT_EQ(restart_only_changes(before, before), Strings{});
  const Config after = parse_ok(
      "attribution:\n  environment: [GPUMETER_PROJECT, TEAM]\n  kubelet:\n    socket: off\n"
      "project:\n  default: other\n  rules:\n    - {source: env.TEAM}\n"
      "compat:\n  sets: [nvidia-smi]\n  hostname: node-1\n");
  EXPECT_EQ(restart_only_changes(before, after), Strings{});
}

TEST(RestartOnlyChanges, NamesEachSettingReadAtStart) {
  const Config before = parse_ok(kBase);
  const Config after = parse_ok(
      "attribution:\n  environment: [GPUMETER_PROJECT]\n  slurm_refresh_interval: 20s\n"
      "  kubelet:\n    socket: off\n    refresh_interval: 5s\n"
      "project:\n  default: unknown\n  rules:\n    - {source: env.GPUMETER_PROJECT}\n"
      "ledger:\n  labels: [project, user]\n  checkpoint_interval: 10s\n"
      "processes:\n  max_series: 10\nexposition:\n  max_series: 5000\n");
  EXPECT_EQ(restart_only_changes(before, after),
            (Strings{"attribution.slurm_refresh_interval", "attribution.kubelet", "ledger.checkpoint_interval",
                     "ledger.labels", "processes.max_series", "exposition.max_series"}));
}

// A directory of its own with the files, a log captured in memory, and a reloader whose
// prepare step records what it was given and may refuse it.
class ReloaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gpumeter-reload-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    clock_.set_wall_us(1000 * 1'000'000);
    config_ = (dir_ / "gpumeter.yaml").string();
    write(config_, kBase);
    log_file_ = ::open_memstream(&log_buf_, &log_len_);
    log_ = std::make_unique<Logger>(LogLevel::kInfo, LogFormat::kLogfmt, log_file_);
  }
  void TearDown() override {
    reloader_.reset();
    log_.reset();
    std::fclose(log_file_);
    std::free(log_buf_);
    fs::remove_all(dir_);
  }
  static void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::trunc) << text; }
  std::string log() {
    std::fflush(log_file_);
    return std::string(log_buf_, log_len_);
  }
  ConfigReloader& make(std::string web = "") {
    auto config = load_config(config_);
    EXPECT_TRUE(config.ok());
    ReloadedSettings current{*config, nullptr};
    if (!web.empty()) {
      auto loaded = load_web_config(web);
      EXPECT_TRUE(loaded.ok()) << loaded.error().message;
      if (loaded) current.web = std::make_shared<const WebConfig>(*loaded);
    }
    reloader_ = std::make_unique<ConfigReloader>(
        ConfigReloader::Files{config_, std::move(web)}, current,
        [this](const ReloadedSettings& s) -> Result<std::function<void()>> {
          ++prepared_;
          if (!refuse_.empty()) return Error{0, refuse_};
          return std::function<void()>([this, s] {
            applied_.push_back(s.config.project.default_project);
            applied_web_ = s.web;
          });
        },
        *log_, &clock_);
    return *reloader_;
  }

  fs::path dir_;
  std::string config_;
  char* log_buf_ = nullptr;
  size_t log_len_ = 0;
  std::FILE* log_file_ = nullptr;
  std::unique_ptr<Logger> log_;
  std::unique_ptr<ConfigReloader> reloader_;
  testing::FakeClock clock_;
  int prepared_ = 0;
  std::string refuse_;
  Strings applied_;
  std::shared_ptr<const WebConfig> applied_web_;
};

double successful(const ReloadStatus& s) { return s.successful.load() ? 1 : 0; }

TEST_F(ReloaderTest, AppliesANewConfigAndStampsTheSuccess) {
  ConfigReloader& r = make();
  EXPECT_EQ(successful(*r.status()), 1);
  EXPECT_EQ(r.status()->success_unix.load(), 1000);  // the start is a successful load
  EXPECT_FALSE(r.files_changed());
  std::string text = kBase;
  text.replace(text.find("default: unknown"), 16, "default: renamed");
  write(config_, text + "ledger:\n  labels: [project]\n");
  EXPECT_TRUE(r.files_changed());
  clock_.set_wall_us(2000 * 1'000'000);
  ASSERT_TRUE(r.reload("SIGHUP").ok());
  EXPECT_EQ(applied_, Strings{"renamed"});
  EXPECT_EQ(successful(*r.status()), 1);
  EXPECT_EQ(r.status()->success_unix.load(), 2000);
  EXPECT_FALSE(r.files_changed());
  // The ledger's labels are read at start only: named, and the reload still succeeds.
  EXPECT_NE(log().find("take effect at the next restart"), std::string::npos) << log();
  EXPECT_NE(log().find("settings=ledger.labels"), std::string::npos) << log();
  EXPECT_NE(log().find("configuration reloaded"), std::string::npos) << log();
}

TEST_F(ReloaderTest, ABrokenFileIsRefusedWithItsReasonAndNothingApplied) {
  ConfigReloader& r = make();
  write(config_, std::string(kBase) + "ledger:\n  nonsense: 1\n");
  clock_.set_wall_us(2000 * 1'000'000);
  auto done = r.reload("SIGHUP");
  ASSERT_FALSE(done.ok());
  EXPECT_NE(done.error().message.find("gpumeter.yaml:10:"), std::string::npos) << done.error().message;
  EXPECT_EQ(prepared_, 0);
  EXPECT_TRUE(applied_.empty());
  EXPECT_EQ(successful(*r.status()), 0);
  EXPECT_EQ(r.status()->success_unix.load(), 1000);
  EXPECT_NE(log().find("previous configuration stays in force"), std::string::npos) << log();
  EXPECT_NE(log().find("unknown key 'nonsense'"), std::string::npos) << log();
  // The broken content was read: the periodic check does not try it again until it changes.
  EXPECT_FALSE(r.files_changed());
  write(config_, kBase);
  EXPECT_TRUE(r.files_changed());
  ASSERT_TRUE(r.reload("file change").ok());
  EXPECT_EQ(successful(*r.status()), 1);
  EXPECT_EQ(r.status()->success_unix.load(), 2000);
}

TEST_F(ReloaderTest, ARefusalOfTheCheckedSettingsAppliesNothing) {
  ConfigReloader& r = make();
  refuse_ = "compat settings: no such file";
  auto done = r.reload("/-/reload");
  ASSERT_FALSE(done.ok());
  EXPECT_EQ(done.error().message, "compat settings: no such file");
  EXPECT_EQ(prepared_, 1);
  EXPECT_TRUE(applied_.empty());
  EXPECT_EQ(successful(*r.status()), 0);
}

TEST_F(ReloaderTest, ReadsTheWebConfigToo) {
  const std::string web = (dir_ / "web.yml").string();
  write(web, "http_server_config:\n  headers:\n    X-Frame-Options: deny\n");
  ConfigReloader& r = make(web);
  EXPECT_FALSE(r.files_changed());
  write(web, "http_server_config:\n  headers:\n    X-Frame-Options: sameorigin\n");
  EXPECT_TRUE(r.files_changed());
  auto done = r.reload("SIGHUP");
  ASSERT_TRUE(done.ok()) << done.error().message;
  ASSERT_NE(applied_web_, nullptr);
  ASSERT_EQ(applied_web_->headers.size(), 1u);
  EXPECT_EQ(applied_web_->headers[0].second, "sameorigin");
  // A bad web config refuses the whole reload, the agent config with it.
  write(web, "basic_auth_users:\n  ops: not-a-hash\n");
  ASSERT_FALSE(r.reload("SIGHUP").ok());
  EXPECT_EQ(applied_.size(), 1u);
  // A file that disappeared is a failed reload, not an empty config.
  fs::remove(web);
  EXPECT_TRUE(r.files_changed());
  auto gone = r.reload("SIGHUP");
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.error().message.find("cannot read"), std::string::npos) << gone.error().message;
}

// A reload reads each file as the start does: something other than a regular file of at most
// 1 MiB put in the config's place is refused, and the config in force stays. A FIFO is
// refused without waiting for a writer, and /dev/zero without reading it.
TEST_F(ReloaderTest, AFileReplacedByAnythingButABoundedRegularFileIsRefused) {
  ConfigReloader& r = make();
  const fs::path path = config_;
  auto replace = [&](const std::function<void()>& make_it) {
    fs::remove_all(path);
    make_it();
  };
  const std::vector<std::pair<std::string, std::function<void()>>> cases = {
      {"a directory", [&] { fs::create_directory(path); }},
      {"a link to /dev/null", [&] { fs::create_symlink("/dev/null", path); }},
      {"a link to /dev/zero", [&] { fs::create_symlink("/dev/zero", path); }},
      {"a FIFO", [&] { ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0); }},
      {"over 1 MiB", [&] { write(config_, std::string(kBase) + "# " + std::string(1 << 20, 'x') + "\n"); }},
  };
  for (const auto& [name, make_it] : cases) {
    replace(make_it);
    auto done = r.reload("SIGHUP");
    ASSERT_FALSE(done.ok()) << name;
    EXPECT_NE(done.error().message.find("cannot read the config file"), std::string::npos) << done.error().message;
    EXPECT_EQ(prepared_, 0) << name;
    EXPECT_EQ(successful(*r.status()), 0) << name;
  }
  replace([&] { write(config_, kBase); });
  ASSERT_TRUE(r.reload("SIGHUP").ok());
  EXPECT_EQ(applied_, Strings{"unknown"});
}

// Basic auth and TLS are never turned off by a reload: a web config emptied, cut short by an
// editor writing in place, or swapped for a directory would otherwise open the endpoint.
TEST_F(ReloaderTest, AReloadNeverTurnsBasicAuthOrTlsOff) {
  const std::string web = (dir_ / "web.yml").string();
  const std::string hash = "$2y$10$" + std::string(53, 'a');
  const std::string with_auth = "basic_auth_users:\n  ops: '" + hash + "'\n";
  write(web, with_auth);
  ConfigReloader& r = make(web);
  for (const std::string& text : {std::string(), std::string("# comment only\n"), std::string("basic_auth_users:\n  "),
                                  std::string("http_server_config:\n  http2: false\n")}) {
    write(web, text);
    auto done = r.reload("file change");
    ASSERT_FALSE(done.ok()) << text;
    EXPECT_NE(done.error().message.find("would turn basic auth off"), std::string::npos) << done.error().message;
  }
  fs::remove(web);
  fs::create_directory(web);
  ASSERT_FALSE(r.reload("file change").ok());
  EXPECT_EQ(prepared_, 0);
  EXPECT_EQ(successful(*r.status()), 0);
  fs::remove(web);
  // Another user, or a second one, is a change like any other.
  write(web, with_auth + "  dev: '" + hash + "'\n");
  ASSERT_TRUE(r.reload("file change").ok());
  ASSERT_NE(applied_web_, nullptr);
  EXPECT_EQ(applied_web_->basic_auth_users.size(), 2u);

  // TLS likewise (the files are only probed here; the prepare step loads them).
  write((dir_ / "cert.pem").string(), "cert");
  write((dir_ / "key.pem").string(), "key");
  const std::string tls = "tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n";
  write(web, tls);
  ConfigReloader& with_tls = make(web);
  write(web, "http_server_config:\n  http2: false\n");
  auto done = with_tls.reload("SIGHUP");
  ASSERT_FALSE(done.ok());
  EXPECT_NE(done.error().message.find("would turn TLS off"), std::string::npos) << done.error().message;
}

TEST_F(ReloaderTest, TheWatchFollowsAConfigMapSymlinkSwap) {
  // A ConfigMap volume: gpumeter.yaml -> ..data/gpumeter.yaml, ..data -> ..v1, swapped to ..v2.
  fs::create_directories(dir_ / "..v1");
  fs::create_directories(dir_ / "..v2");
  write((dir_ / "..v1" / "cm.yaml").string(), kBase);
  std::string text = kBase;
  text.replace(text.find("default: unknown"), 16, "default: swapped");
  write((dir_ / "..v2" / "cm.yaml").string(), text);
  fs::create_directory_symlink("..v1", dir_ / "..data");
  fs::create_symlink("..data/cm.yaml", dir_ / "cm.yaml");
  config_ = (dir_ / "cm.yaml").string();
  ConfigReloader& r = make();
  EXPECT_FALSE(r.files_changed());
  clock_.set_wall_us(2000 * 1'000'000);  // read by the watch's thread from here on
  r.start_watch(std::chrono::milliseconds(20));
  fs::create_directory_symlink("..v2", dir_ / "..data_tmp");
  fs::rename(dir_ / "..data_tmp", dir_ / "..data");
  // Generous: the watch checks every 20 ms.
  for (int i = 0; i < 500 && r.status()->success_unix.load() != 2000; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  r.stop_watch();  // joined: what the watch applied is visible here
  EXPECT_EQ(applied_, Strings{"swapped"});
  EXPECT_NE(log().find("trigger=\"file change\""), std::string::npos) << log();
}

TEST(ReloadFamilies, ServeTheStatus) {
  ReloadStatus s;
  s.successful = false;
  s.success_unix = 1234.5;
  auto f = reload_families(s);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].name, "gpumeter_config_last_reload_successful");
  EXPECT_EQ(f[0].samples.at(0).value, 0);
  EXPECT_EQ(f[1].name, "gpumeter_config_last_reload_success_timestamp_seconds");
  EXPECT_EQ(f[1].samples.at(0).value, 1234.5);
}

}  // namespace
}  // namespace gpumeter::cli
