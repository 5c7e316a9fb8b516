#include "render/api_v1.h"

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

namespace gpumeter {

namespace {

// Keys in the order written (index and uuid first), so the answer reads top-down.
using json = nlohmann::ordered_json;

json optional_number(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

json labeled(const std::vector<LabeledValue>& values) {
  json out = json::object();
  for (const auto& v : values) out[v.label] = v.value;
  return out;
}

json owner_json(const OwnerLabels& o) {
  json out = json::object();
  out["project"] = o.project;
  // Scheduler labels only where known, as on the metrics.
  for (const auto& [key, value] : {std::pair<const char*, const std::string&>{"user", o.user},
                                   {"namespace", o.namespace_},
                                   {"pod", o.pod},
                                   {"container", o.container},
                                   {"hpc_job", o.hpc_job},
                                   {"fault", o.fault}}) {
    if (!value.empty()) out[key] = value;
  }
  return out;
}

json profiling_json(const ProfilingReading& p) {
  return {{"graphics_active_ratio", optional_number(p.graphics_active_ratio)},
          {"sm_active_ratio", optional_number(p.sm_active_ratio)},
          {"sm_occupancy_ratio", optional_number(p.sm_occupancy_ratio)},
          {"tensor_active_ratio", optional_number(p.tensor_active_ratio)},
          {"dram_active_ratio", optional_number(p.dram_active_ratio)},
          {"fp64_active_ratio", optional_number(p.fp64_active_ratio)},
          {"fp32_active_ratio", optional_number(p.fp32_active_ratio)},
          {"fp16_active_ratio", optional_number(p.fp16_active_ratio)}};
}

// Why `profiling` is what it is: "measured"; "pending", supported but its first pair of
// samples not taken yet; "unsupported", the GPU has no profiling (GPM: Hopper and newer
// NVIDIA); "off", the profiling collector is switched off.
std::string_view profiling_status(const DeviceReading& r, const CollectorSet& enabled) {
  if (!enabled.has(CollectorId::kProfiling)) return "off";
  if (r.profiling) return "measured";
  return r.profiling_supported == true ? "pending" : "unsupported";
}

json gpu_json(const GpuSnapshot& g, const CollectorSet& enabled) {
  const DeviceIdentity& id = g.identity;
  json out{{"index", id.index},
           {"uuid", id.uuid},
           {"vendor", id.vendor},
           {"model", id.model},
           {"pci_bus_id", id.pci_bus_id},
           {"driver_version", id.driver_version},
           {"up", g.up},
           {"down_reason", g.up ? json(nullptr) : json(g.down_reason)},
           {"reading_unix", g.last_success_unix > 0 ? json(g.last_success_unix) : json(nullptr)}};
  const DeviceReading* r = g.up ? g.reading.get() : nullptr;
  if (r != nullptr) {
    out["utilization_ratio"] = optional_number(r->device.utilization_ratio);
    out["memory_utilization_ratio"] = optional_number(r->device.memory_utilization_ratio);
    out["memory"] = {{"total_bytes", optional_number(r->device.memory_total_bytes)},
                     {"used_bytes", optional_number(r->device.memory_used_bytes)},
                     {"free_bytes", optional_number(r->device.memory_free_bytes)}};
    out["temperature_celsius"] = labeled(r->device.temperature_celsius);
    out["power_watts"] = optional_number(r->device.power_watts);
    out["power_limit_watts"] = optional_number(r->device.power_limit_watts);
    out["clock_hertz"] = labeled(r->clocks.hertz);
    out["profiling"] = r->profiling ? profiling_json(*r->profiling) : json(nullptr);
    out["profiling_status"] = profiling_status(*r, enabled);
    if (r->mig.enabled) {
      json instances = json::array();
      for (const auto& m : r->mig.instances) {
        instances.push_back({{"mig_uuid", m.uuid},
                             {"gpu_instance", m.gpu_instance},
                             {"compute_instance", m.compute_instance},
                             {"profile", m.profile},
                             {"slices", m.slices},
                             {"memory",
                              {{"total_bytes", optional_number(m.memory_total_bytes)},
                               {"used_bytes", optional_number(m.memory_used_bytes)}}},
                             {"profiling", m.profiling ? profiling_json(*m.profiling) : json(nullptr)}});
      }
      out["mig"] = {{"enabled", *r->mig.enabled},
                    {"slices", r->mig.slices ? json(*r->mig.slices) : json(nullptr)},
                    {"instances", std::move(instances)}};
    }
  }
  // The processes on the GPU now, with their owners, and the owners once each.
  json processes = json::array();
  std::set<OwnerLabels> owners;
  for (const auto& p : g.processes) {
    if (!p.running) continue;
    processes.push_back({{"pid", p.pid},
                         {"memory_bytes", optional_number(p.memory_bytes)},
                         {"utilization_ratio", optional_number(p.utilization_ratio)},
                         {"owner", owner_json(p.owner)}});
    owners.insert(p.owner);
  }
  out["processes"] = std::move(processes);
  json owner_list = json::array();
  for (const auto& o : owners) owner_list.push_back(owner_json(o));
  out["owners"] = std::move(owner_list);
  return out;
}

// A body as rendered once per snapshot: the whole document but its end, which api_tail adds.
std::string without_end(const json& doc) {
  // Bytes that are not UTF-8 (a driver's model name) are replaced, as on /metrics; owner labels
  // already are where they are made.
  std::string out = doc.dump(2, ' ', false, json::error_handler_t::replace);
  out.resize(out.size() - 2);  // dump(2) of an object ends in "\n}"
  return out;
}

}  // namespace

PreparedApi::PreparedApi(std::shared_ptr<const Snapshot> snapshot) : snapshot_(std::move(snapshot)) {}

void PreparedApi::render() const {
  std::call_once(once_, [this] {
    const Snapshot& s = *snapshot_;
    json all{{"api_version", "v1"}, {"snapshot_unix", s.taken_unix}, {"gpus", json::array()}};
    for (const auto& g : s.gpus) {
      json one{{"api_version", "v1"}, {"snapshot_unix", s.taken_unix}, {"gpu", gpu_json(g, s.enabled)}};
      by_uuid_.emplace_back(g.identity.uuid, without_end(one));
      all["gpus"].push_back(std::move(one["gpu"]));
    }
    all_ = without_end(all);
  });
}

std::string_view PreparedApi::gpus() const {
  render();
  return all_;
}

std::optional<std::string_view> PreparedApi::gpu(std::string_view uuid) const {
  render();
  for (const auto& [u, body] : by_uuid_) {
    if (u == uuid) return std::string_view(body);
  }
  return std::nullopt;
}

std::string render_api_tail(double age_seconds) {
  return ",\n  \"snapshot_age_seconds\": " + json(std::max(0.0, age_seconds)).dump() + "\n}\n";
}

std::string render_api_error(std::string_view message) {
  return json{{"error", std::string(message)}}.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace gpumeter
