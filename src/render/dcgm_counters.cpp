#include "render/dcgm_counters.h"

#include <fmt/format.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

#include "util/ascii.h"
#include "util/file_read.h"

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

// Text of the file quoted in an error, which goes to the log and the answer of /-/reload: at most
// 80 bytes of it, so a 1 MiB line is not repeated whole (control characters never get this far).
std::string quoted(std::string_view s) {
  constexpr std::size_t kMax = 80;
  if (s.size() <= kMax) return "'" + std::string(s) + "'";
  std::size_t cut = kMax;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // not inside a character
  return "'" + std::string(s.substr(0, cut)) + "…' (" + std::to_string(s.size()) + " bytes)";
}

// The column of the first control character (tab aside) of a line, 1-based; 0 when none. Help
// texts become # HELP lines on /metrics, and a line is quoted in errors: an ESC or NUL there
// would reach scrapers, logs and terminals.
std::size_t control_character_column(std::string_view line) {
  for (std::size_t i = 0; i < line.size(); ++i) {
    const auto c = static_cast<unsigned char>(line[i]);
    if ((c < 0x20 && c != '\t') || c == 0x7f) return i + 1;
  }
  return 0;
}

}  // namespace

Result<DcgmCounters> parse_dcgm_counters(std::string_view text, std::string source) {
  DcgmCounters out;
  out.source = source;
  std::set<std::string, std::less<>> seen;
  unsigned line_no = 0;
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);  // a UTF-8 BOM, as editors on Windows write
  while (!text.empty()) {
    ++line_no;
    auto nl = text.find('\n');
    std::string_view raw = text.substr(0, nl);
    if (raw.ends_with('\r')) raw.remove_suffix(1);  // CRLF line ends
    std::string_view line = trim(raw);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    auto fail = [&](std::string what) { return Error{0, fmt::format("{}:{}: {}", source, line_no, what)}; };
    if (const std::size_t col = control_character_column(raw); col > 0) {
      return Error{0, fmt::format("{}:{}:{}: control character 0x{:02x}", source, line_no, col,
                                  static_cast<unsigned char>(raw[col - 1]))};
    }
    if (line.empty() || line.front() == '#') continue;
    auto c1 = line.find(',');
    auto c2 = c1 == std::string_view::npos ? c1 : line.find(',', c1 + 1);
    if (c2 == std::string_view::npos) {
      return fail(fmt::format("expected 'DCGM_FIELD, type, help' (two commas), got {}", quoted(line)));
    }
    std::string_view field = trim(line.substr(0, c1));
    std::string type(trim(line.substr(c1 + 1, c2 - c1 - 1)));
    std::string_view help = trim(line.substr(c2 + 1));
    if (!is_label_name(field)) {  // a field becomes a metric or label name, so it must be one
      return fail(fmt::format("{} is not a field name such as DCGM_FI_DEV_GPU_UTIL", quoted(field)));
    }
    for (char& c : type) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (type != "gauge" && type != "counter" && type != "label") {
      return fail(fmt::format("{}: unknown type {} (expected gauge, counter or label)", field, quoted(type)));
    }
    if (!seen.emplace(field).second) return fail(fmt::format("{} is listed twice", field));
    out.counters.push_back({std::string(field), std::move(type), std::string(help), line_no});
  }
  // An empty file is a mistake (a ConfigMap key lost, a file truncated), not a choice of no
  // fields: it would turn off every DCGM_FI_* series without a word.
  if (out.counters.empty()) return Error{0, fmt::format("{}: lists no field", source)};
  return out;
}

Result<DcgmCounters> load_dcgm_counters(const std::string& path) {
  auto text = read_regular_file(path, {.max_bytes = kMaxCountersBytes});
  if (!text) {
    return Error{text.error().code, fmt::format("{}: cannot read the counters file: {}", path, text.error().message)};
  }
  return parse_dcgm_counters(*text, path);
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
          {"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter", "Total number of NVLink bandwidth counters for all lanes.",
           0},
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
