#pragma once
// NVML event sets. Each set remembers, per registered GPU, which of that GPU's scheduled Xid
// events it has delivered, so every set sees every event once, and only events scheduled at
// or after its registration. An event inside a MIG instance is withheld from a caller without
// CAP_SYS_ADMIN (docs/nvml-behaviour.md, "MIG without CAP_SYS_ADMIN").

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "abi/nvml_api.h"
#include "sim/nvml/session.h"

// The opaque handle type of nvml_api.h, defined here: a handle is a pointer to one of these.
struct nvmlEventSet_st {
  struct Registration {
    unsigned gpu = 0;
    unsigned long long mask = 0;
    std::size_t next = 0;  // index of the first undelivered event in Session::xids(gpu)
  };
  std::mutex mu;
  std::vector<Registration> registrations;
  // Bumped and signalled on every registration, so a waiter learns of a GPU added meanwhile
  // (whose events may be due sooner) without polling.
  unsigned long long generation = 0;
  std::condition_variable changed;
};

namespace gpumeter::sim {

unsigned long long supported_event_types(const GpuModelSpec& model);

// Adds (or widens) the registration of `gpu`, counting only events at or after time t.
void register_events(nvmlEventSet_st& set, const Session& session, unsigned gpu, unsigned long long mask, Micros t);

struct DueEvent {
  unsigned gpu = 0;
  unsigned code = 0;
  // nvmlEventData_t's ids of the MIG instance the event happened in; 0xFFFFFFFF for both when
  // it affects the whole GPU.
  unsigned gpu_instance_id = GPUMETER_NVML_WHOLE_GPU_EVENT;
  unsigned compute_instance_id = GPUMETER_NVML_WHOLE_GPU_EVENT;
};

// Takes the earliest event due by time t that the set has not delivered yet, passing over
// the events inside a MIG instance that happened while the GPU refused unprivileged callers.
std::optional<DueEvent> take_due_event(nvmlEventSet_st& set, const Session& session, Micros t);

unsigned long long registration_generation(nvmlEventSet_st& set);

// Blocks until `until` or until the set's registrations change from generation `seen`.
void wait_for_change(nvmlEventSet_st& set, unsigned long long seen, std::chrono::steady_clock::time_point until);

// Whether any GPU registered in the set is in a lost window at t.
bool any_registered_gpu_lost(nvmlEventSet_st& set, const Session& session, Micros t);

// When the next lost window of a registered GPU starts after t, or kForever.
Micros next_lost_start(nvmlEventSet_st& set, const Session& session, Micros t);

// The scenario time of the next event the set will deliver, or kForever.
Micros next_event_time(nvmlEventSet_st& set, const Session& session);

}  // namespace gpumeter::sim
