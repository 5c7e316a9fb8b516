#include "report/answer_checks.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "report/time_spec.h"

namespace gpumeter::report {
namespace {

constexpr double kMinHoleSeconds = 300;  // shorter holes in the samples are scrape jitter
// Samples this close to now may still be arriving (VictoriaMetrics shows them 30 s late): one
// request can see them and the next not.
constexpr double kUnsettledSeconds = 120;
// Busy seconds beyond the GPU's covered seconds: relative, then absolute (rounding of the sums).
constexpr double kBusyTolerance = 1e-6;
constexpr double kBusyToleranceSeconds = 1e-3;

// An owner's labels for messages: project="a", user="b" (the empty ones and the GPU's left out).
std::string owner_text(const Labels& labels) {
  std::string out;
  for (const auto& [k, v] : labels) {
    if (v.empty() || k == "uuid" || k == "gpu" || k == "instance" || k == "job") continue;
    out += fmt::format("{}{}=\"{}\"", out.empty() ? "" : ", ", k, v);
  }
  return out.empty() ? "an owner with no labels" : out;
}

// "GPU GPU-1234 on node-3:9400" for messages.
std::string gpu_text(const std::string& uuid, const std::string& node) {
  return node.empty() ? fmt::format("GPU {}", uuid) : fmt::format("GPU {} on {}", uuid, node);
}

// Consecutive runs of steps (1-based) as [first, last] pairs.
std::vector<std::pair<std::size_t, std::size_t>> runs(const std::vector<std::size_t>& steps) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  for (std::size_t s : steps) {
    if (!out.empty() && out.back().second + 1 == s) {
      out.back().second = s;
    } else {
      out.emplace_back(s, s);
    }
  }
  return out;
}

Error not_finite(const Report& report, const std::string& where, const std::string& what) {
  return Error{1, fmt::format("{} is not a finite number ({}): the answers of {} hold counter values no ledger "
                              "has{}, so no report is written",
                              where, what, report.url, report.priced ? ", or a price is out of range" : "")};
}

}  // namespace

std::string label(const Labels& labels, std::string_view name) {
  auto it = labels.find(name);
  return it == labels.end() ? std::string() : it->second;
}

void add_warning(std::vector<Warning>& warnings, std::string kind, std::string message, std::string gpu,
                 std::string node, double from, double to) {
  warnings.push_back(Warning{std::move(kind), std::move(message), std::move(gpu), std::move(node), from, to});
}

void add_warning(Report& report, std::string kind, std::string message, std::string gpu, std::string node, double from,
                 double to) {
  add_warning(report.warnings, std::move(kind), std::move(message), std::move(gpu), std::move(node), from, to);
}

double sum(const std::vector<double>& v) {
  double total = 0;
  for (double x : v) total += x;
  return total;
}

// Busy time the ledger cannot have counted: on a GPU more busy seconds than seconds covered
// (busy time is the integral of a utilization of at most 1), or an owner busy with no
// allocated second (a process present is allocated time in the same window; only
// __unattributed__ is busy with none). Either means answers that left out or added series:
// Thanos or Mimir answering from part of their stores, a series missing from some answers.
// Busy time above an owner's own allocated time is no such sign: allocation is split evenly
// between the processes present, busy time by their SM shares (docs/ledger.md).
BusyCheck::BusyCheck(const CounterData& covered) {
  for (const auto& s : covered.series) covered_by_gpu_[label(s.labels, "uuid")] += sum(s.increase);
}

void BusyCheck::add(const Labels& labels, bool busy, double seconds) {
  const std::uint64_t id = series_id(labels);
  add(id, label(labels, "uuid"), busy, seconds);
  if (Owner& owner = owners_.at(id); owner.allocated <= 0 && !owner.labels) owner.labels = labels;
}

void BusyCheck::add(std::uint64_t id, const std::string& uuid, bool busy, double seconds) {
  Owner& owner = owners_[id];
  (busy ? owner.busy : owner.allocated) += seconds;
  if (busy && seconds != 0) busy_by_gpu_[uuid] += seconds;
  if (owner.allocated > 0) owner.labels.reset();
}

