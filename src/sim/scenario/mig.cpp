#include "sim/scenario/mig.h"

#include "sim/scenario/identifiers.h"

#include <algorithm>

#include <fmt/format.h>

#include "abi/nvml_api.h"
#include "sim/scenario/scenario.h"

namespace gpumeter::sim {

namespace {

constexpr std::uint64_t kMiB = 1024ULL * 1024ULL;
constexpr std::uint64_t kGiB = 1024ULL * kMiB;

// NVIDIA's MIG user guide, "Supported MIG Profiles": the A30, A100 (GA100) and H100 tables.
// Profile ids are nvidia-smi's (`nvidia-smi mig -lgip`); GPU instance ids go with the
// placements (docs/nvml-behaviour.md gives which are seen on real GPUs and which assumed). The
// "+me" and 1g.20gb profiles are not modelled.
MigProfile profile(std::string name, unsigned nvml_profile, unsigned id, unsigned slices, unsigned memory_slices,
                   unsigned count, unsigned sms, unsigned decoders, unsigned jpegs, unsigned ofas,
                   std::vector<unsigned> placements, std::vector<unsigned> gpu_instance_ids) {
  MigProfile p;
  p.name = std::move(name);
  p.nvml_profile = nvml_profile;
  p.id = id;
  p.slices = slices;
  p.memory_slices = memory_slices;
  p.instance_count = count;
  p.multiprocessors = sms;
  p.copy_engines = slices;
  p.decoders = decoders;
  p.encoders = 0;
  p.jpegs = jpegs;
  p.ofas = ofas;
  p.placements = std::move(placements);
  p.gpu_instance_ids = std::move(gpu_instance_ids);
  return p;
}

// A100 and H100: 7 compute slices, 8 memory slices.
std::vector<MigProfile> table(const char* g1, const char* g2, const char* g3, const char* g4, const char* g7,
                              bool hopper) {
  const unsigned sm1 = hopper ? 16 : 14;
  return {
      profile(g1, NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, 1, 1, 7, sm1, hopper ? 1 : 0, hopper ? 1 : 0, 0,
              {0, 1, 2, 3, 4, 5, 6}, {7, 8, 9, 10, 11, 12, 13}),
      profile(g2, NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, 2, 2, 3, hopper ? 32 : 28, hopper ? 2 : 1, hopper ? 2 : 0, 0,
              {0, 2, 4}, {5, 6, 3}),
      profile(g3, NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, 3, 4, 2, hopper ? 60 : 42, hopper ? 3 : 2, hopper ? 3 : 0, 0,
              {0, 4}, {2, 1}),
      profile(g4, NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, 4, 4, 1, hopper ? 64 : 56, hopper ? 4 : 2, hopper ? 4 : 0, 0,
              {0}, {2}),
      profile(g7, NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, 7, 8, 1, hopper ? 132 : 98, hopper ? 7 : 5, hopper ? 7 : 1, 1,
              {0}, {0}),
  };
}

// A30 24GB: 4 compute slices, 4 memory slices, 56 SMs.
std::vector<MigProfile> a30_table() {
  return {
      profile("1g.6gb", NVML_GPU_INSTANCE_PROFILE_1_SLICE, 14, 1, 1, 4, 14, 0, 0, 0, {0, 1, 2, 3}, {3, 4, 5, 6}),
      profile("2g.12gb", NVML_GPU_INSTANCE_PROFILE_2_SLICE, 5, 2, 2, 2, 28, 2, 0, 0, {0, 2}, {1, 2}),
      profile("4g.24gb", NVML_GPU_INSTANCE_PROFILE_4_SLICE, 0, 4, 4, 1, 56, 4, 1, 1, {0}, {0}),
  };
}

}  // namespace

unsigned MigProfile::gpu_instance_id(unsigned start) const {
  auto it = std::find(placements.begin(), placements.end(), start);
  return it == placements.end() ? 0 : gpu_instance_ids.at(static_cast<std::size_t>(it - placements.begin()));
}

const std::vector<MigProfile>& mig_profiles(const GpuModelSpec& model) {
  static const std::vector<MigProfile> none;
  static const std::vector<MigProfile> a30 = a30_table();
  static const std::vector<MigProfile> a100_40 = table("1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb", false);
  static const std::vector<MigProfile> a100_80 = table("1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", false);
  static const std::vector<MigProfile> h100_80 = table("1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", true);
  if (model.vendor != "nvidia" || model.profile != "datacenter") return none;
  if (model.architecture == "ga100") {
    if (model.memory_total_bytes <= 32 * kGiB) return a30;
    if (model.memory_total_bytes <= 48 * kGiB) return a100_40;
    if (model.memory_total_bytes <= 96 * kGiB) return a100_80;
  }
  if (model.architecture == "hopper" && model.memory_total_bytes > 48 * kGiB && model.memory_total_bytes <= 88 * kGiB)
    return h100_80;
  return none;
}

namespace {

// The profile spanning the whole GPU (the last of each table), or null.
const MigProfile* whole_gpu(const GpuModelSpec& model) {
  const auto& profiles = mig_profiles(model);
  auto it = std::max_element(profiles.begin(), profiles.end(),
                             [](const MigProfile& a, const MigProfile& b) { return a.slices < b.slices; });
  return it == profiles.end() ? nullptr : &*it;
}

}  // namespace

unsigned mig_compute_slices(const GpuModelSpec& model) {
  const MigProfile* p = whole_gpu(model);
  return p ? p->slices : 0;
}

unsigned mig_memory_slices(const GpuModelSpec& model) {
  const MigProfile* p = whole_gpu(model);
  return p ? p->memory_slices : 0;
}

std::uint64_t mig_memory_slice_bytes(const GpuModelSpec& model) {
  const unsigned slices = mig_memory_slices(model);
  return slices == 0 ? 0 : model.memory_total_bytes / slices / kMiB * kMiB;
}

const MigGpu* MigPlan::of(unsigned gpu) const {
  for (const MigGpu& g : gpus) {
    if (g.gpu == gpu) return &g;
  }
  return nullptr;
}

std::vector<std::size_t> MigPlan::live(unsigned gpu, Micros t) const {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < instances.size(); ++i) {
    const MigInstance& m = instances[i];
    if (m.gpu == gpu && m.start <= t && t < m.end) out.push_back(i);
  }
  std::sort(out.begin(), out.end(),
            [&](std::size_t a, std::size_t b) { return instances[a].mig_index < instances[b].mig_index; });
  return out;
}

