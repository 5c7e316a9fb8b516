#include "render/dcgm_counters.h"

#include <fmt/format.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

namespace gpumeter {

namespace {

constexpr std::size_t kMaxCountersBytes = 1 << 20;

std::string_view trim(std::string_view s) {
  const char* ws = " \t\r";
  auto b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  auto e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

// A field becomes a metric or label name, so it must be one.
bool valid_name(std::string_view s) {
  if (s.empty()) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

}  // namespace

Result<DcgmCounters> parse_dcgm_counters(std::string_view text, std::string source) {
  DcgmCounters out;
  out.source = source;
  std::set<std::string, std::less<>> seen;
  unsigned line_no = 0;
  while (!text.empty()) {
    ++line_no;
    auto nl = text.find('\n');
    std::string_view line = trim(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    if (line.empty() || line.front() == '#') continue;
    auto fail = [&](std::string what) { return Error{0, fmt::format("{}:{}: {}", source, line_no, what)}; };
    auto c1 = line.find(',');
    auto c2 = c1 == std::string_view::npos ? c1 : line.find(',', c1 + 1);
    if (c2 == std::string_view::npos) {
      return fail(fmt::format("expected 'DCGM_FIELD, type, help' (two commas), got '{}'", line));
    }
    std::string_view field = trim(line.substr(0, c1));
    std::string type(trim(line.substr(c1 + 1, c2 - c1 - 1)));
    std::string_view help = trim(line.substr(c2 + 1));
    if (!valid_name(field)) {
      return fail(fmt::format("'{}' is not a field name such as DCGM_FI_DEV_GPU_UTIL", field));
    }
    for (char& c : type) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (type != "gauge" && type != "counter" && type != "label") {
      return fail(fmt::format("{}: unknown type '{}' (expected gauge, counter or label)", field, type));
    }
    if (!seen.emplace(field).second) return fail(fmt::format("{} is listed twice", field));
    out.counters.push_back({std::string(field), std::move(type), std::string(help), line_no});
  }
  return out;
}

Result<DcgmCounters> load_dcgm_counters(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rbe");
  if (f == nullptr) {
    return Error{errno, fmt::format("{}: cannot read the counters file: {}", path, std::strerror(errno))};
  }
  std::string text;
  char buf[8192];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0 && text.size() <= kMaxCountersBytes) text.append(buf, n);
  const int err = std::ferror(f) ? errno : 0;
  std::fclose(f);
  if (err != 0) {
    return Error{err, fmt::format("{}: cannot read the counters file: {}", path, std::strerror(err))};
  }
  if (text.size() > kMaxCountersBytes) {
    return Error{EFBIG, fmt::format("{}: the counters file is larger than {} bytes", path, kMaxCountersBytes)};
  }
  return parse_dcgm_counters(text, path);
}

DcgmCounters default_dcgm_counters() {
  // The uncommented lines of dcgm-exporter's etc/default-counters.csv (4.x), with its help texts.
  return DcgmCounters{
      "built-in default",
      {
          {"DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", 0},
          {"DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", 0},
          {"DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C).", 0},
          {"DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", 0},
          {"DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", 0},
          {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ).", 0},
          {"DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries.", 0},
          {"DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", 0},
          {"DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", 0},
          {"DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %).", 0},
          {"DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %).", 0},
          {"DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", 0},
          {"DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", 0},
          {"DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", 0},
          {"DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB).", 0},
          {"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter",
           "Total number of NVLink bandwidth counters for all lanes.", 0},
          {"DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", "vGPU License status", 0},
          {"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for uncorrectable errors", 0},
          {"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors", 0},
          {"DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed", 0},
          {"DCGM_FI_DRIVER_VERSION", "label", "Driver Version", 0},
          {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active.", 0},
          {"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active.", 0},
          {"DCGM_FI_PROF_DRAM_ACTIVE", "gauge",
           "Ratio of cycles the device memory interface is active sending or receiving data.", 0},
          {"DCGM_FI_PROF_PCIE_TX_BYTES", "gauge",
           "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - "
           "in bytes per second.",
           0},
          {"DCGM_FI_PROF_PCIE_RX_BYTES", "gauge",
           "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in "
           "bytes per second.",
           0},
      }};
}

}  // namespace gpumeter