// Every owner is added with its labels first (its boundary values), then by id (its settled
// steps), and keeps them while nothing is allocated to it.
bool BusyCheck::unallocated(const Owner& owner) {
  return owner.labels && owner.allocated <= 0 && owner.busy > kBusyToleranceSeconds &&
         label(*owner.labels, "project") != kUnattributedProject;
}

void BusyCheck::close_owners() {
  for (const auto& [id, owner] : owners_) {
    if (unallocated(owner)) unallocated_.emplace(*owner.labels, owner.busy);
  }
  owners_.clear();
}

Result<void> BusyCheck::verify(const AnswerContext& ctx) const {
  std::map<Labels, double> unallocated = unallocated_;  // in label order: the first named is always the same
  for (const auto& [id, owner] : owners_) {
    if (BusyCheck::unallocated(owner)) unallocated.emplace(*owner.labels, owner.busy);
  }
  if (!unallocated.empty()) {
    const auto& [labels, seconds] = *unallocated.begin();
    return Error{
        1, fmt::format("{}: {} has {:.3f} busy seconds in the period and no allocated second; the "
                       "answers of {} are incomplete or inconsistent, so no report is written",
                       gpu_text(label(labels, "uuid"), ctx.node_of(labels)), owner_text(labels), seconds, ctx.url)};
  }
  for (const auto& [uuid, seconds] : busy_by_gpu_) {
    const auto it = covered_by_gpu_.find(uuid);
    const double cover = it == covered_by_gpu_.end() ? 0.0 : it->second;
    if (seconds > cover * (1 + kBusyTolerance) + kBusyToleranceSeconds) {
      return Error{1, fmt::format("{}: its owners have {:.3f} busy seconds in the period, more than the {:.3f} s "
                                  "its ledger covered; the answers of {} are incomplete or inconsistent, so no "
                                  "report is written",
                                  gpu_text(uuid, ctx.node_of_gpu(uuid)), seconds, cover, ctx.url)};
    }
  }
  return {};
}

// The agent exports an owner's four ledger counters together, in every scrape
// (render/families.cpp), so their series are present at the same points of the timeline. One
// missing where another is present was left out of an answer, and its usage with it (a series
// missing from every other answer took an owner's busy time to 0 with exit 0). A counter with
// no series at all is not compared (a store may drop one by relabelling), nor are points in
// the last two minutes before now: samples still arriving there can be seen by one request
// and not by the next.
Result<void> check_siblings(const AnswerContext& ctx, const std::array<OwnerCounter, 4>& counters) {
  std::map<std::string, std::vector<const CounterSeries*>> by_owner;  // one per counter
  for (std::size_t m = 0; m < counters.size(); ++m) {
    for (const auto& s : counters[m].data->series) {
      auto& siblings = by_owner[labels_key(s.labels)];
      siblings.resize(counters.size(), nullptr);
      siblings[m] = &s;
    }
  }
  for (const auto& [key, siblings] : by_owner) {
    const auto first = std::find_if(siblings.begin(), siblings.end(), [](auto* s) { return s; });
    const CounterSeries& seen = **first;
    const std::string_view seen_name = counters[first - siblings.begin()].name;
    for (std::size_t m = 0; m < siblings.size(); ++m) {
      if (counters[m].data->series.empty()) continue;
      for (std::size_t i = 0; i < ctx.timeline.size() && ctx.timeline[i] < ctx.now - kUnsettledSeconds; ++i) {
        if ((siblings[m] && siblings[m]->present[i]) == seen.present[i]) continue;
        return Error{1, fmt::format("{}: {}: {} has {} sample at {}, where {} has {}; the answers of {} are "
                                    "incomplete or inconsistent, so no report is written",
                                    gpu_text(label(seen.labels, "uuid"), ctx.node_of(seen.labels)),
                                    owner_text(seen.labels), counters[m].name, seen.present[i] ? "no" : "a",
                                    format_utc(ctx.timeline[i]), seen_name, seen.present[i] ? "one" : "none", ctx.url)};
      }
    }
  }
  return {};
}