std::size_t MigPlan::find(std::string_view name) const {
  for (std::size_t i = 0; i < instances.size(); ++i) {
    if (instances[i].name == name) return i;
  }
  return kNoMigInstance;
}

std::vector<Micros> MigPlan::edges(unsigned gpu, Micros from, Micros to) const {
  std::vector<Micros> out;
  for (const MigInstance& m : instances) {
    if (m.gpu != gpu) continue;
    for (Micros e : {m.start, m.end}) {
      if (e > from && e < to) out.push_back(e);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// The format drivers print since R470 (MIG user guide, "Device Enumeration"): "MIG-" and a UUID
// in 8-4-4-4-12 hex groups, here with the version 5 and RFC 4122 variant bits real ones show.
std::string mig_uuid(std::string_view seed, unsigned gpu, std::size_t ordinal) {
  auto [a, b] = seeded_words(seed, 0x4D49470000000000ULL ^ (static_cast<std::uint64_t>(gpu) << 20) ^ ordinal,
                             0x3333333333333333ULL);
  a = (a & ~0xF000ULL) | 0x5000ULL;                  // version 5
  b = (b & ~(0xC000ULL << 48)) | (0x8000ULL << 48);  // variant 10xx
  return fmt::format("MIG-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", a >> 32, (a >> 16) & 0xFFFF, a & 0xFFFF, b >> 48,
                     b & 0xFFFFFFFFFFFFULL);
}

}  // namespace gpumeter::sim
