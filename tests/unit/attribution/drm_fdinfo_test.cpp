// DRM fdinfo: the parser on the formats the kernel documents and amdgpu prints, and the scanner
// on a procfs tree with fd links (several fds of one client, non-DRM fds, other drivers).

#include "attribution/drm_fdinfo.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <future>
#include <thread>

#include <filesystem>

#include "test_support.h"

namespace gpumeter {
namespace {

using testing::TempDir;
using testing::write_file;

// amdgpu_show_fdinfo() before drm_print_memory_stats (Linux 6.2-6.x): note the space before
// the tab after drm-memory-gtt and drm-memory-cpu, and the amd- keys.
constexpr const char* kAmdgpuLegacy =
    "pos:\t0\n"
    "flags:\t02100002\n"
    "mnt_id:\t24\n"
    "ino:\t1093\n"
    "drm-driver:\tamdgpu\n"
    "drm-pdev:\t0000:0c:00.0\n"
    "drm-client-id:\t67\n"
    "pasid:\t32771\n"
    "drm-memory-vram:\t204800 KiB\n"
    "drm-memory-gtt: \t2048 KiB\n"
    "drm-memory-cpu: \t0 KiB\n"
    "amd-memory-visible-vram:\t1024 KiB\n"
    "amd-evicted-vram:\t0 KiB\n"
    "drm-engine-gfx:\t1532700000 ns\n"
    "drm-engine-compute:\t25000 ns\n"
    "drm-engine-dma:\t13000 ns\n";

// The common keys of newer kernels (drm_show_fdinfo, drm_print_memory_stats).
constexpr const char* kAmdgpuResident =
    "pos:\t0\n"
    "drm-driver:\tamdgpu\n"
    "drm-client-id:\t1204\n"
    "drm-pdev:\t0000:C1:00.0\n"
    "pasid:\t32780\n"
    "drm-total-vram:\t8192 KiB\n"
    "drm-shared-vram:\t0\n"
    "drm-resident-vram:\t4 MiB\n"
    "drm-memory-vram:\t4096 KiB\n"
    "drm-engine-gfx:\t900 ns\n";

// Documentation/gpu/i915.rst's example: capacity lines are not engines.
constexpr const char* kI915 =
    "pos:    0\n"
    "flags:  0100002\n"
    "drm-driver:     i915\n"
    "drm-pdev:       0000:00:02.0\n"
    "drm-client-id:  7\n"
    "drm-engine-render:      9288864723 ns\n"
    "drm-engine-copy:        2035071108 ns\n"
    "drm-engine-video:       0 ns\n"
    "drm-engine-capacity-video:   2\n"
    "drm-engine-video-enhance:   0 ns\n";

TEST(DrmFdinfo, ParsesAmdgpu) {
  auto f = parse_drm_fdinfo(kAmdgpuLegacy);
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_EQ(f->driver, "amdgpu");
  EXPECT_EQ(f->pdev, "0000:0c:00.0");
  EXPECT_EQ(f->client_id, 67u);
  EXPECT_EQ(f->engine_ns.at("gfx"), 1532700000u);
  EXPECT_EQ(f->engine_ns.at("compute"), 25000u);
  EXPECT_EQ(f->engine_ns.at("dma"), 13000u);
  EXPECT_EQ(f->engine_ns.size(), 3u);
  EXPECT_EQ(f->vram_bytes, 204800u * 1024u);
}

TEST(DrmFdinfo, ResidentVramWinsOverTheOlderName) {
  auto f = parse_drm_fdinfo(kAmdgpuResident);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->pdev, "0000:c1:00.0");  // lower case, as amdgpu prints it and the backend names it
  EXPECT_EQ(f->vram_bytes, 4u << 20);
  EXPECT_EQ(f->engine_ns.at("gfx"), 900u);
}

TEST(DrmFdinfo, CapacityIsNotAnEngine) {
  auto f = parse_drm_fdinfo(kI915);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->driver, "i915");
  EXPECT_EQ(f->engine_ns.size(), 4u);
  EXPECT_EQ(f->engine_ns.count("capacity-video"), 0u);
  EXPECT_EQ(f->engine_ns.at("render"), 9288864723u);
  EXPECT_FALSE(f->vram_bytes);
}

TEST(DrmFdinfo, RepeatedEngineKeysAreSummed) {
  // amdgpu names UVD and VCN_DEC both "dec".
  auto f = parse_drm_fdinfo("drm-driver:\tamdgpu\ndrm-engine-dec:\t10 ns\ndrm-engine-dec:\t5 ns\n");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->engine_ns.at("dec"), 15u);
  EXPECT_EQ(f->engine_lines.at("dec"), 2u);
}

// A file that repeats a key more often than any driver has engines of one name (a planted one:
// 537 lines of 1 s were billed 537 s) counts it kMaxDrmEngineRepeats times.
TEST(DrmFdinfo, AKeyRepeatedBeyondTheDriversEnginesCountsTwice) {
  std::string text = "drm-driver:\tamdgpu\n";
  for (int i = 0; i < 537; ++i) text += "drm-engine-gfx:\t1000000000 ns\n";
  auto f = parse_drm_fdinfo(text);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->engine_ns.at("gfx"), 2'000'000'000u);
  EXPECT_EQ(f->engine_lines.at("gfx"), kMaxDrmEngineRepeats);
}

