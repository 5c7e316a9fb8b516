// ProcfsReader over the fixture trees (tests/fixtures/procfs, written by make_fixtures.py),
// the environment allow-list and its secrecy, the passwd reload, and the process cache.

#include "attribution/procfs.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <functional>
#include <thread>

#include "test_support.h"

namespace gpumeter {
namespace {

using testing::fixture;
using testing::TempDir;
using testing::write_file;
using Env = std::vector<std::pair<std::string, std::string>>;

ProcfsReader reader_for(const std::string& root, std::vector<std::string> allow = {}) {
  return ProcfsReader(root + "/proc", root, std::move(allow));
}

struct LayoutCase {
  std::string layout;
  unsigned pid;
  std::string comm;
  std::uint64_t start_time;
  unsigned uid;
  std::string user;
  CgroupVersion version;
  ContainerRuntime runtime;
  std::string container_prefix;  // first 12 hex of the container id
  std::string pod_uid;
  PodQos qos;
  std::string slurm_job;
  std::string systemd_unit;
};

const LayoutCase kLayouts[] = {
    {"docker-v1", 4242, "python3 ) (train", 8123456, 1000, "alice", CgroupVersion::kV1, ContainerRuntime::kDocker,
     "3f4e9a1c8b2d", "", PodQos::kNone, "", ""},
    {"docker-v2", 5151, "torchrun", 9000001, 1001, "bob", CgroupVersion::kV2, ContainerRuntime::kDocker, "a1b2c3d4e5f6",
     "", PodQos::kNone, "", ""},
    {"k8s-guaranteed", 7001, "python", 7000001, 1000, "alice", CgroupVersion::kV2, ContainerRuntime::kContainerd,
     "0c1d2e3f4a5b", "8a4f9c1e-2b3d-4e5f-9a6b-7c8d9e0f1a2b", PodQos::kGuaranteed, "", ""},
    {"k8s-burstable", 7002, "python", 7000002, 1001, "bob", CgroupVersion::kV2, ContainerRuntime::kContainerd,
     "1d2e3f4a5b6c", "9b5a0d2f-3c4e-4f6a-8b7c-8d9e0f1a2b3c", PodQos::kBurstable, "", ""},
    {"k8s-besteffort", 7003, "jupyter-lab", 7000003, 1000, "alice", CgroupVersion::kV2, ContainerRuntime::kContainerd,
     "2e3f4a5b6c7d", "ac6b1e3a-4d5f-4a7b-9c8d-9e0f1a2b3c4d", PodQos::kBestEffort, "", ""},
    {"k8s-cgroupfs", 7004, "trainer", 7000004, 1002, "carol", CgroupVersion::kV1, ContainerRuntime::kContainerd,
     "3f4a5b6c7d8e", "bd7c2f4b-5e6a-4b8c-8d9e-0f1a2b3c4d5e", PodQos::kBurstable, "", ""},
    {"k8s-cgroupfs", 7005, "server", 7000005, 0, "root", CgroupVersion::kV1, ContainerRuntime::kContainerd,
     "4a5b6c7d8e9f", "ce8d3a5c-6f7b-4c9d-9e0f-1a2b3c4d5e6f", PodQos::kGuaranteed, "", ""},
    {"crio", 7100, "python3", 7100000, 1000, "alice", CgroupVersion::kV2, ContainerRuntime::kCrio, "5b6c7d8e9f0a",
     "df9e4b6d-7a8c-4d0e-8f1a-2b3c4d5e6f70", PodQos::kBurstable, "", ""},
    {"crio", 7099, "conmon", 7099999, 0, "root", CgroupVersion::kV2, ContainerRuntime::kNone, "",
     "df9e4b6d-7a8c-4d0e-8f1a-2b3c4d5e6f70", PodQos::kBurstable, "", ""},
    {"podman", 6001, "python3", 6000001, 1000, "alice", CgroupVersion::kV2, ContainerRuntime::kPodman, "6c7d8e9f0a1b",
     "", PodQos::kNone, "", "user@1000.service"},
    {"slurm-v1", 9001, "python", 9100001, 1002, "carol", CgroupVersion::kV1, ContainerRuntime::kNone, "", "",
     PodQos::kNone, "4242", ""},
    {"slurm-v2", 9002, "srun-task", 9100002, 1001, "bob", CgroupVersion::kV2, ContainerRuntime::kNone, "", "",
     PodQos::kNone, "4243", "slurmstepd.scope"},
    {"systemd-service", 3003, "jupyterhub", 3000003, 998, "jupyter", CgroupVersion::kV2, ContainerRuntime::kNone, "",
     "", PodQos::kNone, "", "jupyter.service"},
    {"user-session", 3100, "python3", 3100000, 1000, "alice", CgroupVersion::kV2, ContainerRuntime::kNone, "", "",
     PodQos::kNone, "", "session-3.scope"},
    {"hybrid", 8001, "python", 8000001, 2000, "2000", CgroupVersion::kHybrid, ContainerRuntime::kContainerd,
     "7d8e9f0a1b2c", "e0af5c7e-8b9d-4e1f-9a2b-3c4d5e6f7081", PodQos::kBestEffort, "", ""},
};

TEST(attribution_procfs, EveryFixtureLayout) {
  for (const LayoutCase& c : kLayouts) {
    SCOPED_TRACE(c.layout + " pid " + std::to_string(c.pid));
    ProcfsReader reader = reader_for(fixture(c.layout));
    auto info = reader.read(c.pid);
    ASSERT_TRUE(info.ok()) << info.error().message;
    EXPECT_EQ(info->pid, c.pid);
    EXPECT_EQ(info->comm, c.comm);
    EXPECT_EQ(info->start_time, c.start_time);
    EXPECT_EQ(info->uid, c.uid) << "the real uid, not the effective one";
    EXPECT_EQ(info->user, c.user);
    EXPECT_EQ(info->cgroup.version, c.version);
    EXPECT_EQ(info->cgroup.runtime, c.runtime);
    EXPECT_EQ(info->cgroup.container_id.substr(0, 12), c.container_prefix);
    if (!c.container_prefix.empty()) {
      EXPECT_EQ(info->cgroup.container_id.size(), 64u);
    }
    EXPECT_EQ(info->cgroup.pod_uid, c.pod_uid);
    EXPECT_EQ(info->cgroup.qos, c.qos);
    EXPECT_EQ(info->cgroup.slurm_job, c.slurm_job);
    EXPECT_EQ(info->cgroup.systemd_unit, c.systemd_unit);
    EXPECT_TRUE(info->env.empty()) << "no allow-list, no environment";

    auto start = reader.start_time(c.pid);
    ASSERT_TRUE(start.ok());
    EXPECT_EQ(*start, c.start_time);
  }
}

TEST(attribution_procfs, FixtureEnvironFilesAreNulSeparated) {
  std::string environ = testing::read_file(fixture("docker-v1") + "/proc/4242/environ");
  EXPECT_EQ(std::count(environ.begin(), environ.end(), '\0'), 4);
  EXPECT_EQ(environ.back(), '\0');
}

TEST(attribution_procfs, SlurmV1KeepsTheUidFromTheCgroup) {
  auto info = reader_for(fixture("slurm-v1")).read(9001);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->cgroup.slurm_uid, "1002");
  EXPECT_EQ(info->cgroup.slurm_step, "0");
}

TEST(attribution_procfs, KeepsOnlyAllowListedVariablesInAllowListOrder) {
  auto info = reader_for(fixture("slurm-v1"), {"SLURM_JOB_ACCOUNT", "SLURM_JOB_ID", "NOT_SET"}).read(9001);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->env, (Env{{"SLURM_JOB_ACCOUNT", "climate"}, {"SLURM_JOB_ID", "4242"}}));
  ASSERT_NE(info->env_value("SLURM_JOB_ID"), nullptr);
  EXPECT_EQ(*info->env_value("SLURM_JOB_ID"), "4242");
  EXPECT_EQ(info->env_value("SLURM_JOB_USER"), nullptr);
  EXPECT_EQ(info->env_value("NOT_SET"), nullptr);

