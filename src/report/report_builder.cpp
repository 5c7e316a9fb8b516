#include "report/report_builder.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <future>
#include <mutex>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "report/answer_checks.h"
#include "report/counter_reader.h"
#include "report/forecast.h"
#include "report/pricer.h"
#include "report/time_spec.h"

namespace gpumeter::report {
namespace {

constexpr std::string_view kCovered = "gpumeter_ledger_covered_seconds_total";
constexpr std::string_view kGap = "gpumeter_ledger_gap_seconds_total";
constexpr double kSecondsPerMonth = 30.4375 * 86400;  // a mean Gregorian month
constexpr std::size_t kParallelReads = 2;
// GPUs whose owner counters are read together: 64 over a month's 241 points, so a batch's
// series stay a few MiB; more over fewer points, up to the most one query may name, so a short
// period takes few requests.
constexpr std::size_t kGpuPointsPerBatch = 64 * 256;
constexpr std::size_t kMinGpusPerBatch = 64, kMaxGpusPerBatch = kMaxUuidsPerQuery;

enum Field { kAllocated, kBusy, kMemory, kEnergy, kIdleAllocated, kIdleEnergy };

// The most one series can count per second, which tells a counter's restart from zero from a
// decrease no ledger makes (counter_reader.h): a second of one GPU per second for time; for
// memory and energy, bounds far above any GPU (8 TiB, 100 kW), which still tell a dip in a
// counter of more than about ten minutes' use from a restart.
constexpr double kSecondsPerSecond = 1;
constexpr double kMaxMemoryBytes = 8.0 * (1ULL << 40);
constexpr double kMaxPowerWatts = 1e5;

struct LedgerMetric {
  std::string_view name;
  Field field;
  double max_rate;
  bool footprint_only = false;  // read only when the pricing file has sites
};
constexpr std::array<LedgerMetric, 6> kLedgerMetrics = {{
    {"gpu_allocated_seconds_total", kAllocated, kSecondsPerSecond},
    {"gpu_busy_seconds_total", kBusy, kSecondsPerSecond},
    {"gpu_memory_byte_seconds_total", kMemory, kMaxMemoryBytes},
    {"gpu_attributed_energy_joules_total", kEnergy, kMaxPowerWatts},
    // Only under the scheduler allocation policy; no series is a zero, not an error.
    {"gpu_idle_allocated_seconds_total", kIdleAllocated, kSecondsPerSecond},
    // Only on GPUs whose model has an idle power; with the energy footprint, which shows it.
    {"gpu_attributed_idle_energy_joules_total", kIdleEnergy, kMaxPowerWatts, true},
}};

static_assert(kLedgerMetrics[kAllocated].field == kAllocated && kLedgerMetrics[kBusy].field == kBusy &&
                  kLedgerMetrics[kMemory].field == kMemory && kLedgerMetrics[kEnergy].field == kEnergy,
              "a metric's read result is found by its field");

// 0 for owners, 1 for idle time, 2 for busy time no process accounts for, 3 for time on faulty
// GPUs kept out of the owners' charges.
int reserved_kind(std::string_view project) {
  return project == kIdleProject ? 1 : project == kUnattributedProject ? 2 : project == kFaultyProject ? 3 : 0;
}

double& field(Usage& u, Field f) {
  switch (f) {
    case kAllocated:
      return u.allocated_seconds;
    case kBusy:
      return u.busy_seconds;
    case kMemory:
      return u.memory_byte_seconds;
    case kEnergy:
      return u.energy_joules;
    case kIdleAllocated:
      return u.idle_allocated_seconds;
    case kIdleEnergy:
      return u.idle_energy_joules;
  }
  return u.allocated_seconds;
}

struct RowAcc {
  Row row;
  std::vector<double> step_values;                        // cost (or allocated seconds) per step
  std::vector<double> allocated_steps;                    // allocated seconds per step, for the forecast
  std::map<std::string, double> cost_by_node;             // own cost, for spreading idle cost
  std::map<std::string, std::vector<double>> node_steps;  // idle rows: cost per node per step
};

class Builder {
 public:
  Builder(PromApi& api, const ReportRequest& req, std::function<void(std::string_view)> progress)
      : api_(api), req_(req), progress_(std::move(progress)) {}

