#pragma once
// The result of `gpumeter report`: usage and cost per group over one period, as plain values.
// The query engine (usage_query.h) fills it; the formatters (table, CSV, JSON, HTML) only read
// it and do no I/O of their own.

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "pricing/pricing.h"

namespace gpumeter::report {

// Exact period totals of the ledger counters, in base units.
struct Usage {
  double allocated_seconds = 0;    // gpu_allocated_seconds_total
  double busy_seconds = 0;         // gpu_busy_seconds_total
  double memory_byte_seconds = 0;  // gpu_memory_byte_seconds_total
  double energy_joules = 0;        // gpu_attributed_energy_joules_total
  // Part of allocated_seconds the scheduler allocated with none of the owner's processes on the
  // GPU (gpu_idle_allocated_seconds_total; 0 under the process allocation policy).
  double idle_allocated_seconds = 0;
  // Part of allocated_seconds on MIG instances (series with a mig_profile): GPU-seconds, so an
  // instance of 3 slices of 7 adds 3/7 per second.
  double mig_allocated_seconds = 0;
  // Part of busy_seconds on MIG instances: their SM activity (GPM), a different quantity from a
  // whole GPU's time busy (docs/ledger.md, "MIG"), in GPU-seconds.
  double mig_sm_active_seconds = 0;
  // The footprint of energy_joules at its site (pricing file `sites`): the facility's energy,
  // energy_joules x PUE, and its carbon, that x the grid's gCO2e/kWh, in kg. 0 without sites.
  double facility_energy_joules = 0;
  double co2e_kg = 0;
  // The part of energy_joules at the boards' idle power while the group held them
  // (gpu_attributed_idle_energy_joules_total), read with sites only; the rest is active energy.
  double idle_energy_joules = 0;

  Usage& operator+=(const Usage& o) {
    allocated_seconds += o.allocated_seconds;
    mig_allocated_seconds += o.mig_allocated_seconds;
    mig_sm_active_seconds += o.mig_sm_active_seconds;
    idle_allocated_seconds += o.idle_allocated_seconds;
    busy_seconds += o.busy_seconds;
    memory_byte_seconds += o.memory_byte_seconds;
    energy_joules += o.energy_joules;
    facility_energy_joules += o.facility_energy_joules;
    co2e_kg += o.co2e_kg;
    idle_energy_joules += o.idle_energy_joules;
    return *this;
  }
  // busy / allocated; nullopt when nothing was allocated.
  std::optional<double> efficiency() const {
    if (allocated_seconds <= 0) return std::nullopt;
    return busy_seconds / allocated_seconds;
  }
};

// In the pricing file's currency. `idle` is this row's share of spread idle cost (zero under
// the "separate" policy, where idle time is a row of its own).
struct Cost {
  double allocation = 0;
  double utilization = 0;
  double energy = 0;
  double idle = 0;

