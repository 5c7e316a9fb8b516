#include "attribution/drm_fdinfo.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <set>

#include <fmt/format.h>

namespace gpumeter {

namespace {

constexpr std::string_view kSpace = " \t";

std::string_view trim(std::string_view s) {
  const auto b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(kSpace);
  return s.substr(b, e - b + 1);
}

// "<uint>" then optional whitespace and a unit (possibly empty).
bool split_number(std::string_view value, std::uint64_t& n, std::string_view& unit) {
  const char* end = value.data() + value.size();
  auto [p, ec] = std::from_chars(value.data(), end, n);
  if (ec != std::errc() || p == value.data()) return false;
  unit = trim(std::string_view(p, static_cast<std::size_t>(end - p)));
  return true;
}

std::optional<std::uint64_t> bytes_of(std::string_view value) {
  std::uint64_t n = 0;
  std::string_view unit;
  if (!split_number(value, n, unit)) return std::nullopt;
  std::uint64_t scale = 0;
  if (unit.empty())
    scale = 1;
  else if (unit == "KiB")
    scale = 1024;
  else if (unit == "MiB")
    scale = 1024 * 1024;
  else
    return std::nullopt;
  if (n > UINT64_MAX / scale) return std::nullopt;
  return n * scale;
}

bool numeric(const char* name) {
  if (*name == '\0') return false;
  for (const char* c = name; *c != '\0'; ++c) {
    if (*c < '0' || *c > '9') return false;
  }
  return true;
}

// A file read to EOF, at most `limit` bytes (fdinfo is a few hundred bytes).
std::optional<std::string> read_small(int dirfd, const char* name, std::size_t limit = 16 * 1024) {
  const int fd = ::openat(dirfd, name, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buf[4096];
  while (out.size() < limit) {
    const ssize_t n = ::read(fd, buf, std::min(sizeof buf, limit - out.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

struct Dir {
  explicit Dir(DIR* d) : d(d) {}
  ~Dir() {
    if (d != nullptr) ::closedir(d);
  }
  Dir(const Dir&) = delete;
  Dir& operator=(const Dir&) = delete;
  DIR* d;
};

}  // namespace

Result<DrmFdinfo> parse_drm_fdinfo(std::string_view text) {
  DrmFdinfo f;
  bool driver = false;
  std::optional<std::uint64_t> resident, legacy;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view key = trim(line.substr(0, colon));
    const std::string_view value = trim(line.substr(colon + 1));
    if (!key.starts_with("drm-") || value.empty()) continue;
    if (key == "drm-driver") {
      f.driver = std::string(value);
      driver = true;
    } else if (key == "drm-pdev") {
      f.pdev = normalize_pci_address(value);
    } else if (key == "drm-client-id") {
      std::uint64_t n = 0;
      std::string_view unit;
      if (split_number(value, n, unit) && unit.empty()) f.client_id = n;
    } else if (key.starts_with("drm-engine-") && !key.starts_with("drm-engine-capacity-")) {
      const std::string_view engine = key.substr(std::strlen("drm-engine-"));
      std::uint64_t n = 0;
      std::string_view unit;
      if (engine.empty() || !split_number(value, n, unit) || unit != "ns") continue;
      unsigned& lines = f.engine_lines[std::string(engine)];
      if (lines == kMaxDrmEngineRepeats) continue;
      ++lines;
      std::uint64_t& sum = f.engine_ns[std::string(engine)];
      sum = n > UINT64_MAX - sum ? UINT64_MAX : sum + n;
    } else if (key == "drm-resident-vram") {
      resident = bytes_of(value);
    } else if (key == "drm-memory-vram") {
      legacy = bytes_of(value);
    }
  }
  if (!driver || f.driver.empty()) return Error{EINVAL, "no drm-driver line: not a DRM client's fdinfo"};
  f.vram_bytes = resident ? resident : legacy;
  return f;
}

std::string normalize_pci_address(std::string_view a) {
  // [domain:]bus:device.function, hex; NVML writes an 8-digit domain.
  const auto dot = a.rfind('.');
  const auto c2 = a.rfind(':');
  if (dot == std::string_view::npos || c2 == std::string_view::npos || c2 > dot) return "";
  const auto c1 = a.rfind(':', c2 == 0 ? std::string_view::npos : c2 - 1);
  auto hex = [](std::string_view s, unsigned& out) {
    if (s.empty() || s.size() > 8) return false;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out, 16);
    return ec == std::errc() && p == s.data() + s.size();
  };
  unsigned domain = 0, bus = 0, dev = 0, fn = 0;
  if (c1 != std::string_view::npos && !hex(a.substr(0, c1), domain)) return "";
  const std::size_t bus_at = c1 == std::string_view::npos ? 0 : c1 + 1;
  if (!hex(a.substr(bus_at, c2 - bus_at), bus) || !hex(a.substr(c2 + 1, dot - c2 - 1), dev) ||
      !hex(a.substr(dot + 1), fn)) {
    return "";
  }
  if (domain > 0xffff || bus > 0xff || dev > 0x1f || fn > 7) return "";
  return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", domain, bus, dev, fn);
}

DrmClientScanner::DrmClientScanner(DrmScanOptions options) : options_(std::move(options)) {}

Result<std::vector<DrmClient>> DrmClientScanner::scan() const {
  Dir proc(::opendir(options_.procfs.c_str()));
  if (proc.d == nullptr) {
    const int err = errno;
    return Error{err, fmt::format("cannot list {}: {}", options_.procfs, std::strerror(err))};
  }
  std::uint64_t checked = 0, read = 0;
  std::map<std::pair<std::string, std::uint64_t>, DrmClient> clients;
  while (const dirent* e = ::readdir(proc.d)) {
    if (!numeric(e->d_name) || std::strlen(e->d_name) > 9) continue;
    const unsigned pid = static_cast<unsigned>(std::stoul(e->d_name));
    const std::string base = options_.procfs + "/" + e->d_name;
    Dir fds(::opendir((base + "/fd").c_str()));
    if (fds.d == nullptr) continue;  // gone, or not ours to read
    int fdinfo_dir = -1;
    while (const dirent* f = ::readdir(fds.d)) {
      if (!numeric(f->d_name)) continue;
      ++checked;
      char target[64];
      const ssize_t n = ::readlinkat(::dirfd(fds.d), f->d_name, target, sizeof target - 1);
      if (n <= 0) continue;
      if (std::string_view(target, static_cast<std::size_t>(n)).substr(0, 9) != "/dev/dri/") continue;
      if (fdinfo_dir < 0) {
        fdinfo_dir = ::open((base + "/fdinfo").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fdinfo_dir < 0) break;
      }
      auto text = read_small(fdinfo_dir, f->d_name);
      if (!text) continue;
      ++read;
      auto info = parse_drm_fdinfo(*text);
      if (!info || !info->client_id || info->pdev.empty()) continue;
      if (std::find(options_.drivers.begin(), options_.drivers.end(), info->driver) == options_.drivers.end()) {
        continue;
      }
      std::uint64_t busy = 0;
      unsigned engines = 0;
      for (const auto& [engine, ns] : info->engine_ns) {
        if (std::find(options_.engines.begin(), options_.engines.end(), engine) != options_.engines.end()) {
          busy = ns > UINT64_MAX - busy ? UINT64_MAX : busy + ns;
          engines += info->engine_lines[engine];
        }
      }
      auto [it, fresh] = clients.try_emplace({info->pdev, *info->client_id});
      DrmClient& c = it->second;
      if (fresh || pid < c.pid) c.pid = pid;
      c.pdev = info->pdev;
      c.client_id = *info->client_id;
      c.busy_ns = std::max(c.busy_ns, busy);  // one client read through two fds, moments apart
      c.engines = std::max(fresh ? 0u : c.engines, std::max(engines, 1u));
      if (info->vram_bytes) c.vram_bytes = std::max(c.vram_bytes.value_or(0), *info->vram_bytes);
    }
    if (fdinfo_dir >= 0) ::close(fdinfo_dir);
  }
  std::vector<DrmClient> out;
  out.reserve(clients.size());
  for (auto& [key, c] : clients) out.push_back(std::move(c));
  std::lock_guard lock(mu_);
  ++stats_.scans;
  stats_.fds_checked += checked;
  stats_.fdinfo_read += read;
  return out;
}

Result<std::vector<DrmClient>> DrmClientScanner::clients(const std::string& pdev) {
  auto of_device = [&](const std::vector<DrmClient>& all) {
    std::vector<DrmClient> out;
    for (const auto& c : all) {
      if (c.pdev == pdev) out.push_back(c);
    }
    return out;
  };
  // One walk at a time. A worker that finds a walk under way takes the last one instead of
  // waiting: the counters are cumulative, so an older reading only moves time to the next
  // interval, and a walk stuck in the kernel (an fdinfo read of a hung GPU) holds only the worker
  // making it. Before the first walk there is nothing to take, and every worker waits for it.
  std::unique_lock walking(walk_mu_, std::try_to_lock);
  if (!walking.owns_lock()) {
    {
      std::lock_guard lock(mu_);
      if (scanned_at_) return of_device(last_);
    }
    walking.lock();
  }
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mu_);
    if (scanned_at_ && now - *scanned_at_ < options_.max_age) return of_device(last_);
  }
  auto fresh = scan();
  if (!fresh) return fresh.error();
  std::lock_guard lock(mu_);
  last_ = std::move(fresh).value();
  scanned_at_ = now;
  return of_device(last_);
}

DrmClientScanner::Stats DrmClientScanner::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace gpumeter