  Result<Report> build() {
    report_.url = req_.url;
    report_.from = req_.from;
    report_.to = req_.to;
    report_.step_seconds = req_.step;
    report_.by = req_.by;
    report_.backend = api_.backend();
    if (req_.pricing) {
      report_.priced = true;
      report_.currency = req_.pricing->currency;
      report_.pricing_source = req_.pricing->source;
      report_.billing = req_.pricing->billing;
      report_.footprint = !req_.pricing->sites.empty();
      report_.idle_policy = std::string(pricing::to_string(req_.pricing->idle_policy));
      report_.faulty_policy = std::string(pricing::to_string(req_.pricing->faulty_policy));
      exclude_faulty_ = req_.pricing->faulty_policy == pricing::FaultyPolicy::kExclude;
    }
    std::vector<double> changes;
    if (req_.pricing) changes = req_.pricing->change_points(req_.from, req_.to);
    auto remote = choose_remote_read();
    if (!remote) return remote.error();
    remote_ = *remote;
    if (remote_) report_.backend += " (remote read)";
    CounterReader reader(api_, make_timeline(req_.from, req_.to, req_.step, changes), req_.step, req_.lookback,
                         progress_);
    if (remote_) reader.use_remote_read();
    timeline_ = reader.timeline();
    steps_ = reader.steps();
    if (req_.pricing) pricer_.emplace(*req_.pricing, timeline_);
    // An owner pruned after its retention and back from zero restarts its four counters at
    // once, and can pass its old total before the next step: the boundary values cannot show
    // it, resets() over the allocated seconds can, series by series. Over every owner series
    // of the period it is the server's longest evaluation, so it runs on a connection of its
    // own while the per-GPU counters are read.
    const auto lanes = connections();
    auto owner_flags_read = [this](PromApi& api) { return reader_on(api).reset_steps(kLedgerMetrics[0].name, true); };
    std::future<Result<StepFlags>> owner_flags_ahead;
    if (lanes.front() != &api_) {
      owner_flags_ahead = std::async(std::launch::async, owner_flags_read, std::ref(*lanes.front()));
    }

    auto flags = reader.reset_steps(kCovered);
    if (!flags) return flags.error();
    auto covered = reader.read(kCovered, *flags);
    if (!covered) return covered.error();
    replica_ = preferred_replica(*covered, req_.replica_labels);
    merge_replicas(*covered);
    if (covered->series.empty()) {
      return Error{1, fmt::format("{} has no gpumeter ledger data between {} and {}: no series of {} (is this "
                                  "the server that scrapes the gpumeter agents, and is the period right?)",
                                  req_.url, format_utc(req_.from), format_utc(req_.to), kCovered)};
    }
    // A GPU whose ledger restarted from zero: every one of its series is re-read around it.
    for (const auto& r : covered->resets) flag_span(*flags, label(r.labels, "uuid"), r.after, r.at);
    auto gaps = reader.read(kGap, *flags, kSecondsPerSecond);  // the ledger's restarts are all it needs
    if (!gaps) return gaps.error();
    merge_replicas(*gaps);
    auto owner_flags = owner_flags_ahead.valid() ? owner_flags_ahead.get() : owner_flags_read(api_);
    if (!owner_flags) return owner_flags.error();

    if (auto ok = read_identities(); !ok) return ok.error();
    const AnswerContext ctx{req_.url,
                            req_.now,
                            timeline_,
                            steps_,
                            [this](const Labels& l) { return node_of(l); },
                            [this](const std::string& uuid) { return node_of_gpu(uuid); },
                            gpus_};
    BusyCheck busy(*covered);
    const LedgerSummary ledger = summarize_ledger(ctx, *covered, *gaps);
    // Their per-GPU timelines are not needed past here: dropped before the owners are read.
    *covered = CounterData{};
    *gaps = CounterData{};
    if (auto ok = read_owners(ctx, *flags, *owner_flags, busy); !ok) return ok.error();
    // Answers that disagree show in the raw samples too; the siblings' finding names them better.
    if (auto ok = settle_owners(busy); !ok) return siblings_error_ ? *siblings_error_ : ok.error();
    warn_about_replicas();

    if (pricer_ && pricer_->missing()) return pricer_->missing_price_error();
    if (req_.pricing && req_.pricing->idle_policy != pricing::IdlePolicy::kSeparate) spread_idle();
    finish_rows();
    reconcile(ctx, ledger, report_);
    if (auto ok = check_finite(report_); !ok) return ok.error();
    if (auto ok = busy.verify(ctx); !ok) return ok.error();
    if (siblings_error_) return *siblings_error_;
    warn_about_data(ctx, ledger, report_);
    report_.queries = api_.requests();
    return std::move(report_);
  }

