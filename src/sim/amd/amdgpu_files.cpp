#include "sim/amd/amdgpu_files.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include <fmt/format.h>

namespace gpumeter::sim::amd {

namespace {

struct Target {
  const char* name;  // the KFD node's name: the gfx target
  unsigned version;  // gfx_target_version
  unsigned xcc;      // accelerator complexes (num_xcc)
};

Target target_of(const GpuModelSpec& m) {
  if (m.architecture == "cdna3") return {"gfx942", 90402, 8};
  if (m.architecture == "cdna2") return {"gfx90a", 90010, 1};
  return {"gfx1100", 110000, 1};
}

// A CU count as KFD describes it: arrays of `cu_per_simd_array` CUs.
unsigned cu_per_array(unsigned cus) {
  for (unsigned n : {10U, 8U, 6U, 4U, 2U}) {
    if (cus % n == 0) return n;
  }
  return 1;
}

void put_u16(std::string& b, std::size_t at, unsigned v) {
  const auto x = static_cast<std::uint16_t>(v > 0xFFFF ? 0xFFFF : v);
  b[at] = static_cast<char>(x & 0xFF);
  b[at + 1] = static_cast<char>(x >> 8);
}

void put_u32(std::string& b, std::size_t at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + static_cast<std::size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xFF);
}

void put_u64(std::string& b, std::size_t at, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) b[at + static_cast<std::size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xFF);
}

}  // namespace

unsigned kfd_gpu_id(unsigned gpu) { return 40000 + 1031 * gpu % 25000; }

unsigned kfd_pasid(unsigned pid) { return 0x8000 + pid % 0x8000; }

std::string unique_id(const GpuSpec& gpu) {
  std::string hex;
  for (char c : gpu.uuid) {
    if (std::isxdigit(static_cast<unsigned char>(c)) != 0) hex += static_cast<char>(std::tolower(c));
  }
  // The UUID's last 16 hex digits: the default UUIDs differ there per GPU and per seed.
  if (hex.size() > 16) hex = hex.substr(hex.size() - 16);
  while (hex.size() < 16) hex = "0" + hex;
  if (hex[0] == '0') hex[0] = '4';  // a 64-bit id with its top nibble set, as real ones are
  return hex;
}

std::string pci_address(const PciAddress& a) {
  return fmt::format("{:04x}:{:02x}:{:02x}.0", a.domain, a.bus, a.device);
}

std::vector<unsigned> amd_gpus(const Scenario& scenario) {
  std::vector<unsigned> out;
  for (unsigned i = 0; i < scenario.gpus.size(); ++i) {
    if (scenario.is_amd(i)) out.push_back(i);
  }
  return out;
}

std::string kfd_gpu_properties(const Scenario& scenario, unsigned gpu, unsigned card) {
  const GpuModelSpec& m = scenario.model_of(gpu);
  const GpuSpec& g = scenario.gpus[gpu];
  const Target t = target_of(m);
  const unsigned per_array = cu_per_array(m.compute_units);
  const unsigned location = (g.pci.bus << 8) | (g.pci.device << 3);
  std::string s;
  s += "cpu_cores_count 0\n";
  s += fmt::format("simd_count {}\n", 4 * m.compute_units);
  s += "mem_banks_count 1\ncaches_count 0\nio_links_count 0\np2p_links_count 0\n";
  s += "cpu_core_id_base 0\nsimd_id_base 2147487744\nmax_waves_per_simd 8\nlds_size_in_kb 64\n";
  s += "gds_size_in_kb 0\nnum_gws 64\nwave_front_size 64\n";
  s += fmt::format("array_count {}\nsimd_arrays_per_engine 1\ncu_per_simd_array {}\n", m.compute_units / per_array,
                   per_array);
  s += "simd_per_cu 4\nmax_slots_scratch_cu 32\n";
  s += fmt::format("gfx_target_version {}\nvendor_id {}\ndevice_id {}\n", t.version, 0x1002, m.pci_device_id >> 16);
  s += fmt::format("location_id {}\ndomain {}\ndrm_render_minor {}\n", location, g.pci.domain, 128 + card);
  // hive_id: 0 for a GPU in no XGMI hive (the simulator models no XGMI links).
  s += "hive_id 0\nnum_sdma_engines 2\nnum_sdma_xgmi_engines 0\nnum_sdma_queues_per_engine 8\n";
  s += fmt::format("num_cp_queues 24\nmax_engine_clk_fcompute {}\nlocal_mem_size 0\n", m.graphics_clock.max_mhz);
  s += fmt::format("unique_id {}\nnum_xcc {}\nmax_engine_clk_ccompute 2000\n", std::stoull(unique_id(g), nullptr, 16),
                   t.xcc);
  return s;
}

std::string kfd_cpu_properties() {
  return "cpu_cores_count 64\nsimd_count 0\nmem_banks_count 1\ncaches_count 0\nio_links_count 0\n"
         "p2p_links_count 0\ncpu_core_id_base 0\nsimd_id_base 0\nmax_waves_per_simd 0\nlds_size_in_kb 0\n"
         "gds_size_in_kb 0\nnum_gws 0\nwave_front_size 0\narray_count 0\nsimd_arrays_per_engine 0\n"
         "cu_per_simd_array 0\nsimd_per_cu 0\nmax_slots_scratch_cu 0\ngfx_target_version 0\nvendor_id 0\n"
         "device_id 0\nlocation_id 0\ndomain 0\ndrm_render_minor 0\nhive_id 0\nnum_sdma_engines 0\n"
         "num_sdma_xgmi_engines 0\nnum_sdma_queues_per_engine 0\nnum_cp_queues 0\nmax_engine_clk_ccompute 2000\n";
}

