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
#include "nvml/nvml_api.h"

namespace gpumeter::fake {

constexpr unsigned kMaxGpus = 4;

struct FakeProcess {
  unsigned pid = 0;
  unsigned long long memory = 0;
};

struct Script {
  // Return codes: for one (call, gpu), for a call on every GPU, or for every device call.
  std::map<std::pair<std::string, unsigned>, nvmlReturn_t> gpu_rc;
  std::map<std::string, nvmlReturn_t> rc;
  std::optional<nvmlReturn_t> all_rc;  // every device call, and nvmlInit_v2 while set
  std::optional<nvmlReturn_t> init_rc;
  std::map<std::string, int> calls;  // by name, every GPU

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
  std::set<unsigned> lost;            // registering these answers GPU_IS_LOST
  std::map<int, std::set<unsigned>> registered;  // set id -> GPUs registered in it
  int sets_created = 0;
  int sets_freed = 0;
  int inits = 0;
  int shutdowns = 0;

  // A call that blocks until released (a hung driver call).
  std::string block_call;
  std::mutex block_mu;
  std::condition_variable block_cv;
  bool blocked = false;   // a call is waiting
  bool release = false;
};

Script& script();
void reset();
nvmlDevice_t handle(unsigned gpu);
int current_set();  // id of the newest event set

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