  auto docker = reader_for(fixture("docker-v1"), {"GPUMETER_PROJECT"}).read(4242);
  ASSERT_TRUE(docker.ok());
  EXPECT_EQ(docker->env, (Env{{"GPUMETER_PROJECT", "vision"}}));
}

// Every string a ProcessInfo holds, to search for leaked values.
std::string everything_in(const ProcessInfo& p) {
  std::string s = p.comm + "|" + p.user + "|" + p.cgroup.path + "|" + p.cgroup.container_id + "|" + p.cgroup.pod_uid +
                  "|" + p.cgroup.slurm_job + "|" + p.cgroup.systemd_unit;
  for (const auto& [k, v] : p.env) s += "|" + k + "=" + v;
  return s;
}

TEST(attribution_procfs, SecretValuesNeverLeak) {
  // Every fixture process carries a variable whose value starts with SECRET-; allow-list the
  // other names, including prefixes and extensions of the secret names.
  std::vector<std::string> allow = {"GPUMETER_PROJECT", "PATH",          "SLURM_JOB_ID", "AWS",
                                    "AWS_SECRET",       "DB_PASSWORD_X", "HF",           "API_KEY_"};
  for (const LayoutCase& c : kLayouts) {
    SCOPED_TRACE(c.layout);
    auto info = reader_for(fixture(c.layout), allow).read(c.pid);
    ASSERT_TRUE(info.ok());
    EXPECT_EQ(everything_in(*info).find("SECRET"), std::string::npos) << everything_in(*info);
  }
  auto docker = reader_for(fixture("docker-v1"), allow).read(4242);
  ASSERT_TRUE(docker.ok());
  EXPECT_EQ(docker->env, (Env{{"GPUMETER_PROJECT", "vision"}, {"PATH", "/usr/local/bin:/usr/bin"}}));

  // Errors name files, never contents: a process whose stat is broken after its environ was
  // written.
  TempDir tmp;
  std::string root = tmp.copy_layout("docker-v1");
  write_file(root + "/proc/4242/stat", "4242 (python3) S 1 SECRET-in-stat");
  auto broken = reader_for(root, {"AWS_SECRET_ACCESS_KEY"}).read(4242);
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.error().message.find("SECRET"), std::string::npos) << broken.error().message;
  EXPECT_NE(broken.error().message.find("/proc/4242/stat"), std::string::npos) << broken.error().message;
  write_file(root + "/proc/4242/status", "Name:\tSECRET-in-status\nUid:\tSECRET\n");
  write_file(root + "/proc/4242/stat", testing::read_file(fixture("docker-v1") + "/proc/4242/stat"));
  auto broken_status = reader_for(root, {"AWS_SECRET_ACCESS_KEY"}).read(4242);
  ASSERT_FALSE(broken_status.ok());
  EXPECT_EQ(broken_status.error().message.find("SECRET"), std::string::npos) << broken_status.error().message;
}