 private:
  using OwnerData = std::array<CounterData, kLedgerMetrics.size()>;

  // The owners' counters, a batch of GPUs at a time: each batch's boundary values are read,
  // checked and added to the report's rows, then dropped, so the report's memory grows with its
  // rows and one batch's series, not with the fleet's (docs/report-accuracy.md#performance).
  // The steps that need raw samples are kept as pending, a few numbers each, and read for the
  // whole fleet at the end (settle_owners). Batches are read kParallelReads at a time, each on a
  // connection of its own, so the server evaluates one while this parses another; they are
  // added up in order, so the sums do not depend on which finished first. One at a time when
  // the API cannot open more connections.
  Result<void> read_owners(const AnswerContext& ctx, const StepFlags& flags, const StepFlags& series_flags,
                           BusyCheck& busy) {
    std::vector<std::string> names;
    for (const auto& m : kLedgerMetrics) names.emplace_back(m.name);
    auto uuids = api_.label_values("uuid", names, req_.from - req_.step, req_.to);
    if (!uuids) return uuids.error();
    const auto lanes = connections();
    const std::size_t per_batch = std::clamp(kGpuPointsPerBatch / timeline_.size(), kMinGpusPerBatch, kMaxGpusPerBatch);
    const std::size_t batches = (uuids->size() + per_batch - 1) / per_batch;
    auto gpus_of = [&](std::size_t b) {
      const std::size_t begin = b * per_batch, end = std::min(uuids->size(), begin + per_batch);
      return std::vector<std::string>(uuids->begin() + static_cast<std::ptrdiff_t>(begin),
                                      uuids->begin() + static_cast<std::ptrdiff_t>(end));
    };
    // Each lane takes the next batch; at most two per lane wait to be added, in order.
    std::vector<std::optional<Result<OwnerData>>> slots(batches);
    std::mutex mutex;
    std::condition_variable changed;
    std::size_t next = 0, added = 0;
    bool stop = false;
    std::vector<std::future<void>> workers;
    for (PromApi* api : lanes) {
      workers.push_back(std::async(std::launch::async, [&, api] {
        for (;;) {
          std::size_t b = 0;
          {
            std::unique_lock lock(mutex);
            changed.wait(lock, [&] { return stop || next >= batches || next < added + 2 * lanes.size(); });
            if (stop || next >= batches) return;
            b = next++;
          }
          auto batch = read_batch(*api, gpus_of(b), flags, series_flags);
          std::lock_guard lock(mutex);
          slots[b].emplace(std::move(batch));
          changed.notify_all();
        }
      }));
    }
    auto finish = [&](Result<void> outcome) {
      {
        std::lock_guard lock(mutex);
        stop = true;
      }
      changed.notify_all();
      for (auto& w : workers) w.get();
      return outcome;
    };
    for (std::size_t b = 0; b < batches; ++b) {
      Result<OwnerData> batch = Error{};
      {
        std::unique_lock lock(mutex);
        changed.wait(lock, [&] { return slots[b].has_value(); });
        batch = std::move(*slots[b]);
        slots[b].reset();
      }
      if (!batch) return finish(batch.error());
      if (auto ok = add_batch(ctx, *batch, busy); !ok) return finish(ok.error());
      // By remote read nothing is left to settle: the batch's owners are judged and dropped.
      if (remote_) busy.close_owners();
      {
        std::lock_guard lock(mutex);
        added = b + 1;
      }
      changed.notify_all();
      if (progress_) {
        progress_(fmt::format("owners' counters of {} of {} GPUs read", std::min(uuids->size(), (b + 1) * per_batch),
                              uuids->size()));
      }
    }
    return finish({});
  }