TEST(DrmFdinfo, MalformedLinesAreSkipped) {
  auto f = parse_drm_fdinfo(
      "drm-driver:\tamdgpu\n"
      "no colon here\n"
      "drm-engine-gfx:\tmany ns\n"    // not a number
      "drm-engine-compute:\t12 us\n"  // not the documented unit
      "drm-engine-:\t5 ns\n"          // no engine name
      "drm-engine-dma:\t-3 ns\n"      // negative
      "drm-client-id:\t12x\n"         // trailing garbage
      "drm-memory-vram:\t10 GiB\n"    // unit the spec does not allow
      "drm-pdev:\tnot-an-address\n"
      ":\t\n"
      "drm-engine-jpeg:\t99999999999999999999999 ns\n"  // overflows
      "drm-engine-enc:\t7 ns");                         // no final newline
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_EQ(f->engine_ns.size(), 1u);
  EXPECT_EQ(f->engine_ns.at("enc"), 7u);
  EXPECT_FALSE(f->client_id);
  EXPECT_FALSE(f->vram_bytes);
  EXPECT_EQ(f->pdev, "");
}

TEST(DrmFdinfo, NotADrmFile) {
  auto f = parse_drm_fdinfo("pos:\t0\nflags:\t02\nmnt_id:\t24\nino:\t1\n");
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().message.find("02"), std::string::npos);
  EXPECT_FALSE(parse_drm_fdinfo(""));
  EXPECT_FALSE(parse_drm_fdinfo("drm-driver:\t\n"));
}

TEST(DrmFdinfo, NormalizesPciAddresses) {
  EXPECT_EQ(normalize_pci_address("0000:c1:00.0"), "0000:c1:00.0");
  EXPECT_EQ(normalize_pci_address("00000000:C1:00.0"), "0000:c1:00.0");  // NVML's form
  EXPECT_EQ(normalize_pci_address("c1:00.1"), "0000:c1:00.1");
  EXPECT_EQ(normalize_pci_address("0001:03:1f.7"), "0001:03:1f.7");
  EXPECT_EQ(normalize_pci_address("0000:c1:20.0"), "");  // device is 5 bits
  EXPECT_EQ(normalize_pci_address("0000:c1:00"), "");
  EXPECT_EQ(normalize_pci_address(""), "");
  EXPECT_EQ(normalize_pci_address("x:y:z.w"), "");
}

// A procfs tree: <root>/<pid>/fd/<n> -> target, <root>/<pid>/fdinfo/<n>.
void add_fd(const std::string& root, unsigned pid, unsigned fd, const std::string& target, const std::string& info) {
  const std::string dir = root + "/" + std::to_string(pid);
  std::filesystem::create_directories(dir + "/fd");
  std::filesystem::create_symlink(target, dir + "/fd/" + std::to_string(fd));
  write_file(dir + "/fdinfo/" + std::to_string(fd), info);
}

std::string amdgpu_fdinfo(const std::string& pdev, unsigned client, std::uint64_t gfx, std::uint64_t compute,
                          std::uint64_t vram_kib) {
  std::string s = "pos:\t0\nflags:\t02100002\ndrm-driver:\tamdgpu\ndrm-pdev:\t" + pdev + "\ndrm-client-id:\t" +
                  std::to_string(client) + "\ndrm-memory-vram:\t" + std::to_string(vram_kib) + " KiB\n";
  if (gfx > 0) s += "drm-engine-gfx:\t" + std::to_string(gfx) + " ns\n";
  if (compute > 0) s += "drm-engine-compute:\t" + std::to_string(compute) + " ns\n";
  s += "drm-engine-dma:\t1000000 ns\n";  // a separate block: not the GPU's busy time
  return s;
}