TEST(attribution_procfs, EnvironFilterStreamsAnySplit) {
  std::string environ = std::string("A=1") + '\0' + "SECRET=hunter2" + '\0' + "B=x=y" + '\0' + "A=second" + '\0' +
                        "BB=nope" + '\0' + "NOEQUALS" + '\0' + "C=" + '\0' + "D=last-without-nul";
  std::vector<std::string> allow = {"D", "C", "B", "A"};
  Env expected = {{"D", "last-without-nul"}, {"C", ""}, {"B", "x=y"}, {"A", "1"}};
  for (std::size_t piece : {1u, 2u, 3u, 7u, 4096u}) {
    SCOPED_TRACE(piece);
    EnvironFilter f(allow);
    for (std::size_t i = 0; i < environ.size(); i += piece) f.feed(std::string_view(environ).substr(i, piece));
    EXPECT_EQ(f.finish(), expected);
  }
}

TEST(attribution_procfs, EnvironFilterDropsOverlongValues) {
  std::string environ =
      "LONG=" + std::string(kMaxEnvValueBytes + 1, 'x') + '\0' + "OK=" + std::string(kMaxEnvValueBytes, 'y') + '\0';
  std::vector<std::string> allow = {"LONG", "OK"};
  EnvironFilter f(allow);
  f.feed(environ);
  Env env = f.finish();
  ASSERT_EQ(env.size(), 1u);
  EXPECT_EQ(env[0].first, "OK");
  EXPECT_EQ(env[0].second.size(), kMaxEnvValueBytes);
}