  // Connections of their own for parallel reads; the API itself where it cannot open more.
  std::vector<PromApi*> connections() {
    while (own_.size() < kParallelReads) {
      auto c = api_.another();
      if (!c) break;
      own_.push_back(std::move(c));
    }
    std::vector<PromApi*> lanes;
    for (auto& c : own_) lanes.push_back(c.get());
    if (lanes.empty()) lanes.push_back(&api_);
    return lanes;
  }

  // Whether raw samples come by remote read: when asked for, or (auto) where the store answers
  // it; VictoriaMetrics has none, and is not asked. The probe reads the covered seconds of the
  // period's last second; a server that answers it otherwise (an HTTP error, another Content-
  // Type) has none, and one that does not answer at all fails the report here.
  Result<bool> choose_remote_read() {
    if (req_.read == ReadApi::kQuery) return false;
    if (req_.read == ReadApi::kAuto && report_.backend == "VictoriaMetrics") return false;
    auto probe = api_.read_raw(kCovered, {}, req_.to - 1, req_.to, [](Series&&) -> Result<void> { return {}; });
    if (probe) return true;
    // Unreachable, too slow, or a bad answer: the query API would fare no better.
    if (probe.error().code != PromApi::kNoRemoteRead) return Error{1, probe.error().message};
    if (req_.read == ReadApi::kRemoteRead) return Error{1, probe.error().message + " (--read remote)"};
    if (progress_) {
      progress_(fmt::format("no remote read here ({}); reading through the query API", probe.error().message));
    }
    return false;
  }

  // A reader of the period's timeline on `api`, reading as chosen.
  CounterReader reader_on(PromApi& api) const {
    CounterReader reader(api, timeline_, req_.step, req_.lookback);
    if (remote_) reader.use_remote_read();
    return reader;
  }

  // The owner counters of the GPUs `uuids`.
  Result<OwnerData> read_batch(PromApi& api, const std::vector<std::string>& uuids, const StepFlags& flags,
                               const StepFlags& series_flags) const {
    CounterReader reader = reader_on(api);
    OwnerData out;
    for (const auto& m : kLedgerMetrics) {
      if (m.footprint_only && !report_.footprint) continue;
      auto r = reader.read_gpus(m.name, uuids, flags, series_flags, m.max_rate);
      if (!r) return r.error();
      out[m.field] = std::move(*r);
    }
    return out;
  }

  Result<void> add_batch(const AnswerContext& ctx, OwnerData& data, BusyCheck& busy) {
    for (auto& d : data) merge_replicas(d);
    std::array<OwnerCounter, 4> owner_counters;
    for (Field f : {kAllocated, kBusy, kMemory, kEnergy}) owner_counters[f] = {kLedgerMetrics[f].name, &data[f]};
    // Named after the busy check's finding, which says more about what is wrong.
    if (auto ok = check_siblings(ctx, owner_counters); !ok && !siblings_error_) siblings_error_ = ok.error();
    for (std::size_t m = 0; m < kLedgerMetrics.size(); ++m) {
      const Field f = kLedgerMetrics[m].field;
      std::set<std::uint64_t> owners_pending;
      for (const auto& p : data[m].pending) owners_pending.insert(p.owner);
      for (const auto& s : data[m].series) {
        SeriesRow row = row_of(s.labels);
        double total = 0;
        for (std::size_t k = 0; k < s.increase.size(); ++k) {
          add_increase(row, f, s.first + k + 1, s.increase[k]);
          total += s.increase[k];
        }
        if (f == kAllocated || f == kBusy) busy.add(s.labels, f == kBusy, total);
        // What its settled steps are added to, without its labels.
        if (const auto id = series_id(s.labels); owners_pending.count(id)) pending_rows_.try_emplace(id, row);
      }
      auto& pending = pending_[m];
      pending.insert(pending.end(), std::make_move_iterator(data[m].pending.begin()),
                     std::make_move_iterator(data[m].pending.end()));
    }
    return {};
  }