std::string dpm_levels(const ClockRange& range, unsigned current_mhz) {
  if (range.idle_mhz == range.max_mhz) return fmt::format("0: {}Mhz *\n", range.max_mhz);
  return fmt::format("0: {}Mhz{}\n1: {}Mhz{}\n", range.idle_mhz, current_mhz == range.idle_mhz ? " *" : "",
                     range.max_mhz, current_mhz == range.max_mhz ? " *" : "");
}

unsigned pcie_tenths_gts(unsigned generation) {
  static constexpr unsigned kRates[] = {25, 50, 80, 160, 320, 640, 1280};
  return generation >= 1 && generation <= 7 ? kRates[generation - 1] : 0;
}

std::string dpm_pcie(const GpuModelSpec& model) {
  const unsigned r = pcie_tenths_gts(model.pcie_generation);
  return fmt::format("0: {}.{}GT/s, x{} 1000Mhz *\n", r / 10, r % 10, model.pcie_width);
}

std::string pcie_bw(double transmit_bytes_per_second, double receive_bytes_per_second) {
  auto messages = [](double bytes) {
    return static_cast<unsigned long long>(std::llround(std::max(0.0, bytes) / kMaxPayloadBytes));
  };
  return fmt::format("{} {} {}\n", messages(receive_bytes_per_second), messages(transmit_bytes_per_second),
                     kMaxPayloadBytes);
}

std::string gpu_metrics_v1_1(const MetricsInput& in) {
  std::string b(96, '\0');
  put_u16(b, 0, 96);
  b[2] = 1;  // format revision
  b[3] = 1;  // content revision
  put_u16(b, 4, in.edge_c);
  put_u16(b, 6, in.junction_c);
  put_u16(b, 8, in.mem_c);
  // vrgfx, vrsoc, vrmem (10..15): not modelled, 0.
  put_u16(b, 16, in.gfx_activity);
  put_u16(b, 18, in.umc_activity);
  put_u16(b, 22, in.socket_power_w);
  put_u64(b, 24, in.energy_accumulator);
  put_u64(b, 32, in.system_clock_ns);
  put_u16(b, 40, in.gfxclk_mhz);  // average_gfxclk_frequency
  put_u16(b, 44, in.uclk_mhz);    // average_uclk_frequency
  put_u16(b, 54, in.gfxclk_mhz);  // current_gfxclk
  put_u16(b, 58, in.uclk_mhz);    // current_uclk
  put_u32(b, 68, 0);              // throttle_status: nothing throttles in the model
  put_u16(b, 72, in.fan_rpm);
  put_u16(b, 74, in.pcie_width);
  put_u16(b, 76, in.pcie_speed_tenths_gts);
  for (std::size_t i = 0; i < 4; ++i) put_u16(b, 88 + 2 * i, in.mem_c);  // temperature_hbm[4]
  return b;
}

std::string gpu_metrics_v1_3(const MetricsInput& in, bool hbm) {
  std::string b = gpu_metrics_v1_1(in);
  b.resize(120, '\0');
  put_u16(b, 0, 120);
  b[3] = 3;  // content revision
  // smu_cmn_init_soft_gpu_metrics() fills the table with 0xFF before the ASIC's code sets its
  // fields: the padding keeps it, and so do the fields an ASIC leaves alone.
  for (std::size_t at : {78, 79, 110, 111}) b[at] = '\xff';
  if (!hbm) {
    // Navi 31 (smu_v13_0_0_get_gpu_metrics) sets no activity accumulators, HBM temperatures
    // or firmware timestamp: bytes 80..103 stay 0xFF.
    for (std::size_t at = 80; at < 104; ++at) b[at] = '\xff';
  }
  return b;
}

std::string gpu_metrics_v1_3_smu_v13_0_6(const MetricsInput& in) {
  std::string b = gpu_metrics_v1_3(in, true);
  // [offset, end) of what smu_v13_0_6_get_gpu_metrics() sets nothing in.
  static constexpr std::pair<std::size_t, std::size_t> kUnset[] = {
      {4, 6},      // temperature_edge
      {10, 12},    // temperature_vrgfx
      {14, 16},    // temperature_vrmem
      {20, 22},    // average_mm_activity
      {50, 54},    // average_vclk1_frequency, average_dclk1_frequency
      {64, 68},    // current_vclk1, current_dclk1
      {72, 74},    // current_fan_speed
      {88, 96},    // temperature_hbm[4]
      {104, 110},  // voltage_soc, voltage_gfx, voltage_mem
      {112, 120},  // indep_throttle_status
  };
  for (auto [from, to] : kUnset)
    std::fill(b.begin() + static_cast<std::ptrdiff_t>(from), b.begin() + static_cast<std::ptrdiff_t>(to), '\xff');
  return b;
}

std::string gpu_metrics(const GpuModelSpec& model, const MetricsInput& in) {
  if (model.architecture == "cdna3") return gpu_metrics_v1_3_smu_v13_0_6(in);
  return gpu_metrics_v1_3(in, model.architecture != "rdna3");
}

bool has_average_power(const GpuModelSpec& model) { return model.architecture != "cdna3"; }

const char* power_file(const GpuModelSpec& model) {
  return has_average_power(model) ? "power1_average" : "power1_input";
}

}  // namespace gpumeter::sim::amd