// A process's environment is the user's to fill, up to 6 MiB on Linux: only the first
// kMaxEnvironBytes are scanned, and a value the limit cuts is not kept cut.
TEST(attribution_procfs, EnvironIsScannedOnlyUpToItsLimit) {
  TempDir tmp;
  const std::string root = tmp.copy_layout("docker-v1");
  const std::string environ_path = root + "/proc/4242/environ";
  auto env_of = [&](const std::string& environ) {
    write_file(environ_path, environ);
    auto info = reader_for(root, {"GPUMETER_PROJECT"}).read(4242);
    EXPECT_TRUE(info.ok()) << info.error().message;
    return info.ok() ? info->env : Env{};
  };
  const std::string nul(1, '\0');
  const std::string pad = "PAD=" + std::string(kMaxEnvironBytes, 'p') + nul;

  EXPECT_EQ(env_of("GPUMETER_PROJECT=early" + nul + pad + pad), (Env{{"GPUMETER_PROJECT", "early"}}));
  EXPECT_EQ(env_of(pad + "GPUMETER_PROJECT=late" + nul), Env{});
  const std::string almost = "PAD=" + std::string(kMaxEnvironBytes - 30, 'p') + nul;
  EXPECT_EQ(env_of(almost + "GPUMETER_PROJECT=" + std::string(100, 'v') + nul), Env{});
  // Ending exactly at the limit is not cut.
  const std::string exact = almost + "GPUMETER_PROJECT=exactly" + nul;
  ASSERT_EQ(exact.size(), kMaxEnvironBytes);
  EXPECT_EQ(env_of(exact), (Env{{"GPUMETER_PROJECT", "exactly"}}));
  EXPECT_EQ(env_of(exact.substr(0, exact.size() - 1)), (Env{{"GPUMETER_PROJECT", "exactly"}}));
}

TEST(attribution_procfs, ValidEnvNames) {
  EXPECT_TRUE(valid_env_name("SLURM_JOB_ID"));
  EXPECT_TRUE(valid_env_name("_x1"));
  EXPECT_FALSE(valid_env_name("1X"));
  EXPECT_FALSE(valid_env_name("A-B"));
  EXPECT_FALSE(valid_env_name("A=B"));
  EXPECT_FALSE(valid_env_name(""));
}