  // The pending steps of each owner counter, for the whole fleet: each counter's steps shared
  // between the connections, and added up in the counters' order and each counter's step
  // order, so the sums do not depend on how the work was shared.
  Result<void> settle_owners(BusyCheck& busy) {
    const auto lanes = connections();
    for (std::size_t m = 0; m < kLedgerMetrics.size(); ++m) {
      if (pending_[m].empty()) continue;
      std::vector<std::future<Result<std::vector<SettledStep>>>> parts;
      for (std::size_t lane = 0; lane < lanes.size(); ++lane) {
        parts.push_back(std::async(std::launch::async, [this, m, lane, n = lanes.size(), api = lanes[lane]] {
          return reader_on(*api).settle(kLedgerMetrics[m].name, pending_[m], kLedgerMetrics[m].max_rate, lane, n);
        }));
      }
      std::vector<SettledStep> steps;
      std::optional<Error> failed;
      for (auto& part : parts) {
        auto r = part.get();
        if (!r && !failed) failed = r.error();
        if (r) steps.insert(steps.end(), r->begin(), r->end());
      }
      if (failed) return *failed;
      std::stable_sort(steps.begin(), steps.end(),
                       [](const SettledStep& a, const SettledStep& b) { return a.step < b.step; });
      if (progress_) progress_(fmt::format("{}: {} steps read raw", kLedgerMetrics[m].name, steps.size()));
      const Field f = kLedgerMetrics[m].field;
      for (const auto& step : steps) {
        const SeriesRow& row = pending_rows_.at(step.owner);
        add_increase(row, f, step.step, step.increase);
        if (f == kAllocated || f == kBusy) busy.add(step.owner, row.uuid, f == kBusy, step.increase);
      }
      pending_[m].clear();
    }
    pending_rows_.clear();
    return {};
  }

  // One replica's series of each counter, where the store holds an HA pair's copies.
  void merge_replicas(CounterData& data) {
    const ReplicaMerge m = keep_one_replica(data, req_.replica_labels, replica_);
    replicas_.replicas = std::max(replicas_.replicas, m.replicas);
    replicas_.dropped += m.dropped;
  }

  void warn_about_replicas() {
    if (replicas_.replicas < 2) return;
    std::string names;
    for (const auto& n : req_.replica_labels) names += (names.empty() ? "" : ", ") + n;
    add_warning(report_, "replica",
                fmt::format("the store holds {} copies of the ledger's series, one per Prometheus replica (label {}): "
                            "they are billed from one replica, the one with the most data in the period, and {} "
                            "series of the others are left out (a store that de-duplicates on the label, or drops it "
                            "on ingestion, keeps one copy)",
                            replicas_.replicas, names, replicas_.dropped));
  }

  void flag_span(StepFlags& flags, const std::string& uuid, double after, double at) {
    for (std::size_t i = 1; i < timeline_.size(); ++i) {
      if (timeline_[i] >= after && timeline_[i - 1] < at) flags[uuid].insert(i);
    }
  }

  Result<void> read_identities() {
    auto infos = api_.series("gpu_info", req_.from, req_.to);
    if (!infos) return infos.error();
    for (const auto& l : *infos) {
      auto uuid = label(l, "uuid");
      if (uuid.empty()) continue;
      gpus_[uuid] = GpuIdentity{label(l, "model"), label(l, req_.node_label)};
    }
    if (req_.pricing && !req_.pricing->mig_profiles.empty()) return read_mig_slices();
    return {};
  }

  // Each GPU's compute slices, which convert a profile's price per instance-hour: the last
  // gpu_mig_slices in the period, in one query (a GPU's slices never change; a GPU without
  // the series is priced as having 7).
  Result<void> read_mig_slices() {
    auto answer =
        api_.query(fmt::format("last_over_time(gpu_mig_slices[{}])", promql_range(req_.to - req_.from)), req_.to);
    if (!answer) return answer.error();
    for (const auto& s : *answer) {
      auto gpu = gpus_.find(label(s.labels, "uuid"));
      if (gpu == gpus_.end() || s.samples.empty()) continue;
      gpu->second.mig_slices = static_cast<int>(std::lround(s.samples.back().v));
    }
    return {};
  }

  // The row of a series of `project` (its own, or a reserved row's).
  std::vector<std::string> row_key(const Labels& labels, const std::string& project, const std::string& uuid,
                                   const std::string& node) {
    const bool reserved = reserved_kind(project) != 0;
    std::vector<std::string> key;
    for (const auto& dim : req_.by) {
      if (dim == "mig_profile") {
        // Not an owner: idle slices keep their profile, and "" is a whole GPU.
        key.push_back(label(labels, "mig_profile"));
      } else if (dim == "model") {
        auto it = gpus_.find(uuid);
        key.push_back(it == gpus_.end() || it->second.model.empty() ? "unknown" : it->second.model);
      } else if (dim == "gpu") {
        key.push_back(uuid);
      } else if (dim == "node") {
        key.push_back(node);
      } else if (dim == "cluster") {  // not an owner: idle time keeps its cluster
        key.push_back(label(labels, "cluster"));
      } else {
        key.push_back(reserved ? project : label(labels, dim));
      }
    }
    return key;
  }

