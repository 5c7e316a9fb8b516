// The ledger's persistent form: what a checkpoint writes and a restarted agent resumes from.
// Everything read back is checked: the state file is billing data. A structure that cannot be
// true stops the load; an amount that cannot be true restarts at 0 and is reported, and the rest
// is resumed.

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "ledger/ledger.h"

namespace gpumeter {

namespace {

nlohmann::json owner_json(const OwnerLabels& o) {
  nlohmann::json j{{"project", o.project}, {"user", o.user},           {"namespace", o.namespace_},
                   {"pod", o.pod},         {"container", o.container}, {"hpc_job", o.hpc_job}};
  if (!o.fault.empty()) j["fault"] = o.fault;
  return j;
}

struct MalformedField : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The integer at j[key]. get<integer>() casts a floating-point number without a range check
// (undefined for 1e300) and wraps a negative one into an unsigned type; the state file is
// read back from disk, where anything can have happened to it.
template <typename T>
T integer_at(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = j.at(key);
  if (v.is_number_unsigned()) {
    if (const auto u = v.get<std::uint64_t>(); std::in_range<T>(u)) return static_cast<T>(u);
  } else if (v.is_number_integer()) {
    if (const auto i = v.get<std::int64_t>(); std::in_range<T>(i)) return static_cast<T>(i);
  }
  throw MalformedField(std::string("\"") + key + "\" is not an integer in range: " + v.dump());
}

// A counter or amount at j[key]: a finite number, never negative. One that is not (a NaN, which
// JSON writes as null; an infinity; a negative number) is described in `dropped` and read as 0;
// a missing key is a structural fault (nlohmann's exception).
double amount_at(const nlohmann::json& j, const char* key, const std::string& where,
                 std::vector<std::string>* dropped) {
  const nlohmann::json& v = j.at(key);
  if (v.is_number()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d >= 0) return d;
  }
  if (dropped != nullptr) dropped->push_back(where + "\"" + key + "\" was " + v.dump() + ", not a finite amount");
  return 0;
}

OwnerLabels owner_from_json(const nlohmann::json& j) {
  OwnerLabels o;
  o.project = j.at("project").get<std::string>();
  o.user = j.at("user").get<std::string>();
  o.namespace_ = j.at("namespace").get<std::string>();
  o.pod = j.at("pod").get<std::string>();
  o.container = j.at("container").get<std::string>();
  o.hpc_job = j.at("hpc_job").get<std::string>();
  if (j.contains("fault")) o.fault = j.at("fault").get<std::string>();
  return o;
}

}  // namespace

nlohmann::json GpuLedger::to_json() const {
  nlohmann::json j;
  j["mode"] = mode_ == Mode::kSamples ? "samples" : mode_ == Mode::kPolled ? "polled" : "none";
  j["cursor_us"] = cursor_us_;
  if (device_period_us_ > 0) j["device_period_us"] = device_period_us_;
  if (energy_counter_) j["energy_counter_joules"] = *energy_counter_;
  j["covered_seconds"] = covered_seconds_;
  j["busy_seconds"] = busy_seconds_;
  j["energy_joules"] = energy_joules_;
  j["gap_seconds"] = gap_seconds_;
  j["gaps"] = gaps_;
  if (foreign_seconds_ > 0) j["foreign_seconds"] = foreign_seconds_;
  if (!allocated_->empty()) {
    auto& allocated = j["allocated"] = nlohmann::json::array();
    for (const auto& o : *allocated_) allocated.push_back(owner_json(o));
  }
  auto& procs = j["processes"] = nlohmann::json::array();
  for (const auto& p : previous_) {
    procs.push_back({{"pid", p.pid}, {"owner", owner_json(p.owner)}, {"memory_bytes", p.memory_bytes}});
  }
  auto& owners = j["owners"] = nlohmann::json::array();
  for (const auto& [o, t] : owners_) {
    owners.push_back({{"owner", owner_json(o)},
                      {"allocated_seconds", t.allocated_seconds},
                      {"busy_seconds", t.busy_seconds},
                      {"memory_byte_seconds", t.memory_byte_seconds},
                      {"energy_joules", t.energy_joules},
                      {"last_active_us", t.last_active_us}});
    if (t.idle_allocated_seconds > 0) owners.back()["idle_allocated_seconds"] = t.idle_allocated_seconds;
    if (t.idle_energy_joules > 0) owners.back()["idle_energy_joules"] = t.idle_energy_joules;
  }
  return j;
}