// Reads pid 4242 of `root` in a child process that is not root (it drops to nobody when the
// tests run as root, where file modes do not stop reads) and reports what it saw.
int read_as_other_user(const std::string& root) {
  pid_t child = ::fork();
  if (child == 0) {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(10);
    auto info = reader_for(root, {"GPUMETER_PROJECT"}).read(4242);
    if (!info.ok()) ::_exit(11);
    if (!info->env.empty()) ::_exit(12);
    if (info->comm != "python3 ) (train" || info->user != "alice") ::_exit(13);
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

TEST(attribution_procfs, UnreadableEnvironIsNotAnError) {
  TempDir tmp;
  std::string root = tmp.copy_layout("docker-v1");
  std::string environ = root + "/proc/4242/environ";
  // The kernel gives another user's environ mode 0400: EACCES.
  ASSERT_EQ(::chmod(environ.c_str(), 0400), 0);
  if (::geteuid() != 0) {
    ASSERT_EQ(::chmod(environ.c_str(), 0000), 0);
  }
  EXPECT_EQ(read_as_other_user(root), 0);

  // Any other read failure (here EISDIR) also leaves the environment unknown, not an error.
  std::filesystem::remove(environ);
  std::filesystem::create_directory(environ);
  auto info = reader_for(root, {"GPUMETER_PROJECT"}).read(4242);
  ASSERT_TRUE(info.ok()) << info.error().message;
  EXPECT_TRUE(info->env.empty());
}

TEST(attribution_procfs, ProcessThatIsGone) {
  auto info = reader_for(fixture("docker-v1")).read(999999);
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.error().code, ENOENT);
  EXPECT_NE(info.error().message.find("999999/stat"), std::string::npos) << info.error().message;
  EXPECT_FALSE(reader_for(fixture("docker-v1")).start_time(999999).ok());

  // Gone between reading stat and environ: the environ read fails with ENOENT.
  TempDir tmp;
  std::string root = tmp.copy_layout("docker-v1");
  std::filesystem::remove(root + "/proc/4242/environ");
  auto vanished = reader_for(root, {"PATH"}).read(4242);
  ASSERT_FALSE(vanished.ok());
  EXPECT_EQ(vanished.error().code, ENOENT);
}

TEST(attribution_procfs, ParseStat) {
  auto f = parse_proc_stat("17 (a) (b)) c) R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 424242 20 21\n");
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->comm, "a) (b)) c");
  EXPECT_EQ(f->start_time, 424242u);
  auto empty_comm = parse_proc_stat("1 () S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 5");
  ASSERT_TRUE(empty_comm.ok());
  EXPECT_EQ(empty_comm->comm, "");
  EXPECT_EQ(empty_comm->start_time, 5u);
  EXPECT_FALSE(parse_proc_stat("1 (x) S 1 2 3").ok());
  EXPECT_FALSE(parse_proc_stat("1 x S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 5").ok());
  EXPECT_FALSE(parse_proc_stat("1 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 -5").ok());
  EXPECT_FALSE(parse_proc_stat("").ok());
}

TEST(attribution_procfs, ParseBootTime) {
  auto b = parse_boot_time("cpu  1 2 3\nintr 5 6 7\nctxt 9\nbtime 1790000000\nprocesses 4\n");
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_EQ(*b, 1790000000);
  EXPECT_FALSE(parse_boot_time("cpu 1 2 3\n").ok());
  EXPECT_FALSE(parse_boot_time("btime x\n").ok());
  EXPECT_FALSE(parse_boot_time("btime -4\n").ok());
  EXPECT_FALSE(parse_boot_time("nobtime 5\n").ok());
}

TEST(attribution_procfs, StartTimeOnTheSystemClockFromBtime) {
  TempDir tmp;
  std::string root = tmp.copy_layout("docker-v1");
  auto without = reader_for(root).read(4242);
  ASSERT_TRUE(without.ok()) << without.error().message;
  EXPECT_FALSE(without->start_unix_us.has_value()) << "no /proc/stat, so no btime";
  // A long interrupt line before btime, as on a large host, is read through.
  write_file(root + "/proc/stat", "cpu  1 2 3\nintr " + std::string(200000, '7') + "\nbtime 1700000000\n");
  auto with = reader_for(root).read(4242);
  ASSERT_TRUE(with.ok()) << with.error().message;
  ASSERT_TRUE(with->start_unix_us.has_value());
  const auto ticks = static_cast<std::uint64_t>(::sysconf(_SC_CLK_TCK));
  EXPECT_EQ(*with->start_unix_us,
            1700000000LL * 1000000 + static_cast<std::int64_t>(with->start_time * 1000000 / ticks));
}