  // What a series' increases are added to: its row and what prices it.
  struct SeriesRow {
    RowAcc* acc;
    std::string uuid, node, model, mig_profile;
    int mig_slices = 0;
    std::string site;  // its cluster label
  };

  SeriesRow row_of(const Labels& labels) {
    SeriesRow out{nullptr, label(labels, "uuid"),   node_of(labels), "", label(labels, "mig_profile"),
                  0,       label(labels, "cluster")};
    if (auto gi = gpus_.find(out.uuid); gi != gpus_.end()) {
      out.model = gi->second.model;
      out.mig_slices = gi->second.mig_slices;
    }
    // Time on a faulty GPU, idle or not, is a row of its own when it is kept out of the charges.
    const std::string project =
        exclude_faulty_ && !label(labels, "fault").empty() ? std::string(kFaultyProject) : label(labels, "project");
    auto key = row_key(labels, project, out.uuid, out.node);
    // Idle, unattributed and faulty time stay rows of their own whatever the grouping.
    auto [it, inserted] = rows_.try_emplace(std::pair(key, reserved_kind(project)));
    RowAcc& acc = it->second;
    if (inserted) {
      acc.row.key = key;
      acc.row.idle = project == kIdleProject;
      acc.row.unattributed = project == kUnattributedProject;
      acc.row.faulty = project == kFaultyProject;
      acc.step_values.assign(steps_, 0.0);
      acc.allocated_steps.assign(steps_, 0.0);
    }
    if (acc.row.idle) idle_steps_.resize(steps_, 0.0);
    out.acc = &acc;
    return out;
  }

  // The increase `x` of field `f` in step i (1..N) of a series of `row`.
  void add_increase(const SeriesRow& series, Field f, std::size_t i, double x) {
    if (x == 0) return;
    RowAcc& acc = *series.acc;
    field(acc.row.usage, f) += x;
    if (f == kAllocated && !series.mig_profile.empty()) {
      acc.row.usage.mig_allocated_seconds += x;
      acc.row.mig_profiles.insert(series.mig_profile);
    }
    if (f == kBusy && !series.mig_profile.empty()) acc.row.usage.mig_sm_active_seconds += x;
    if (f == kAllocated) acc.allocated_steps[i - 1] += x;
    if (f == kAllocated && acc.row.idle) idle_steps_[i - 1] += x;
    if (!req_.pricing) {
      if (f == kAllocated) acc.step_values[i - 1] += x;
      return;
    }
    double cost = 0;
    if (f == kEnergy) {
      cost = pricer_->energy(i, x);
      acc.row.cost.energy += cost;
      if (report_.footprint) {
        if (auto site = pricer_->site(series.site, i)) {
          acc.row.usage.facility_energy_joules += x * site->pue;
          acc.row.usage.co2e_kg += x / 3.6e6 * site->pue * site->gco2e_per_kwh / 1000;
        }
      }
    } else if (f == kAllocated || f == kBusy) {
      auto priced = f == kAllocated
                        ? pricer_->allocation(series.model, series.mig_profile, series.mig_slices, series.uuid, i, x)
                        : pricer_->utilization(series.model, series.uuid, i, x);
      if (!priced) return;
      cost = *priced;
      (f == kAllocated ? acc.row.cost.allocation : acc.row.cost.utilization) += cost;
    }
    acc.step_values[i - 1] += cost;
    acc.cost_by_node[series.node] += cost;
    if (acc.row.idle) {
      auto& ns = acc.node_steps[series.node];
      ns.resize(steps_, 0.0);
      ns[i - 1] += cost;
    }
  }

