#pragma once
// A scripted NVML for unit tests: plain functions over one global script, handed to the
// backend through a SymbolSource, so a test can set return codes, record layouts, garbage
// records and event-set answers that the simulator does not produce.

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "backend/dynamic_library.h"
#include "backend/nvml/nvml_backend.h"
#include "abi/nvml_api.h"

namespace gpumeter::fake {

constexpr unsigned kMaxGpus = 4;

struct FakeProcess {
  unsigned pid = 0;
  unsigned long long memory = 0;
};

// NVLink: one link's field values (fields 164, 165, 138/139 in KiB, 161..163).
struct FakeLink {
  unsigned state = 1;  // NVML_FEATURE_ENABLED
  unsigned speed_mbps = 25781;
  unsigned long long tx_kib = 0;
  unsigned long long rx_kib = 0;
  unsigned long long replay = 0;
  unsigned long long recovery = 0;
  unsigned long long crc = 0;
};

// A GPU instance profile (nvmlDeviceGetGpuInstanceProfileInfoV), by profile enum.
struct FakeProfile {
  unsigned profile = 0;  // NVML_GPU_INSTANCE_PROFILE_*
  unsigned id = 0;
  unsigned slices = 0;
  unsigned long long memory_mb = 0;
  std::string name;  // "MIG 3g.40gb"
};

// A MIG device (one compute instance): what its handle answers.
struct FakeMig {
  std::string uuid;
  unsigned gpu_instance = 0;
  unsigned compute_instance = 0;
  unsigned profile_id = 0;  // of its GPU instance
  unsigned gi_slices = 0;
  unsigned ci_slices = 0;
  unsigned long long memory_total = 0;
  unsigned long long memory_used = 0;
  std::vector<FakeProcess> processes;
};

// The target of a GPM sample: a GPU (gpu_instance kWholeGpu) or one of its GPU instances.
constexpr unsigned kWholeGpu = ~0U;
constexpr unsigned kMaxMigSlots = 8;

struct Script {
  // Return codes: for one (call, gpu), for a call on every GPU, or for every device call.
  std::map<std::pair<std::string, unsigned>, nvmlReturn_t> gpu_rc;
  std::map<std::string, nvmlReturn_t> rc;
  std::optional<nvmlReturn_t> all_rc;  // every device call, and nvmlInit_v2 while set
  std::optional<nvmlReturn_t> init_rc;
  std::deque<nvmlReturn_t> init_answers;  // answered first, one per nvmlInit_v2
  std::map<std::string, int> calls;       // by name, every GPU; guarded by calls_mu
  std::mutex calls_mu;

  unsigned device_count = 2;
  std::string driver = "550.54.15";

  // _v3 process lists (compute), written with `process_stride` bytes per record.
  std::vector<FakeProcess> processes[kMaxGpus];
  unsigned process_stride = 24;

  std::vector<nvmlSample_t> utilization_samples[kMaxGpus];

  // Per-process utilization, for both calls. The size query answers `capacity`.
  bool has_processes_utilization_info = false;
  std::vector<nvmlProcessUtilizationSample_t> process_samples[kMaxGpus];
  unsigned capacity = 100;
  std::vector<unsigned long long> last_seen_passed;  // lastSeenTimeStamp of every data call

  // Events.
  std::deque<std::pair<nvmlReturn_t, nvmlEventData_t>> wait_answers;  // then TIMEOUT
  std::set<unsigned> lost;                                            // registering these answers GPU_IS_LOST
  std::map<int, std::set<unsigned>> registered;                       // set id -> GPUs registered in it
  int sets_created = 0;
  int sets_freed = 0;
  int inits = 0;
  int shutdowns = 0;

  // GPM. Samples are numbered per target in the order they were taken; nvmlGpmMetricsGet
  // answers gpm_values[target] (percent or MiB/s), and records which samples it was given.
  bool gpm_supported[kMaxGpus] = {};
  std::map<std::pair<unsigned, unsigned>, std::map<unsigned, double>> gpm_values;  // (gpu, gi) -> metric -> value
  std::map<unsigned, nvmlReturn_t> gpm_metric_rc;                                  // metric -> its own status
  struct MetricsCall {
    unsigned gpu, gpu_instance;
    int first, second;  // sample numbers
    unsigned metrics;   // how many the call asked for
  };
  std::vector<MetricsCall> metrics_calls;
  int gpm_allocated = 0;
  int gpm_freed = 0;

  // nvmlDeviceGetPcieThroughput, absent unless has_pcie_throughput: KB/s by GPU and counter
  // (NVML_PCIE_UTIL_TX_BYTES, _RX_BYTES). Called on the backend's throughput reader's thread.
  bool has_pcie_throughput = false;
  unsigned pcie_kb_per_second[kMaxGpus][2] = {};

  // NVLink and field values. A field not scripted answers its own NOT_SUPPORTED.
  std::vector<FakeLink> links[kMaxGpus];
  std::map<std::pair<unsigned, unsigned>, nvmlReturn_t> field_rc;  // (field id, scope) -> status

  // MIG: mode, the profiles of a MIG-capable GPU and the MIG device slots (empty: NOT_FOUND).
  bool mig_capable[kMaxGpus] = {};
  unsigned mig_mode[kMaxGpus] = {};
  std::vector<FakeProfile> profiles;
  std::vector<std::optional<FakeMig>> mig[kMaxGpus];

  // A call that blocks until released (a hung driver call).
  std::string block_call;
  std::mutex block_mu;
  std::condition_variable block_cv;
  bool blocked = false;  // a call is waiting
  bool release = false;
};

Script& script();
void reset();
nvmlDevice_t handle(unsigned gpu);
nvmlDevice_t mig_handle(unsigned gpu, unsigned slot);
// The A100/H100 profiles as NVIDIA's MIG user guide lists them for an H100 80GB.
std::vector<FakeProfile> h100_profiles();
int current_set();  // id of the newest event set
// How many times `name` was called, for a call made on a thread of the backend's own.
int calls_of(const std::string& name);
// A backend on the fake whose time is `clock`'s; a test's failure unless it is up.
std::unique_ptr<NvmlBackend> backend_on(const Clock& clock, Logger& log);

// The fake's symbol table, minus `hidden`.
class FakeSymbols final : public SymbolSource {
 public:
  explicit FakeSymbols(std::set<std::string> hidden = {}) : hidden_(std::move(hidden)) {}
  void* symbol(const char* name) const override;
  const std::string& path() const override { return path_; }

 private:
  std::set<std::string> hidden_;
  std::string path_ = "fake-libnvidia-ml.so.1";
};

}  // namespace gpumeter::fake