TEST(DrmClientScanner, CountsEachClientOnceAndOnlyDrmFds) {
  TempDir tmp;
  const std::string proc = tmp / "proc";
  // pid 300: one client on two fds (a dup), and a second client of another GPU.
  add_fd(proc, 300, 5, "/dev/dri/renderD128", amdgpu_fdinfo("0000:0c:00.0", 11, 2'000'000, 500, 1024));
  add_fd(proc, 300, 6, "/dev/dri/renderD128", amdgpu_fdinfo("0000:0c:00.0", 11, 2'000'000, 500, 1024));
  add_fd(proc, 300, 7, "/dev/dri/renderD129", amdgpu_fdinfo("0000:0d:00.0", 12, 7, 0, 0));
  add_fd(proc, 300, 0, "/dev/null", amdgpu_fdinfo("0000:0c:00.0", 99, 5, 0, 0));  // not read: not DRM
  // pid 200 holds client 11 too (passed over a socket): it is named by the lower pid.
  add_fd(proc, 200, 9, "/dev/dri/card0", amdgpu_fdinfo("0000:0c:00.0", 11, 2'000'000, 500, 1024));
  // pid 400: another driver's client on the same address is not counted.
  add_fd(proc, 400, 3, "/dev/dri/renderD130",
         "drm-driver:\ti915\ndrm-pdev:\t0000:0c:00.0\ndrm-client-id:\t13\ndrm-engine-render:\t5 ns\n");
  // pid 500: a DRM fd without a client id (an old kernel) cannot be told apart: skipped.
  add_fd(proc, 500, 3, "/dev/dri/renderD128", "drm-driver:\tamdgpu\ndrm-pdev:\t0000:0c:00.0\ndrm-engine-gfx:\t5 ns\n");
  write_file(proc + "/self", "");                      // not a pid
  std::filesystem::create_directories(proc + "/600");  // a process whose fds cannot be listed

  DrmClientScanner scanner({.procfs = proc, .max_age = std::chrono::milliseconds(0)});
  auto c = scanner.clients("0000:0c:00.0");
  ASSERT_TRUE(c) << c.error().message;
  ASSERT_EQ(c->size(), 1u);
  EXPECT_EQ((*c)[0].pid, 200u);
  EXPECT_EQ((*c)[0].client_id, 11u);
  EXPECT_EQ((*c)[0].busy_ns, 2'000'500u);  // gfx + compute, without dma
  EXPECT_EQ((*c)[0].vram_bytes, 1024u * 1024u);
  auto d = scanner.clients("0000:0d:00.0");
  ASSERT_TRUE(d);
  ASSERT_EQ(d->size(), 1u);
  EXPECT_EQ((*d)[0].busy_ns, 7u);
  EXPECT_EQ((*d)[0].vram_bytes, 0u);
  const auto stats = scanner.stats();
  EXPECT_EQ(stats.scans, 2u);
  EXPECT_EQ(stats.fds_checked, 2u * 7u);
  EXPECT_EQ(stats.fdinfo_read, 2u * 6u);  // every /dev/dri fd, not /dev/null
}

TEST(DrmClientScanner, WorkersOfOneRoundShareAScan) {
  TempDir tmp;
  const std::string proc = tmp / "proc";
  add_fd(proc, 300, 5, "/dev/dri/renderD128", amdgpu_fdinfo("0000:0c:00.0", 11, 10, 0, 0));
  DrmClientScanner scanner({.procfs = proc, .max_age = std::chrono::hours(1)});
  ASSERT_TRUE(scanner.clients("0000:0c:00.0"));
  write_file(proc + "/300/fdinfo/5", amdgpu_fdinfo("0000:0c:00.0", 11, 20, 0, 0));
  auto again = scanner.clients("0000:0c:00.0");
  ASSERT_TRUE(again);
  EXPECT_EQ((*again)[0].busy_ns, 10u);  // the same scan
  EXPECT_EQ(scanner.stats().scans, 1u);
}

TEST(DrmClientScanner, AWorkerDoesNotWaitForAWalkStuckInTheKernel) {
  // An fdinfo read that blocks (a FIFO here; amdgpu's show_fdinfo of a hung GPU on a real host)
  // holds the worker walking, not the others: they take the last walk.
  TempDir tmp;
  const std::string proc = tmp / "proc";
  add_fd(proc, 300, 5, "/dev/dri/renderD128", amdgpu_fdinfo("0000:0c:00.0", 11, 10, 0, 0));
  DrmClientScanner scanner({.procfs = proc, .max_age = std::chrono::milliseconds(0)});
  ASSERT_EQ(scanner.clients("0000:0c:00.0")->size(), 1u);
  const std::string fifo = proc + "/301/fdinfo/5";
  std::filesystem::create_directories(proc + "/301/fd");
  std::filesystem::create_directories(proc + "/301/fdinfo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::filesystem::create_symlink("/dev/dri/renderD128", proc + "/301/fd/5");
  auto stuck = std::async(std::launch::async, [&] { return scanner.clients("0000:0c:00.0"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the walk is now in the FIFO's open
  const bool stuck_meanwhile = stuck.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready;
  // Another worker gets the first walk's clients without waiting (10 s: a generous bound).
  auto other = std::async(std::launch::async, [&] { return scanner.clients("0000:0c:00.0"); });
  const bool answered = other.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  // Let the stuck walk go on (a writer), with the FIFO gone for any walk after it.
  const int w = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
  std::filesystem::remove_all(proc + "/301");
  if (w >= 0) ::close(w);
  EXPECT_TRUE(stuck_meanwhile);
  EXPECT_GE(w, 0);
  EXPECT_TRUE(answered);
  auto got = other.get();
  ASSERT_TRUE(got);
  EXPECT_EQ(got->size(), 1u);
  ASSERT_TRUE(stuck.get());
}

TEST(DrmClientScanner, MissingProcfsIsAnError) {
  DrmClientScanner scanner({.procfs = "/nonexistent/proc"});
  auto c = scanner.clients("0000:0c:00.0");
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("/nonexistent/proc"), std::string::npos);
}

}  // namespace
}  // namespace gpumeter