  // Moves idle cost onto the owners of the same node or pool, in proportion to their own cost
  // there. Idle time stays visible as usage of the __idle__ row.
  void spread_idle() {
    const bool by_pool = req_.pricing->idle_policy == pricing::IdlePolicy::kSpreadByPool;
    auto bucket_of = [&](const std::string& node) -> std::optional<std::string> {
      if (!by_pool) return node;
      return req_.pricing->pool_for(node);
    };
    // Idle cost per bucket (per step), and owners' own cost per bucket.
    std::map<std::string, std::vector<double>> idle_by_bucket;
    std::map<std::string, std::vector<std::string>> idle_nodes;
    std::set<std::string> unpooled;
    for (auto& [key, acc] : rows_) {
      if (!acc.row.idle) continue;
      for (auto& [node, steps] : acc.node_steps) {
        auto b = bucket_of(node);
        if (!b) {
          unpooled.insert(node);
          continue;
        }
        auto& v = idle_by_bucket[*b];
        v.resize(steps_, 0.0);
        for (std::size_t i = 0; i < steps_; ++i) v[i] += steps[i];
        idle_nodes[*b].push_back(node);
      }
    }
    std::map<std::string, double> owners_cost;
    for (auto& [key, acc] : rows_) {
      if (acc.row.idle || acc.row.unattributed || acc.row.faulty) continue;
      for (auto& [node, c] : acc.cost_by_node) {
        if (auto b = bucket_of(node)) owners_cost[*b] += c;
      }
    }
    for (auto& [bucket, idle_steps] : idle_by_bucket) {
      const double owners = owners_cost[bucket];
      double idle_total = 0;
      for (double c : idle_steps) idle_total += c;
      if (idle_total == 0) continue;
      if (owners <= 0) {
        add_warning(report_, "pricing",
                    fmt::format("idle cost of {} {} ({:.2f} {}) has no owners to be spread over; it stays on "
                                "the {} line",
                                by_pool ? "pool" : "node", bucket, idle_total, report_.currency, kIdleProject));
        continue;
      }
      for (auto& [key, acc] : rows_) {
        if (acc.row.idle || acc.row.unattributed || acc.row.faulty) continue;
        double own = 0;
        for (auto& [node, c] : acc.cost_by_node) {
          if (bucket_of(node) == bucket) own += c;
        }
        if (own == 0) continue;
        const double share = own / owners;
        acc.row.cost.idle += share * idle_total;
        for (std::size_t i = 0; i < steps_; ++i) acc.step_values[i] += share * idle_steps[i];
      }
      // Taken off the idle rows of those nodes.
      std::set<std::string> nodes(idle_nodes[bucket].begin(), idle_nodes[bucket].end());
      for (auto& [key, acc] : rows_) {
        if (!acc.row.idle) continue;
        for (const auto& node : nodes) {
          auto ns = acc.node_steps.find(node);
          if (ns == acc.node_steps.end()) continue;
          for (std::size_t i = 0; i < steps_; ++i) acc.step_values[i] -= ns->second[i];
          acc.node_steps.erase(ns);
        }
        // What remains is the cost of nodes whose idle time could not be spread.
        acc.row.cost = Cost{};
        for (auto& [node, steps] : acc.node_steps) {
          for (double c : steps) acc.row.cost.allocation += c;
        }
      }
    }
    if (!unpooled.empty()) {
      std::string list;
      for (const auto& n : unpooled) list += (list.empty() ? "" : ", ") + n;
      add_warning(report_, "pricing",
                  fmt::format("nodes {} match no pool in {}; their idle cost stays on the {} line", list,
                              req_.pricing->source, kIdleProject));
    }
  }

  std::optional<RowForecast> forecast(const Row& row, const std::vector<double>& allocated_steps) const {
    return row_forecast(timeline_, allocated_steps, req_.forecast, report_.priced, row);
  }