Result<GpuLedger> GpuLedger::from_json(const nlohmann::json& j, GpuLedgerOptions options,
                                       std::vector<std::string>* dropped) {
  try {
    GpuLedger l(options);
    const std::string mode = j.at("mode").get<std::string>();
    if (mode == "samples") {
      l.mode_ = Mode::kSamples;
    } else if (mode == "polled") {
      l.mode_ = Mode::kPolled;
    } else if (mode != "none") {
      return Error{1, "unknown ledger mode '" + mode + "'"};
    }
    l.started_ = l.mode_ != Mode::kNone;
    l.cursor_us_ = integer_at<std::int64_t>(j, "cursor_us");
    if (l.cursor_us_ < 0) return Error{1, "\"cursor_us\" is negative"};
    // Older state files lack it; the next batch of samples teaches it again.
    if (j.contains("device_period_us"))
      l.device_period_us_ = std::max<std::int64_t>(0, integer_at<std::int64_t>(j, "device_period_us"));
    // The driver's counter as last read: one that cannot be true is forgotten, not read as 0,
    // which would bill the whole counter at the next reading.
    if (j.contains("energy_counter_joules")) {
      std::vector<std::string> bad;
      const double counter = amount_at(j, "energy_counter_joules", "", &bad);
      if (bad.empty()) l.energy_counter_ = counter;
      if (dropped != nullptr) dropped->insert(dropped->end(), bad.begin(), bad.end());
    }
    l.covered_seconds_ = amount_at(j, "covered_seconds", "", dropped);
    l.busy_seconds_ = amount_at(j, "busy_seconds", "", dropped);
    l.energy_joules_ = amount_at(j, "energy_joules", "", dropped);
    l.gap_seconds_ = amount_at(j, "gap_seconds", "", dropped);
    l.gaps_ = integer_at<std::uint64_t>(j, "gaps");
    // Written only when there is something to say (and absent from older files).
    if (j.contains("foreign_seconds")) l.foreign_seconds_ = amount_at(j, "foreign_seconds", "", dropped);
    if (j.contains("allocated")) {
      std::vector<OwnerLabels> allocated;
      for (const auto& o : j.at("allocated")) allocated.push_back(owner_from_json(o));
      std::sort(allocated.begin(), allocated.end());
      if (std::adjacent_find(allocated.begin(), allocated.end()) != allocated.end()) {
        return Error{1, "an owner is allocated twice"};
      }
      l.allocated_ = std::make_shared<const std::vector<OwnerLabels>>(std::move(allocated));
    }
    for (const auto& p : j.at("processes")) {
      const auto pid = integer_at<unsigned>(p, "pid");
      if (std::any_of(l.previous_.begin(), l.previous_.end(), [&](const LedgerProcess& q) { return q.pid == pid; }))
        return Error{1, "process " + std::to_string(pid) + " listed twice"};
      l.previous_.push_back({pid, owner_from_json(p.at("owner")),
                             amount_at(p, "memory_bytes", "process " + std::to_string(pid) + ": ", dropped)});
    }
    for (const auto& o : j.at("owners")) {
      LedgerTotals t;
      const std::string who = "owner " + o.at("owner").dump() + ": ";
      t.allocated_seconds = amount_at(o, "allocated_seconds", who, dropped);
      t.busy_seconds = amount_at(o, "busy_seconds", who, dropped);
      t.memory_byte_seconds = amount_at(o, "memory_byte_seconds", who, dropped);
      t.energy_joules = amount_at(o, "energy_joules", who, dropped);
      t.last_active_us = integer_at<std::int64_t>(o, "last_active_us");
      if (o.contains("idle_allocated_seconds"))
        t.idle_allocated_seconds = amount_at(o, "idle_allocated_seconds", who, dropped);
      if (o.contains("idle_energy_joules")) t.idle_energy_joules = amount_at(o, "idle_energy_joules", who, dropped);
      if (t.last_active_us < 0) return Error{1, "\"last_active_us\" is negative"};
      // Two entries of one owner: which one holds its total is unknowable, and adding them
      // could bill it twice.
      if (!l.owners_.emplace(owner_from_json(o.at("owner")), t).second) {
        return Error{1, "owner listed twice: " + o.at("owner").dump()};
      }
    }
    return l;
  } catch (const nlohmann::json::exception& e) {
    return Error{1, std::string("malformed ledger entry: ") + e.what()};
  } catch (const MalformedField& e) {
    return Error{1, std::string("malformed ledger entry: ") + e.what()};
  }
}

}  // namespace gpumeter
