#pragma once
// MIG (Multi-Instance GPU) as the scenario sets it up: the profiles a GPU model offers, and per
// GPU the layouts it is partitioned into over time. A GPU listed under `mig:` is in MIG mode for
// the whole run; each layout, from its `at` on, is the set of GPU instances that exist, each
// with one compute instance spanning it (compute instance id 0). An instance named in two
// consecutive layouts with the same profile and placement lives on; any other change destroys
// it and creates new ones. docs/nvml-behaviour.md ("MIG") gives the sources and assumptions.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/scenario/time.h"

namespace gpumeter::sim {

struct GpuModelSpec;

// One GPU instance profile, as NVIDIA's MIG user guide ("Supported MIG Profiles") lists it.
struct MigProfile {
  std::string name;              // "3g.40gb"
  unsigned nvml_profile = 0;     // NVML_GPU_INSTANCE_PROFILE_*_SLICE, nvmlDeviceGetGpuInstanceProfileInfoV's argument
  unsigned id = 0;               // the profile id (nvidia-smi's "Profile ID"), which instances report
  unsigned slices = 0;           // compute slices (of the GPU's: 7 on A100 and H100, 4 on A30)
  unsigned memory_slices = 0;    // memory slices (of the GPU's: 8 on A100 and H100, 4 on A30)
  unsigned instance_count = 0;   // how many fit on an empty GPU
  unsigned multiprocessors = 0;  // SMs
  unsigned copy_engines = 0, decoders = 0, encoders = 0, jpegs = 0, ofas = 0;
  std::vector<unsigned> placements;  // legal first memory slices
  // The GPU instance id the driver gives an instance placed at placements[i] (an assumption
  // where docs/nvml-behaviour.md says so): unique among instances that can coexist.
  std::vector<unsigned> gpu_instance_ids;

  // The GPU instance id of an instance at `start`, one of `placements`.
  unsigned gpu_instance_id(unsigned start) const;
};

// MIG devices any modelled GPU can hold at once: seven 1-slice compute instances (A100, H100).
inline constexpr unsigned kMaxMigDevices = 7;
// Bounds the C layer's table of MIG device handles: instances over a whole scenario.
inline constexpr std::size_t kMaxMigInstances = 4096;
inline constexpr std::size_t kNoMigInstance = static_cast<std::size_t>(-1);

// The profiles of a model, empty when the simulator models no MIG for it (only A30 24GB,
// A100 40GB, A100 80GB and H100 80GB are modelled).
const std::vector<MigProfile>& mig_profiles(const GpuModelSpec& model);

// The whole GPU of a model in MIG mode, as its largest profile spans it: compute slices (7 on
// A100 and H100, 4 on A30) and memory slices (8, 4); 0 for a model without MIG.
unsigned mig_compute_slices(const GpuModelSpec& model);
unsigned mig_memory_slices(const GpuModelSpec& model);

// Bytes of one memory slice of a model: its memory over its memory slices, in whole MiB.
std::uint64_t mig_memory_slice_bytes(const GpuModelSpec& model);

struct MigInstance {
  std::string name;
  unsigned gpu = 0;
  std::size_t profile = 0;   // index into mig_profiles(model of gpu)
  std::string profile_name;  // "3g.40gb"
  unsigned slices = 0;
  unsigned memory_slices = 0;
  unsigned placement = 0;  // first memory slice
  unsigned gpu_instance_id = 0;
  unsigned compute_instance_id = 0;
  unsigned mig_index = 0;  // nvmlDeviceGetMigDeviceHandleByIndex's index
  std::uint64_t memory_bytes = 0;
  std::string uuid;  // "MIG-<uuid>"
  Micros start = 0;  // [start, end) of its existence
  Micros end = kForever;
};

struct MigLayout {
  Micros at = 0;
  std::vector<std::size_t> instances;  // into MigPlan::instances
};

struct MigGpu {
  unsigned gpu = 0;
  std::vector<MigLayout> layouts;  // by `at`, increasing
};

struct MigPlan {
  std::vector<MigGpu> gpus;            // in file order
  std::vector<MigInstance> instances;  // every instance of the scenario, by GPU then creation

  const MigGpu* of(unsigned gpu) const;
  bool enabled(unsigned gpu) const { return of(gpu) != nullptr; }
  // Instances of `gpu` alive at t, by MIG index.
  std::vector<std::size_t> live(unsigned gpu, Micros t) const;
  // The instance named `name`, or kNoMigInstance.
  std::size_t find(std::string_view name) const;
  // Instants in (from, to) at which some instance of `gpu` is created or destroyed.
  std::vector<Micros> edges(unsigned gpu, Micros from, Micros to) const;
};

// A MIG UUID, deterministic in the scenario's uuid_seed, the GPU and the instance's ordinal.
std::string mig_uuid(std::string_view seed, unsigned gpu, std::size_t ordinal);

}  // namespace gpumeter::sim