  void finish_rows() {
    const bool by_project_only = req_.by.size() == 1 && req_.by[0] == "project";
    std::vector<double> owner_steps(steps_, 0.0);
    for (auto& [key, acc] : rows_) {
      if (req_.forecast > 0 && !acc.row.idle && !acc.row.unattributed && !acc.row.faulty) {
        acc.row.forecast = forecast(acc.row, acc.allocated_steps);
        for (std::size_t i = 0; i < steps_ && i < acc.allocated_steps.size(); ++i)
          owner_steps[i] += acc.allocated_steps[i];
      }
      if (req_.pricing && by_project_only) {
        auto b = req_.pricing->budgets.find(key.first[0]);
        if (b != req_.pricing->budgets.end()) {
          Budget budget;
          budget.monthly = b->second;
          budget.for_period = b->second * (req_.to - req_.from) / kSecondsPerMonth;
          budget.used_ratio = budget.for_period > 0 ? acc.row.cost.total() / budget.for_period : 0;
          acc.row.budget = budget;
        }
      }
      report_.total.usage += acc.row.usage;
      report_.total.cost += acc.row.cost;
      report_.rows.push_back(acc.row);
      report_.timeline.row_values.push_back(acc.step_values);
    }
    // Most expensive (or most used) first; equal rows by key, so output is stable.
    std::vector<std::size_t> order(report_.rows.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    const bool priced = report_.priced;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      const Row& x = report_.rows[a];
      const Row& y = report_.rows[b];
      double vx = priced ? x.cost.total() : x.usage.allocated_seconds;
      double vy = priced ? y.cost.total() : y.usage.allocated_seconds;
      if (vx != vy) return vx > vy;
      return x.key < y.key;
    });
    std::vector<Row> rows;
    std::vector<std::vector<double>> values;
    for (std::size_t i : order) {
      rows.push_back(std::move(report_.rows[i]));
      values.push_back(std::move(report_.timeline.row_values[i]));
    }
    report_.rows = std::move(rows);
    report_.timeline.row_values = std::move(values);
    for (std::size_t i = 1; i <= steps_; ++i) {
      report_.timeline.starts.push_back(timeline_[i - 1]);
      report_.timeline.ends.push_back(timeline_[i]);
    }
    idle_steps_.resize(steps_, 0.0);
    report_.timeline.idle_seconds = idle_steps_;
    if (req_.forecast > 0) {
      report_.forecast_seconds = req_.forecast;
      // The owners' demand; idle time is not demand. Priced at the owners' mean cost per GPU-hour.
      Row owners;
      for (const Row& row : report_.rows) {
        if (row.idle || row.unattributed || row.faulty) continue;
        owners.usage += row.usage;
        owners.cost += row.cost;
      }
      report_.total.forecast = forecast(owners, owner_steps);
    }
  }

  std::string node_of(const Labels& labels) const {
    std::string node = label(labels, req_.node_label);
    return node.empty() ? node_of_gpu(label(labels, "uuid")) : node;
  }

  std::string node_of_gpu(const std::string& uuid) const {
    auto it = gpus_.find(uuid);
    return it == gpus_.end() ? std::string() : it->second.node;
  }

  PromApi& api_;
  const ReportRequest& req_;
  std::function<void(std::string_view)> progress_;
  Report report_;
  ReplicaMerge replicas_;
  Labels replica_;  // the replica billed, where the store holds several
  std::vector<double> timeline_;
  std::size_t steps_ = 0;
  std::map<std::string, GpuIdentity> gpus_;
  std::vector<std::unique_ptr<PromApi>> own_;  // connections for parallel reads
  bool remote_ = false;                        // raw samples by remote read (choose_remote_read)
  std::optional<Error> siblings_error_;        // the first batch's that failed check_siblings
  std::array<std::vector<PendingStep>, kLedgerMetrics.size()> pending_;  // per owner counter
  std::unordered_map<std::uint64_t, SeriesRow> pending_rows_;            // by PendingStep::owner
  std::map<std::pair<std::vector<std::string>, int>, RowAcc> rows_;
  std::vector<double> idle_steps_;
  std::optional<Pricer> pricer_;
  bool exclude_faulty_ = false;  // pricing file `faulty: exclude`
};

}  // namespace

bool is_dimension(std::string_view name) {
  return std::find(std::begin(kDimensions), std::end(kDimensions), name) != std::end(kDimensions);
}

double default_step(double period_seconds) {
  static constexpr double kSteps[] = {60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400};
  for (double s : kSteps) {
    if (period_seconds / s <= 400) return s;
  }
  return std::ceil(period_seconds / 400 / 86400) * 86400;
}

Result<Report> build_report(PromApi& api, const ReportRequest& request,
                            std::function<void(std::string_view)> progress) {
  return Builder(api, request, std::move(progress)).build();
}

}  // namespace gpumeter::report
