#include "sim/nvml/event_sets.h"

#include <algorithm>

namespace gpumeter::sim {

unsigned long long supported_event_types(const GpuModelSpec& model) {
  unsigned long long types = nvmlEventTypeXidCriticalError;
  if (model.ecc) types |= nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError;
  return types;
}

void register_events(nvmlEventSet_st& set, const Session& session, unsigned gpu, unsigned long long mask, Micros t) {
  {
    std::lock_guard lock(set.mu);
    ++set.generation;
    auto it =
        std::find_if(set.registrations.begin(), set.registrations.end(), [&](const auto& r) { return r.gpu == gpu; });
    if (it != set.registrations.end()) {
      it->mask |= mask;
    } else {
      const auto& xids = session.xids(gpu);
      auto first = std::lower_bound(xids.begin(), xids.end(), t, [](const XidFault& x, Micros v) { return x.at < v; });
      set.registrations.push_back({gpu, mask, static_cast<std::size_t>(first - xids.begin())});
    }
  }
  set.changed.notify_all();
}

unsigned long long registration_generation(nvmlEventSet_st& set) {
  std::lock_guard lock(set.mu);
  return set.generation;
}

void wait_for_change(nvmlEventSet_st& set, unsigned long long seen, std::chrono::steady_clock::time_point until) {
  std::unique_lock lock(set.mu);
  set.changed.wait_until(lock, until, [&] { return set.generation != seen; });
}

std::optional<DueEvent> take_due_event(nvmlEventSet_st& set, const Session& session, Micros t) {
  std::lock_guard lock(set.mu);
  while (true) {
    nvmlEventSet_st::Registration* best = nullptr;
    for (auto& r : set.registrations) {
      if ((r.mask & nvmlEventTypeXidCriticalError) == 0) continue;
      const auto& xids = session.xids(r.gpu);
      if (r.next >= xids.size() || xids[r.next].at > t) continue;
      if (best == nullptr || xids[r.next].at < session.xids(best->gpu)[best->next].at) best = &r;
    }
    if (best == nullptr) return std::nullopt;
    const XidFault& x = session.xids(best->gpu)[best->next++];
    if (x.mig == kNoMigInstance) return DueEvent{x.gpu, x.code};
    // nvml.h, nvmlEventSetWait_v2: without privileges, "only the events which affect all the
    // instances" are reported.
    if (session.refuses_unprivileged(x.gpu, x.at)) continue;
    const MigInstance& m = session.scenario().mig.instances[x.mig];
    return DueEvent{x.gpu, x.code, m.gpu_instance_id, m.compute_instance_id};
  }
}

bool any_registered_gpu_lost(nvmlEventSet_st& set, const Session& session, Micros t) {
  std::lock_guard lock(set.mu);
  return std::any_of(set.registrations.begin(), set.registrations.end(),
                     [&](const auto& r) { return session.lost(r.gpu, t); });
}

Micros next_lost_start(nvmlEventSet_st& set, const Session& session, Micros t) {
  std::lock_guard lock(set.mu);
  Micros next = kForever;
  for (const auto& r : set.registrations) next = std::min(next, session.next_lost_start(r.gpu, t));
  return next;
}

Micros next_event_time(nvmlEventSet_st& set, const Session& session) {
  std::lock_guard lock(set.mu);
  Micros next = kForever;
  for (const auto& r : set.registrations) {
    if ((r.mask & nvmlEventTypeXidCriticalError) == 0) continue;
    const auto& xids = session.xids(r.gpu);
    if (r.next < xids.size()) next = std::min(next, xids[r.next].at);
  }
  return next;
}

}  // namespace gpumeter::sim
