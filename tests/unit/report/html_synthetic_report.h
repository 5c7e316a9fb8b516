#pragma once
// A realistic synthetic Report for the HTML formatter's tests and its screenshot fixture: a fleet of
// H100 nodes, a month of daily steps, a "separate" idle row, budgets and warnings. Deterministic,
// so the page and its screenshot are the same on every run.

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "report/report_model.h"

namespace gpumeter::report::testing {

struct SyntheticOptions {
  int projects = 12;
  int steps = 30;
  double step_seconds = 86400;
  double start = 1714521600;  // 2024-05-01T00:00:00Z
  int gpus = 32;
  bool priced = true;
  bool unattributed = true;  // a small "__unattributed__" row
};

inline const std::vector<std::string>& project_names() {
  static const std::vector<std::string> names = {
      "llm-pretrain", "vision-research", "speech",   "recsys",         "genomics",     "climate-sim",
      "robotics",     "search-ranking",  "nlp-eval", "drug-discovery", "finance-risk", "<student> & \"intern\" lab"};
  return names;
}

inline std::string project_name(int i) {
  const auto& names = project_names();
  if (i < static_cast<int>(names.size())) return names[i];
  return "team-" + std::to_string(i);
}

inline Report synthetic_report(const SyntheticOptions& o = {}) {
  constexpr double kPricePerGpuHour = 2.50, kPricePerBusyHour = 0.50, kPricePerKWh = 0.25;
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  Report r;
  r.url = "http://prometheus.monitoring:9090";
  r.backend = "Prometheus 2.53.1";
  r.from = o.start;
  r.to = o.start + o.steps * o.step_seconds;
  r.step_seconds = o.step_seconds;
  r.by = {"project"};
  r.priced = o.priced;
  if (o.priced) {
    r.currency = "EUR";
    r.pricing_source = "/etc/gpumeter/pricing.yaml";
    r.idle_policy = "separate";
    r.faulty_policy = "bill";
  }

  // Owners share the busy part of each step by fixed weights; weekends are quieter.
  const int owners = o.projects + (o.unattributed ? 1 : 0);
  std::vector<double> weight(owners), efficiency(owners), memory_gib(owners);
  for (int i = 0; i < owners; ++i) {
    weight[i] = 1.0 / std::pow(1.0 + i, 1.1);
    efficiency[i] = 0.15 + 0.8 * std::fmod(0.37 * (i + 1) * 1.618, 1.0);
    memory_gib[i] = 20 + std::fmod(13.0 * (i + 3), 60.0);
  }
  if (o.unattributed) weight[owners - 1] = 0.004, efficiency[owners - 1] = 1.0;

  std::vector<Row> rows(owners + 1);
  for (int i = 0; i < o.projects; ++i) rows[i].key = {project_name(i)};
  if (o.unattributed) rows[owners - 1].key = {"__unattributed__"}, rows[owners - 1].unattributed = true;
  Row& idle = rows[owners];
  idle.key = {"__idle__"};
  idle.idle = true;
  Timeline& t = r.timeline;
  t.row_values.assign(rows.size(), std::vector<double>(o.steps, 0.0));

  // One node lost for 6 h on day 12, with daily steps.
  const double gap_seconds = o.steps > 12 && o.step_seconds >= 86400 ? 8 * 6 * 3600.0 : 0;
  for (int k = 0; k < o.steps; ++k) {
    double start = o.start + k * o.step_seconds;
    t.starts.push_back(start);
    t.ends.push_back(start + o.step_seconds);
    double capacity = o.gpus * o.step_seconds - (k == 12 ? gap_seconds : 0);
    int weekday = (static_cast<int>(start / 86400) + 4) % 7;  // 1970-01-01 was a Thursday
    double idle_ratio = 0.10 + (weekday == 0 || weekday == 6 ? 0.22 : 0.0) + 0.05 * std::sin(k * 1.3);
    t.capacity_seconds.push_back(capacity);
    t.idle_seconds.push_back(capacity * idle_ratio);
    r.reconciliation.covered_seconds += capacity;
    r.reconciliation.idle_seconds += capacity * idle_ratio;

    // Owners and idle add up to the capacity exactly, as the ledger guarantees.
    double owned = capacity * (1 - idle_ratio);
    std::vector<double> share(owners);
    double share_sum = 0;
    for (int i = 0; i < owners; ++i) share_sum += share[i] = weight[i] * (1 + 0.35 * std::sin(0.45 * k + i));
    for (int i = 0; i < owners; ++i) {
      double allocated = owned * share[i] / share_sum;
      Usage u{allocated, allocated * efficiency[i], allocated * memory_gib[i] * kGiB,
              allocated * (efficiency[i] * 600 + (1 - efficiency[i]) * 90)};
      rows[i].usage += u;
      Cost c{u.allocated_seconds / 3600 * kPricePerGpuHour, u.busy_seconds / 3600 * kPricePerBusyHour,
             u.energy_joules / 3.6e6 * kPricePerKWh, 0};
      if (o.priced) rows[i].cost += c;
      t.row_values[i][k] = o.priced ? c.total() : u.allocated_seconds;
    }
    Usage idle_usage{capacity * idle_ratio, 0, 0, capacity * idle_ratio * 70};
    idle.usage += idle_usage;
    Cost idle_cost{idle_usage.allocated_seconds / 3600 * kPricePerGpuHour, 0,
                   idle_usage.energy_joules / 3.6e6 * kPricePerKWh, 0};
    if (o.priced) idle.cost += idle_cost;
    t.row_values[owners][k] = o.priced ? idle_cost.total() : idle_usage.allocated_seconds;
  }

  // Most expensive first, as the query engine delivers them.
  std::vector<size_t> order(rows.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto measure = [&](size_t i) { return o.priced ? rows[i].cost.total() : rows[i].usage.allocated_seconds; };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return measure(a) > measure(b); });
  std::vector<std::vector<double>> values;
  for (size_t i : order) {
    r.rows.push_back(rows[i]);
    values.push_back(t.row_values[i]);
    r.total.usage += rows[i].usage;
    r.total.cost += rows[i].cost;
    if (!rows[i].idle) r.reconciliation.owners_seconds += rows[i].usage.allocated_seconds;
  }
  t.row_values = std::move(values);

