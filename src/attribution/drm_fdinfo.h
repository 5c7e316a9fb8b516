#pragma once
// DRM clients' exact engine time, from the kernel's DRM fdinfo (Documentation/gpu/
// drm-usage-stats.rst, Linux 5.14+): every open DRM file (a render or primary node under
// /dev/dri) has /proc/<pid>/fdinfo/<fd> with `drm-driver`, `drm-pdev` (the PCI address),
// `drm-client-id` and cumulative `drm-engine-<engine>: <ns> ns` per engine. Graphics, Vulkan and
// Mesa OpenCL clients submit through such a file, so their busy time is known to the
// nanosecond; ROCm compute goes through /dev/kfd and records none there.
//
// A scan walks /proc/<pid>/fd of every process (one readlink per open fd: what it costs) and
// reads the fdinfo of the fds that are DRM nodes only. Several fds, of one process or of
// several (dup, fork, fd passing), may be one client: each client is counted once.

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace gpumeter {

// One DRM fdinfo file, parsed.
struct DrmFdinfo {
  std::string driver;                      // drm-driver (mandatory)
  std::string pdev;                        // drm-pdev, lower case; empty when absent
  std::optional<std::uint64_t> client_id;  // drm-client-id
  // drm-engine-<engine> in ns; a key printed twice is summed (amdgpu names two IP types "dec"
  // and two "enc"), a third time and after ignored: no driver has more engines of one name, and
  // a file that repeats a key (a planted one) must not multiply a client's time.
  // drm-engine-capacity-<engine> is not an engine.
  std::map<std::string, std::uint64_t> engine_ns;
  std::map<std::string, unsigned> engine_lines;  // the lines summed into engine_ns, per engine
  // drm-resident-vram, else drm-memory-vram (the older name amdgpu prints), in bytes.
  std::optional<std::uint64_t> vram_bytes;
  bool operator==(const DrmFdinfo&) const = default;
};

// Lines that are not `key: value`, values that are not numbers in a known unit, and keys other
// than those above are skipped: the format lets drivers add their own. Fails only when there is
// no drm-driver line (not a DRM file). The error never quotes the input.
Result<DrmFdinfo> parse_drm_fdinfo(std::string_view text);

// A PCI address as drm-pdev writes it (dddd:bb:dd.f, lower case), or "" when `address` is not
// one. Accepts NVML's 8-digit domain.
std::string normalize_pci_address(std::string_view address);

// One DRM client of one device, seen at a scan.
struct DrmClient {
  unsigned pid = 0;  // the lowest pid holding it
  std::string pdev;
  std::uint64_t client_id = 0;
  std::uint64_t busy_ns = 0;  // the sum of the counted engines
  std::optional<std::uint64_t> vram_bytes;
  // The engine lines summed into busy_ns: the client's busy time grows by at most this much per
  // second of wall time.
  unsigned engines = 1;
  bool operator==(const DrmClient&) const = default;
};

// A DRM engine key printed more often than this in one fdinfo file counts this often.
inline constexpr unsigned kMaxDrmEngineRepeats = 2;

// Where the agent gets DRM clients from: the scanner below, or a fake in tests.
class DrmClientSource {
 public:
  virtual ~DrmClientSource() = default;
  // The clients of the device at PCI address `pdev` (normalized), as of a scan no older than the
  // source's maximum age. An error when the host cannot be read at all.
  virtual Result<std::vector<DrmClient>> clients(const std::string& pdev) = 0;
};

struct DrmScanOptions {
  std::string procfs = "/proc";
  // Clients of these drivers only (drm-driver), and the sum of these engines as their busy time:
  // amdgpu's graphics core is `gfx` and `compute`, the engines gpu_busy_percent measures; `dma`,
  // `dec`, `enc`, `jpeg` and `vpe` are separate blocks.
  std::vector<std::string> drivers = {"amdgpu"};
  std::vector<std::string> engines = {"gfx", "compute"};
  // A scan serves every GPU's worker that asks within this long, so that one collection round
  // walks /proc once, not once per GPU.
  std::chrono::milliseconds max_age{100};
};

// Walks <procfs>/<pid>/fd. Thread-safe: workers asking at once share one walk, and a worker that
// finds a walk under way takes the last one (see clients()).
class DrmClientScanner final : public DrmClientSource {
 public:
  explicit DrmClientScanner(DrmScanOptions options);

  Result<std::vector<DrmClient>> clients(const std::string& pdev) override;
  // Every client of the configured drivers, scanned now.
  Result<std::vector<DrmClient>> scan() const;

  struct Stats {
    std::uint64_t scans = 0;
    std::uint64_t fds_checked = 0;  // readlinks, over all scans
    std::uint64_t fdinfo_read = 0;  // fdinfo files read, over all scans
  };
  Stats stats() const;

 private:
  DrmScanOptions options_;
  std::mutex walk_mu_;     // held by the worker walking /proc
  mutable std::mutex mu_;  // guards scanned_at_, last_ and stats_
  std::optional<std::chrono::steady_clock::time_point> scanned_at_;
  std::vector<DrmClient> last_;
  mutable Stats stats_;
};

}  // namespace gpumeter
