#pragma once
// GPM sample buffers (nvmlGpmSampleAlloc/Free/Get): each holds one snapshot of a GPU's
// profiling integrals. The table owns them, so a pointer the library did not hand out, or one
// already freed, is told apart from a live one instead of being dereferenced.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "abi/nvml_api.h"
#include "sim/physics/profiling.h"
#include "sim/scenario/time.h"

struct nvmlGpmSample_st {
  bool filled = false;  // nvmlGpmSampleGet has written it
  unsigned gpu = 0;
  std::size_t mig = gpumeter::sim::kNoMigInstance;  // the MIG instance sampled, or the whole GPU
  gpumeter::sim::Micros at = 0;                     // the refresh instant the snapshot is of
  gpumeter::sim::ProfileTotals totals;
};

namespace gpumeter::sim {

class GpmSampleTable {
 public:
  nvmlGpmSample_t allocate();
  bool free(nvmlGpmSample_t sample);
  bool store(nvmlGpmSample_t sample, const nvmlGpmSample_st& value);
  std::optional<nvmlGpmSample_st> load(nvmlGpmSample_t sample) const;  // none: not a live sample

 private:
  mutable std::mutex mu_;
  std::map<std::uintptr_t, std::unique_ptr<nvmlGpmSample_st>> samples_;
};

}  // namespace gpumeter::sim
