// The dcgm-exporter HPC job mapping directory: one file per GPU named by index (or UUID),
// job ids one per line.

#include "attribution/hpc_jobs.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cerrno>
#include <filesystem>
#include <map>

#include "test_support.h"

namespace gpumeter {
namespace {

using testing::TempDir;
using testing::write_file;
using Jobs = std::vector<std::string>;

TEST(attribution_hpc_jobs, ReadsOneFilePerGpu) {
  TempDir tmp;
  std::string dir = tmp / "job-map";
  write_file(dir + "/0", "4242\n4243\n");
  write_file(dir + "/1", "  77 \r\n\n77\n");  // spaces, CRLF, blank lines and a repeat
  write_file(dir + "/2.0", "88");             // a MIG slice, no final newline
  write_file(dir + "/GPU-11111111-2222-3333-4444-555555555555", "99\n");
  write_file(dir + "/3", "");                  // a GPU with no job
  write_file(dir + "/README", "not a GPU\n");  // ignored, as dcgm-exporter does
  write_file(dir + "/0.bak", "1\n");
  write_file(dir + "/4/nested", "5\n");  // a directory named like a GPU

  auto m = read_hpc_job_mapping(dir);
  ASSERT_TRUE(m.ok()) << m.error().message;
  std::map<std::string, Jobs> expected = {
      {"0", {"4242", "4243"}},
      {"1", {"77"}},
      {"2.0", {"88"}},
      {"3", {}},
      {"GPU-11111111-2222-3333-4444-555555555555", {"99"}},
  };
  EXPECT_EQ(m->files, expected);
  EXPECT_TRUE(m->dropped.empty());
  EXPECT_EQ(m->links_skipped, 0u);

  EXPECT_EQ(hpc_jobs_for_gpu(*m, 0, "GPU-11111111-2222-3333-4444-555555555555"), (Jobs{"4242", "4243", "99"}));
  EXPECT_EQ(hpc_jobs_for_gpu(*m, 1, ""), (Jobs{"77"}));
  EXPECT_EQ(hpc_jobs_for_gpu(*m, 7, "GPU-none"), Jobs{});
}

// A job id longer than 256 bytes is skipped; a file is read up to 64 KiB.
TEST(attribution_hpc_jobs, LongIdsAreSkippedAndFilesReadUpToTheirLimit) {
  TempDir tmp;
  std::string dir = tmp / "job-map";
  const std::string fits(256, '1'), over(257, '2');
  write_file(dir + "/0", over + "\n" + fits + "\n42\n");
  write_file(dir + "/1", std::string(64 * 1024, '\n') + "77\n");
  auto m = read_hpc_job_mapping(dir);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->files.at("0"), (Jobs{fits, "42"}));
  EXPECT_EQ(m->files.at("1"), Jobs{});
}

// Whoever can write the directory must not read other files into label values: a link (to a
// secret, a FIFO, /dev/zero) is skipped and counted, never followed.
TEST(attribution_hpc_jobs, SymbolicLinksAndOtherNonRegularFilesAreNotRead) {
  TempDir tmp;
  std::string dir = tmp / "job-map";
  write_file(tmp / "secret", "root:$6$SALT$HASH:19000:0:99999:7:::\napi_token=sk-live-123456\n");
  write_file(dir + "/1", "77\n");
  std::filesystem::create_symlink(tmp / "secret", dir + "/0");
  std::filesystem::create_symlink("/dev/zero", dir + "/2");
  ASSERT_EQ(::mkfifo((dir + "/3").c_str(), 0600), 0);
  auto m = read_hpc_job_mapping(dir);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->files, (std::map<std::string, Jobs>{{"1", {"77"}}}));
  EXPECT_EQ(m->links_skipped, 3u);
}

// One GPU's file names at most kMaxHpcJobsPerFile jobs; the distinct ids beyond are counted,
// and a GPU named by both its index and its UUID gets no more.
TEST(attribution_hpc_jobs, IdsPerGpuAreBoundedAndTheRestCounted) {
  TempDir tmp;
  std::string dir = tmp / "job-map";
  std::string many, other;
  for (int i = 0; i < 12'500; ++i) many += std::to_string(100'000 + i) + "\n";
  many += "100000\n";  // a repeat of a kept id is not a drop
  for (int i = 0; i < 10; ++i) other += std::to_string(900 + i) + "\n";
  write_file(dir + "/0", many);
  write_file(dir + "/GPU-0", other);
  auto m = read_hpc_job_mapping(dir);
  ASSERT_TRUE(m.ok()) << m.error().message;
  ASSERT_EQ(m->files.at("0").size(), kMaxHpcJobsPerFile);
  EXPECT_EQ(m->files.at("0").front(), "100000");
  // The file is read up to 64 KiB: 9362 whole ids of 7 bytes, 64 kept.
  EXPECT_EQ(m->dropped.at("0"), 64u * 1024 / 7 - kMaxHpcJobsPerFile);
  EXPECT_EQ(hpc_jobs_for_gpu(*m, 0, "GPU-0").size(), kMaxHpcJobsPerFile);

  const HpcJobFile few = parse_hpc_job_file("1\n2\n1\n");
  EXPECT_EQ(few.jobs, (Jobs{"1", "2"}));
  EXPECT_EQ(few.dropped, 0u);
}

TEST(attribution_hpc_jobs, MissingDirectoryIsAnErrorEmptyIsNot) {
  TempDir tmp;
  auto missing = read_hpc_job_mapping(tmp / "nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ENOENT);
  EXPECT_NE(missing.error().message.find("nope"), std::string::npos);

  std::filesystem::create_directories(tmp / "empty");
  auto empty = read_hpc_job_mapping(tmp / "empty");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->files.empty());

  write_file(tmp / "file", "0\n");
  auto not_dir = read_hpc_job_mapping(tmp / "file");
  ASSERT_FALSE(not_dir.ok());
  EXPECT_EQ(not_dir.error().code, ENOTDIR);
}

TEST(attribution_hpc_jobs, FileNames) {
  EXPECT_TRUE(is_hpc_job_file_name("0"));
  EXPECT_TRUE(is_hpc_job_file_name("15"));
  EXPECT_TRUE(is_hpc_job_file_name("2.7"));
  EXPECT_TRUE(is_hpc_job_file_name("GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52"));
  EXPECT_TRUE(is_hpc_job_file_name("MIG-265a219d-a49f-578a-825d-222c72699c16"));
  EXPECT_FALSE(is_hpc_job_file_name(""));
  EXPECT_FALSE(is_hpc_job_file_name("-1"));
  EXPECT_FALSE(is_hpc_job_file_name("0.bak"));
  EXPECT_FALSE(is_hpc_job_file_name(".0"));
  EXPECT_FALSE(is_hpc_job_file_name("GPU-"));
  EXPECT_FALSE(is_hpc_job_file_name("GPU-../x"));
  EXPECT_FALSE(is_hpc_job_file_name("gpu0"));
}

}  // namespace
}  // namespace gpumeter
