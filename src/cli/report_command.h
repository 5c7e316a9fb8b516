#pragma once
// `gpumeter report`: exact chargeback for any period from any Prometheus-compatible query API
// (Prometheus, VictoriaMetrics, Thanos, Mimir). docs/chargeback.md is the guide.

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "report/replicas.h"

namespace gpumeter::cli {

struct ReportOptions {
  std::string url = "http://localhost:9090";
  std::string from = "-30d";
  std::string to = "now";
  std::vector<std::string> by = {"project"};
  std::string pricing_file;
  std::string format = "table";
  std::string output = "-";
  std::string step;  // "" chooses one from the period's length
  std::string node_label = "instance";
  std::vector<std::string> replica_labels = report::kDefaultReplicaLabels;  // {"none"}: no replicas
  std::string lookback = "31d";  // how far before --from a series' previous sample is searched
  std::string timeout = "2m";    // for the whole of each HTTP request
  std::string max_answer_size = "256MiB";
  std::string progress = "auto";  // auto (when stderr is a terminal), always, never
  std::string read = "auto";      // how raw samples are read: auto, query, remote
  std::string forecast;           // horizon of the demand forecast (--forecast 30d); empty: none
  bool no_color = false;
};

// Exit codes: 0 ok (warnings included), 1 the query API failed or answered badly, 2 bad flags,
// dates or pricing file. Nothing is written to --output unless the report is complete.
void setup_report_command(CLI::App& cmd, ReportOptions& options, int& exit_code);
int run_report(const ReportOptions& options);

}  // namespace gpumeter::cli