// A total that is not a finite number (samples near the largest double, which add up to
// infinity, or an amount beyond it) is no bill: nothing is written.
Result<void> check_finite(const Report& report) {
  auto bad = [](const Row& row) -> std::optional<std::string> {
    const Usage& u = row.usage;
    const std::pair<const char*, double> fields[] = {
        {"allocated seconds", u.allocated_seconds},           {"busy seconds", u.busy_seconds},
        {"memory byte-seconds", u.memory_byte_seconds},       {"energy", u.energy_joules},
        {"idle allocated seconds", u.idle_allocated_seconds}, {"cost", row.cost.total()}};
    for (const auto& [name, v] : fields) {
      if (!std::isfinite(v)) return fmt::format("{} {}", name, v);
    }
    return std::nullopt;
  };
  for (const Row& row : report.rows) {
    if (auto what = bad(row)) return not_finite(report, fmt::format("the row {}", fmt::join(row.key, ", ")), *what);
  }
  if (auto what = bad(report.total)) return not_finite(report, "the total", *what);
  const auto& rec = report.reconciliation;
  if (!std::isfinite(rec.covered_seconds + rec.gap_seconds + rec.owners_seconds + rec.idle_seconds)) {
    return not_finite(report, "the ledger's covered time", fmt::format("{} s", rec.covered_seconds));
  }
  return {};
}

void reconcile(const AnswerContext& ctx, const LedgerSummary& ledger, Report& report) {
  Reconciliation& rec = report.reconciliation;
  report.timeline.capacity_seconds = ledger.capacity_seconds;
  report.timeline.capacity_seconds.resize(ctx.steps, 0.0);
  rec.covered_seconds = ledger.covered_seconds;
  rec.gap_seconds = ledger.gap_seconds;
  for (const auto& row : report.rows) {
    (row.idle ? rec.idle_seconds : row.faulty ? rec.faulty_seconds : rec.owners_seconds) += row.usage.allocated_seconds;
  }
  rec.gpu_seconds = rec.covered_seconds + rec.gap_seconds;
  rec.difference_seconds = rec.owners_seconds + rec.idle_seconds + rec.faulty_seconds - rec.covered_seconds;
  rec.ok = std::abs(rec.difference_seconds) <= 1e-6 * rec.covered_seconds + 1e-3;
  if (!rec.ok) {
    add_warning(
        report, "reconciliation",
        fmt::format("owners ({:.3f} s) plus idle ({:.3f} s) plus faulty ({:.3f} s) differ from the covered GPU time "
                    "({:.3f} s) by {:.3f} s; some ledger series are missing from {}",
                    rec.owners_seconds, rec.idle_seconds, rec.faulty_seconds, rec.covered_seconds,
                    rec.difference_seconds, ctx.url));
  }
}