  double total() const { return allocation + utilization + energy + idle; }
  Cost& operator+=(const Cost& o) {
    allocation += o.allocation;
    utilization += o.utilization;
    energy += o.energy;
    idle += o.idle;
    return *this;
  }
};

struct Budget {
  double monthly = 0;     // from the pricing file
  double for_period = 0;  // prorated to the report's period (monthly x period / 30.4375 days)
  double used_ratio = 0;  // total cost / for_period
};

// What a group will hold over the forecast's horizon (report --forecast), from the trend of the
// GPUs it held over the period (report/forecast.h).
struct RowForecast {
  double gpus_at_end = 0;
  double trend_gpus_per_day = 0;
  double gpu_hours = 0;
  std::optional<double> cost;  // at the group's cost per allocated GPU-hour over the period
};

struct Row {
  // One value per `--by` dimension, in the same order. Idle time carries "__idle__" and busy
  // time no process accounts for "__unattributed__" in every owner dimension.
  std::vector<std::string> key;
  Usage usage;
  Cost cost;                     // all zero without a pricing file
  std::optional<Budget> budget;  // only when grouping by project and the project has one
  bool idle = false;             // the "__idle__" row
  bool unattributed = false;     // the "__unattributed__" row
  // The "__faulty__" row: time on faulty GPUs, kept out of the owners' charges (pricing file
  // `faulty: exclude`), idle time on them included.
  bool faulty = false;
  std::set<std::string> mig_profiles;   // the MIG profiles of the instances the row's time was on
  std::optional<RowForecast> forecast;  // owner rows and the total, with --forecast
};

// Owners plus idle equals the capacity: the checks behind the "reconciliation" section.
// The row of time on faulty GPUs under `faulty: exclude`, in every owner dimension.
inline constexpr const char* kFaultyProject = "__faulty__";

struct Reconciliation {
  double gpu_seconds = 0;         // GPUs x seconds each GPU reported within the period
  double covered_seconds = 0;     // gpumeter_ledger_covered_seconds_total increase
  double gap_seconds = 0;         // gpumeter_ledger_gap_seconds_total increase (agent could not integrate)
  double owners_seconds = 0;      // allocated seconds of every owner row, idle excluded
  double idle_seconds = 0;        // allocated seconds of "__idle__"
  double faulty_seconds = 0;      // allocated seconds of "__faulty__" (faulty: exclude only)
  double difference_seconds = 0;  // owners + idle + faulty - covered
  bool ok = true;                 // |difference| within 1e-6 relative (plus 1 ms)
};

struct Warning {
  std::string kind;     // "gap", "missing-data", "missing-series", "reset", "reconciliation", "pricing", "backend"
  std::string message;  // complete, names the GPU(s) and the time range
  std::string gpu;      // uuid, when the warning is about one GPU
  std::string node;
  double from = 0;  // unix seconds; 0 when not about a time range
  double to = 0;
};

struct Timeline {
  std::vector<double> starts;  // unix seconds, one per step; steps tile the period
  std::vector<double> ends;
  // Per row (same order as Report::rows), per step. Cost when priced, else allocated seconds.
  std::vector<std::vector<double>> row_values;
  std::vector<double> idle_seconds;      // per step, whole fleet
  std::vector<double> capacity_seconds;  // per step, covered seconds of the whole fleet
};

struct Report {
  std::string url;
  std::string backend;  // "Prometheus 2.42.0", "VictoriaMetrics", or "unknown"
  double from = 0;      // unix seconds
  double to = 0;
  double step_seconds = 0;  // the timeline's step (the last step may be shorter)
  std::vector<std::string> by;
  bool priced = false;
  std::string currency;  // when priced
  std::string pricing_source;
  std::string idle_policy;           // when priced
  std::string faulty_policy;         // when priced: "bill" or "exclude"
  bool footprint = false;            // the pricing file has sites: facility energy and CO2e are set
  pricing::BillingIdentity billing;  // the pricing file's `billing` names, for the FOCUS export
  std::vector<Row> rows;             // most expensive first (most allocated seconds when unpriced)
  Row total;                         // key empty
  double forecast_seconds = 0;       // the forecast's horizon; 0 without --forecast
  Timeline timeline;
  Reconciliation reconciliation;
  std::vector<Warning> warnings;
  int queries = 0;  // HTTP API requests made
  double elapsed_seconds = 0;
};

// Whether any row holds time on MIG instances: the table, CSV and HTML page show the slice
// column only then.
inline bool has_mig_slices(const Report& r) {
  for (const Row& row : r.rows) {
    if (row.usage.mig_allocated_seconds > 0) return true;
  }
  return false;
}

// Whether any row was held with no process (the scheduler allocation policy was in force and
// some GPU sat idle in an allocation): the table and the HTML page show that column only then.
inline bool has_idle_allocation(const Report& r) {
  for (const Row& row : r.rows) {
    if (row.usage.idle_allocated_seconds > 0) return true;
  }
  return false;
}

}  // namespace gpumeter::report
