#pragma once
// Builds a Report: reads the ledger counters over the period through CounterReader, groups
// them, prices them, applies the idle policy, reconciles and collects warnings.

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pricing/pricing.h"
#include "report/prom_api.h"
#include "report/replicas.h"
#include "report/report_model.h"
#include "util/result.h"

namespace gpumeter::report {

// The --by dimensions.
inline constexpr std::string_view kDimensions[] = {"project", "user", "namespace", "pod",     "hpc_job",
                                                   "model",   "gpu",  "node",      "cluster", "mig_profile"};
bool is_dimension(std::string_view name);

// How raw samples are read: the store's remote read API (Prometheus and Mimir serve it; the
// store sends its compressed chunks), or the query API alone (every store); auto: remote read
// where the store answers it, else the query API.
enum class ReadApi { kAuto, kQuery, kRemoteRead };

struct ReportRequest {
  double from = 0;
  double to = 0;
  double step = 0;      // > 0
  double lookback = 0;  // seconds before `from` searched for a series' previous sample
  double now = 0;       // for warnings about a period that ends too recently
  std::vector<std::string> by;
  std::string node_label = "instance";
  // Labels that tell HA replicas apart (report/replicas.h); empty: none.
  std::vector<std::string> replica_labels = kDefaultReplicaLabels;
  const pricing::Pricing* pricing = nullptr;  // null: usage only
  std::string url;
  double forecast = 0;  // the horizon of a demand forecast, seconds; 0: none
  ReadApi read = ReadApi::kAuto;
};

// A step for the period when none is given: the smallest of 1m, 5m, 15m, 30m, 1h, 3h, 6h, 12h
// and 1d that gives at most 400 steps.
double default_step(double period_seconds);

// Fails when the API fails or answers badly, when the period holds no ledger data, or when
// the pricing file has no price for a GPU model that was used. Warnings do not fail it.
Result<Report> build_report(PromApi& api, const ReportRequest& request,
                            std::function<void(std::string_view)> progress = {});

}  // namespace gpumeter::report