  if (o.priced) {
    const double months = (r.to - r.from) / (30.4375 * 86400);
    for (Row& row : r.rows) {
      double monthly = row.key[0] == "llm-pretrain" ? 18000
                       : row.key[0] == "speech"     ? 9000
                       : row.key[0] == "genomics"   ? 6000
                                                    : 0;
      if (monthly == 0) continue;
      Budget b{monthly, monthly * months, 0};
      b.used_ratio = row.cost.total() / b.for_period;
      row.budget = b;
    }
  }

  Reconciliation& rec = r.reconciliation;
  rec.gap_seconds = gap_seconds;
  rec.gpu_seconds = rec.covered_seconds + gap_seconds;
  rec.difference_seconds = rec.owners_seconds + rec.idle_seconds - rec.covered_seconds;
  rec.ok = std::fabs(rec.difference_seconds) <= 1e-6 * rec.covered_seconds + 1e-3;

  if (gap_seconds > 0) {
    double day12 = o.start + 12 * o.step_seconds;
    r.warnings.push_back({"gap",
                          "node gpu-node-03: 8 GPUs reported no ledger data from 2024-05-13 02:00 to 08:00 UTC "
                          "(agent restarted); 48 GPU-hours are not attributed",
                          "", "gpu-node-03", day12 + 7200, day12 + 28800});
  }
  r.warnings.push_back({"reset",
                        "GPU-5d3c8a1e-9f2b-4c6d-8e7a-1b2c3d4e5f60 on gpu-node-01: counter reset detected; the "
                        "increase was taken from zero",
                        "GPU-5d3c8a1e-9f2b-4c6d-8e7a-1b2c3d4e5f60", "gpu-node-01", 0, 0});
  r.queries = 14;
  r.elapsed_seconds = 1.83;
  return r;
}

}  // namespace gpumeter::report::testing
