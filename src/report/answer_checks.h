#pragma once
// What the query API's answers must satisfy before a report is written, and what the report
// warns about them. The ledger's counters are exact and written in a known shape (all four owner
// counters together, busy time within covered time, finite values), so answers that break the
// shape were cut short or altered on the way (a partial answer of Thanos or Mimir, a series
// missing from some answers): the report then fails rather than bill from them.

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "report/counter_reader.h"
#include "report/report_model.h"
#include "util/result.h"

namespace gpumeter::report {

inline constexpr std::string_view kIdleProject = "__idle__";
inline constexpr std::string_view kUnattributedProject = "__unattributed__";

struct GpuIdentity {
  std::string model;
  std::string node;
  int mig_slices = 0;  // gpu_mig_slices: the GPU's compute slices in MIG mode; 0 when unknown
};

// What the checks need of the report being built.
struct AnswerContext {
  std::string url;                      // the query API, for messages
  double now = 0;                       // unix seconds
  const std::vector<double>& timeline;  // the step boundaries
  std::size_t steps = 0;
  std::function<std::string(const Labels&)> node_of;  // a series' node, for messages
  std::function<std::string(const std::string&)> node_of_gpu;
  const std::map<std::string, GpuIdentity>& gpus;  // by uuid, from gpu_info
};

// One owner counter's name and its data.
struct OwnerCounter {
  std::string_view name;
  const CounterData* data;
};

// A GPU busy longer than it was covered, or an owner busy with no allocated second, over the
// period's increases as they are read: a batch of GPUs at a time, then the settled steps. It
// keeps two numbers per owner series (and its labels only while nothing is allocated to
// it), and one per GPU.
class BusyCheck {
 public:
  explicit BusyCheck(const CounterData& covered);
  // An increase of an owner's allocated (busy = false) or busy seconds; labels without replica labels.
  void add(const Labels& labels, bool busy, double seconds);
  // ... of the owner series_id(labels) on GPU `uuid`, whose labels were given before.
  void add(std::uint64_t owner, const std::string& uuid, bool busy, double seconds);
  // Judges the owners added so far, whose counters are all read (no step of theirs left to
  // settle), and drops them: what is kept then grows with the GPUs, not with their owners.
  void close_owners();
  Result<void> verify(const AnswerContext& ctx) const;

 private:
  struct Owner {
    double allocated = 0, busy = 0;
    std::optional<Labels> labels;  // kept while it has no allocated second, for the message
  };
  // Busy with no allocated second (the unattributed line aside): an owner the answers lost.
  static bool unallocated(const Owner& owner);
  std::map<std::string, double> covered_by_gpu_, busy_by_gpu_;
  std::unordered_map<std::uint64_t, Owner> owners_;
  std::map<Labels, double> unallocated_;  // of the closed owners, in label order
};
// An owner counter missing where the owner's others are present (allocated, busy, memory, energy).
Result<void> check_siblings(const AnswerContext& ctx, const std::array<OwnerCounter, 4>& counters);
// A total, a row or the reconciliation that is not a finite number.
Result<void> check_finite(const Report& report);

// What the report keeps of the ledger's covered and gap seconds once they are read: the fleet's
// capacity per step, the totals, the GPUs seen and the warnings they give. The per-GPU
// timelines are then dropped before the owners are read, so what stays of each GPU is its uuid
// and its warnings (docs/report-accuracy.md#scaling).
struct LedgerSummary {
  std::vector<double> capacity_seconds;  // covered seconds per step, all GPUs
  double covered_seconds = 0, gap_seconds = 0;
  std::set<std::string> uuids;    // GPUs with a covered series
  std::vector<Warning> warnings;  // holes in the samples, ledger gaps and resets, in that order
};
LedgerSummary summarize_ledger(const AnswerContext& ctx, const CounterData& covered, const CounterData& gaps);

// The reconciliation of covered time with the owners' and idle allocated time, and the step
// capacities; a warning when they differ.
void reconcile(const AnswerContext& ctx, const LedgerSummary& ledger, Report& report);
// Warnings about holes in the samples, ledger gaps, ledger resets, GPUs with no ledger series
// and a period that ends too close to now.
void warn_about_data(const AnswerContext& ctx, const LedgerSummary& ledger, Report& report);

// Helpers of the report module.
void add_warning(std::vector<Warning>& warnings, std::string kind, std::string message, std::string gpu = {},
                 std::string node = {}, double from = 0, double to = 0);
void add_warning(Report& report, std::string kind, std::string message, std::string gpu = {}, std::string node = {},
                 double from = 0, double to = 0);
std::string label(const Labels& labels, std::string_view name);
double sum(const std::vector<double>& v);

}  // namespace gpumeter::report