TEST(attribution_procfs, ParseStatusUid) {
  auto uid = parse_status_uid("Name:\tx\nUid:\t1000\t0\t0\t0\nGid:\t5\t5\t5\t5\n");
  ASSERT_TRUE(uid.ok());
  EXPECT_EQ(*uid, 1000u);
  EXPECT_FALSE(parse_status_uid("Name:\tx\nGid:\t5\n").ok());
  EXPECT_FALSE(parse_status_uid("Uid:\tabc\n").ok());
}

TEST(attribution_procfs, RealProcSelf) {
  ProcfsReader reader("/proc", "/", {"PATH"});
  auto info = reader.read(static_cast<unsigned>(::getpid()));
  ASSERT_TRUE(info.ok()) << info.error().message;
  std::string comm = testing::read_file("/proc/self/comm");
  while (!comm.empty() && comm.back() == '\n') comm.pop_back();
  EXPECT_EQ(info->comm, comm);
  EXPECT_EQ(info->uid, ::getuid());
  struct passwd* pw = ::getpwuid(::getuid());
  EXPECT_EQ(info->user, pw != nullptr ? std::string(pw->pw_name) : std::to_string(::getuid()));
  EXPECT_GT(info->start_time, 0u);
  // This test process started before now and after the host booted.
  ASSERT_TRUE(info->start_unix_us.has_value());
  const auto now_us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  EXPECT_LE(*info->start_unix_us, now_us + 1'000'000);
  EXPECT_GT(*info->start_unix_us, now_us - 3600LL * 1'000'000);
  EXPECT_NE(info->cgroup.version, CgroupVersion::kUnknown);
  const char* path = ::getenv("PATH");
  if (path != nullptr) {
    ASSERT_NE(info->env_value("PATH"), nullptr);
    EXPECT_EQ(*info->env_value("PATH"), path);
  }
}

// ---- PasswdDb ----