namespace {

// Holes in each GPU's covered samples, between the first and the last point that has one and
// at the end; the GPUs seen go to `uuids`.
void warn_of_holes(const AnswerContext& ctx, const CounterData& covered, std::set<std::string>& uuids,
                   std::vector<Warning>& warnings) {
  for (const auto& s : covered.series) {
    const std::string uuid = label(s.labels, "uuid");
    const std::string node = ctx.node_of(s.labels);
    uuids.insert(uuid);
    std::size_t first = 0, last = 0;
    bool any = false;
    for (std::size_t i = 0; i < s.present.size(); ++i) {
      if (!s.present[i]) continue;
      if (!any) first = i;
      last = i;
      any = true;
    }
    if (!any) continue;
    std::vector<std::size_t> missing;
    for (std::size_t i = first + 1; i < s.present.size(); ++i) {
      if (!s.present[i]) missing.push_back(i);
    }
    for (auto [a, b] : runs(missing)) {
      const double from = ctx.timeline[a - 1], to = ctx.timeline[b];
      if (to - from < kMinHoleSeconds) continue;
      const bool trailing = b == ctx.steps && last < a;
      add_warning(warnings, "missing-data",
                  trailing
                      ? fmt::format("no samples of {} after {} (until the period's end at {}); usage after the last "
                                    "sample is not in this report",
                                    gpu_text(uuid, node), format_utc(from), format_utc(to))
                      : fmt::format("no samples of {} between {} and {} (scrape gap or agent down); the ledger "
                                    "counters carry across it, so nothing is lost unless a gap warning says so",
                                    gpu_text(uuid, node), format_utc(from), format_utc(to)),
                  uuid, node, from, to);
    }
  }
}

// Time a GPU's agent could not integrate, and the ledger's restarts.
void warn_of_gaps_and_resets(const AnswerContext& ctx, const CounterData& covered, const CounterData& gaps,
                             std::vector<Warning>& warnings) {
  for (const auto& s : gaps.series) {
    const std::string uuid = label(s.labels, "uuid");
    const std::string node = ctx.node_of(s.labels);
    std::vector<std::size_t> steps;
    for (std::size_t i = 1; i <= ctx.steps; ++i) {
      if (s.increase[i - 1] > 0) steps.push_back(i);
    }
    for (auto [a, b] : runs(steps)) {
      double seconds = 0;
      for (std::size_t i = a; i <= b; ++i) seconds += s.increase[i - 1];
      // The agent counts a gap when it comes back, so the step dates the gap's end.
      add_warning(
          warnings, "gap",
          fmt::format("{}: the agent came back between {} and {} from {:.0f} s it could not integrate (it, or the "
                      "GPU, was down longer than the driver's sample buffer); that time is in no owner's total",
                      gpu_text(uuid, node), format_utc(ctx.timeline[a - 1]), format_utc(ctx.timeline[b]), seconds),
          uuid, node, ctx.timeline[a - 1], ctx.timeline[b]);
    }
  }
  for (const auto& r : covered.resets) {
    const std::string uuid = label(r.labels, "uuid");
    const std::string node = ctx.node_of(r.labels);
    add_warning(
        warnings, "reset",
        fmt::format("the ledger counters of {} restarted from zero between {} and {} (the agent restarted without "
                    "its state file); usage on both sides of the reset is counted",
                    gpu_text(uuid, node), format_utc(r.after), format_utc(r.at)),
        uuid, node, r.after, r.at);
  }
}

}  // namespace

LedgerSummary summarize_ledger(const AnswerContext& ctx, const CounterData& covered, const CounterData& gaps) {
  LedgerSummary out;
  out.capacity_seconds.assign(ctx.steps, 0.0);
  for (const auto& s : covered.series) {
    for (std::size_t i = 0; i < ctx.steps; ++i) {
      out.covered_seconds += s.increase[i];
      out.capacity_seconds[i] += s.increase[i];
    }
  }
  for (const auto& s : gaps.series) {
    for (double x : s.increase) out.gap_seconds += x;
  }
  warn_of_holes(ctx, covered, out.uuids, out.warnings);
  warn_of_gaps_and_resets(ctx, covered, gaps, out.warnings);
  return out;
}

void warn_about_data(const AnswerContext& ctx, const LedgerSummary& ledger, Report& report) {
  report.warnings.insert(report.warnings.end(), ledger.warnings.begin(), ledger.warnings.end());
  for (const auto& [uuid, id] : ctx.gpus) {
    if (ledger.uuids.count(uuid)) continue;
    add_warning(
        report, "missing-series",
        fmt::format("{} ({}) reported gpu_info in the period but no ledger series; its usage is not in this report",
                    gpu_text(uuid, id.node), id.model),
        uuid, id.node);
  }
  if (report.to > ctx.now - 60) {
    add_warning(report, "backend",
                fmt::format("the period ends less than a minute before now; samples not yet scraped{} are not "
                            "in this report",
                            report.backend == "VictoriaMetrics" ? " (and VictoriaMetrics hides the last 30 s by "
                                                                  "default, -search.latencyOffset)"
                                                                : ""));
  }
}

}  // namespace gpumeter::report