void set_mtime(const std::string& path, long sec) {
  struct timespec times[2] = {{sec, 0}, {sec, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
}

TEST(attribution_passwd, FirstEntryForAUidWins) {
  PasswdDb db(fixture("docker-v1"));
  EXPECT_EQ(db.name_of(1000), "alice");
  EXPECT_EQ(db.name_of(64030), "slurm");
  EXPECT_EQ(db.name_of(4321), std::nullopt);
}

// Sites without a directory service can have thousands of local users: a passwd file over the
// 64 KiB of a procfs file is read whole, and a file cut at its own limit loses its last, partial
// line rather than reading "alice:x:10" as uid 10.
TEST(attribution_passwd, LargeFilesAreReadWholeAndCutOnlyAtALineEnd) {
  TempDir tmp;
  std::string text;
  for (unsigned uid = 20000; text.size() < 4 * kMaxProcFileBytes; ++uid) {
    text += "user" + std::to_string(uid) + ":x:" + std::to_string(uid) + ":100::/home/u:/bin/bash\n";
  }
  write_file(tmp / "etc/passwd", text + "carol:x:4242:4242::/home/carol:/bin/bash\n");
  EXPECT_EQ(PasswdDb(tmp.path()).name_of(4242), "carol");

  std::string filler = "# " + std::string(kMaxPasswdBytes - 2 - 1 - 10, '#') + "\n";
  write_file(tmp / "etc/passwd", filler + "alice:x:1000:1000::/home/alice:/bin/bash\n");
  PasswdDb cut(tmp.path());
  EXPECT_EQ(cut.name_of(10), std::nullopt);  // the limit falls after "alice:x:10"
  EXPECT_EQ(cut.name_of(1000), std::nullopt);
}

// A process's files are read up to kMaxProcFileBytes, whatever their size.
TEST(attribution_procfs, ProcessFilesAreReadUpToTheirLimit) {
  TempDir tmp;
  std::string root = tmp.copy_layout("docker-v1");
  write_file(root + "/proc/4242/status",
             "Name:\tpython3\n" + std::string(kMaxProcFileBytes, 'x') + "\nUid:\t1000\t1000\t1000\t1000\n");
  auto info = reader_for(root).read(4242);
  ASSERT_FALSE(info.ok());
  EXPECT_NE(info.error().message.find("no Uid: line"), std::string::npos) << info.error().message;
}

TEST(attribution_passwd, ReloadsWhenTheFileChanges) {
  TempDir tmp;
  std::string passwd = tmp / "etc/passwd";
  write_file(passwd, "root:x:0:0:root:/root:/bin/bash\nalice:x:1000:1000::/home/alice:/bin/bash\n");
  set_mtime(passwd, 1'700'000'000);
  PasswdDb db(tmp.path());
  EXPECT_EQ(db.name_of(1000), "alice");
  EXPECT_EQ(db.name_of(1000), "alice");
  EXPECT_EQ(db.name_of(0), "root");
  EXPECT_EQ(db.loads(), 1u) << "an unchanged file is parsed once";

  // Replaced by rename, as useradd and vipw do: same size, new inode.
  write_file(tmp / "etc/passwd.new", "root:x:0:0:root:/root:/bin/bash\nalicf:x:1000:1000::/home/alice:/bin/bash\n");
  set_mtime(tmp / "etc/passwd.new", 1'700'000'000);
  std::filesystem::rename(tmp / "etc/passwd.new", passwd);
  EXPECT_EQ(db.name_of(1000), "alicf");
  EXPECT_EQ(db.loads(), 2u);

  // Appended in place: the size changes.
  {
    std::ofstream out(passwd, std::ios::app);
    out << "bob:x:1001:1001::/home/bob:/bin/bash\n";
  }
  EXPECT_EQ(db.name_of(1001), "bob");

  // Rewritten in place with the same size: the mtime changes.
  write_file(passwd,
             "root:x:0:0:root:/root:/bin/bash\nalicg:x:1000:1000::/home/alice:/bin/bash\n"
             "bob:x:1001:1001::/home/bob:/bin/bash\n");
  set_mtime(passwd, 1'700'000'100);
  EXPECT_EQ(db.name_of(1000), "alicg");

  // Removed: users show as numbers again; restored: names come back.
  std::filesystem::remove(passwd);
  EXPECT_EQ(db.name_of(1000), std::nullopt);
  write_file(passwd, "dave:x:1000:1000::/home/dave:/bin/sh\n");
  EXPECT_EQ(db.name_of(1000), "dave");
}

TEST(attribution_passwd, MissingFileAndOddLines) {
  TempDir tmp;
  PasswdDb missing(tmp.path());
  EXPECT_EQ(missing.name_of(0), std::nullopt);

  write_file(tmp / "etc/passwd",
             "# comment\n\n+nisuser::::::\nbroken\nnouid:x::0::/:/bin/sh\n"
             "neg:x:-1:0::/:/bin/sh\n:x:5:5::/:/bin/sh\nok:x:7:7\n");
  PasswdDb db(tmp.path());
  EXPECT_EQ(db.name_of(7), "ok");
  EXPECT_EQ(db.name_of(5), std::nullopt);
}

// ---- ProcessCache ----

// A new directory for /proc/<pid>, as the kernel makes one: a copy of the old one, changed by
// `edit`, put in its place while the old one still exists (so it is another inode).
void replace_entry(const std::string& dir, const std::function<void(const std::string&)>& edit) {
  const std::string next = dir + ".next", old = dir + ".old";
  std::filesystem::copy(dir, next, std::filesystem::copy_options::recursive);
  edit(next);
  std::filesystem::rename(dir, old);
  std::filesystem::rename(next, dir);
  std::filesystem::remove_all(old);
}

TEST(attribution_cache, HitsMissesAndPidReuse) {
  TempDir tmp;
  std::string root = tmp.copy_layout("docker-v2");
  ProcessCache cache(reader_for(root, {"GPUMETER_PROJECT"}));

  auto first = cache.lookup(5151);
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_EQ((*first)->comm, "torchrun");
  EXPECT_EQ((*first)->env, (Env{{"GPUMETER_PROJECT", "speech"}}));
  auto again = cache.lookup(5151);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(first->get(), again->get()) << "the same entry while the start time is unchanged";
  EXPECT_EQ(cache.hits(), 1u);
  EXPECT_EQ(cache.misses(), 1u);

  // The kernel instantiates the directory again (the dentry was dropped): the same process,
  // told by its unchanged start time, and not read again.
  replace_entry(root + "/proc/5151", [](const std::string&) {});
  auto reinstantiated = cache.lookup(5151);
  ASSERT_TRUE(reinstantiated.ok());
  EXPECT_EQ(first->get(), reinstantiated->get());
  EXPECT_EQ(cache.hits(), 2u);
  EXPECT_EQ(cache.misses(), 1u);

  // The pid now belongs to a new process, in a directory of its own: another command, user,
  // cgroup and start time.
  replace_entry(root + "/proc/5151", [](const std::string& dir) {
    write_file(dir + "/stat", "5151 (bash) S 1 5151 5151 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 9999999 0 0\n");
    write_file(dir + "/status", "Name:\tbash\nUid:\t1000\t1000\t1000\t1000\n");
    write_file(dir + "/cgroup", "0::/user.slice/user-1000.slice/session-9.scope\n");
    write_file(dir + "/environ", std::string("GPUMETER_PROJECT=other") + '\0');
  });
  auto reused = cache.lookup(5151);
  ASSERT_TRUE(reused.ok());
  EXPECT_NE(reused->get(), first->get());
  EXPECT_EQ((*reused)->comm, "bash");
  EXPECT_EQ((*reused)->start_time, 9999999u);
  EXPECT_EQ((*reused)->user, "alice");
  EXPECT_EQ((*reused)->cgroup.systemd_unit, "session-9.scope");
  EXPECT_EQ((*reused)->env, (Env{{"GPUMETER_PROJECT", "other"}}));
  EXPECT_EQ(cache.misses(), 2u);
  // The old entry is still intact for whoever holds it.
  EXPECT_EQ((*first)->comm, "torchrun");

  // Exited: an error, counted, and the entry is dropped.
  std::filesystem::remove_all(root + "/proc/5151");
  auto gone = cache.lookup(5151);
  EXPECT_FALSE(gone.ok());
  EXPECT_EQ(cache.errors(), 1u);
  EXPECT_EQ(cache.size(), 0u);
}

TEST(attribution_cache, PruneKeepsOnlyLivePids) {
  ProcessCache cache(reader_for(fixture("k8s-cgroupfs")));
  ASSERT_TRUE(cache.lookup(7004).ok());
  ASSERT_TRUE(cache.lookup(7005).ok());
  EXPECT_EQ(cache.size(), 2u);
  cache.prune({7005, 12345});
  EXPECT_EQ(cache.size(), 1u);
  ASSERT_TRUE(cache.lookup(7005).ok());
  EXPECT_EQ(cache.hits(), 1u);
  ASSERT_TRUE(cache.lookup(7004).ok());
  EXPECT_EQ(cache.misses(), 3u) << "a pruned pid is read again";
  cache.prune({});
  EXPECT_EQ(cache.size(), 0u);
}

TEST(attribution_cache, ConcurrentLookups) {
  ProcessCache cache(reader_for(fixture("crio")));
  constexpr int kThreads = 8;
  constexpr int kRounds = 200;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRounds; ++i) {
        unsigned pid = (i + t) % 2 == 0 ? 7100 : 7099;
        auto r = cache.lookup(pid);
        if (!r.ok() || (*r)->pid != pid) ++failures;
        if (i % 50 == 0) cache.prune({7100, 7099});
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(cache.hits() + cache.misses(), static_cast<std::uint64_t>(kThreads * kRounds));
  EXPECT_EQ(cache.errors(), 0u);
  EXPECT_EQ(cache.size(), 2u);
}

}  // namespace
}  // namespace gpumeter
