#include "cli/report_command.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "pricing/pricing.h"
#include "report/format.h"
#include "report/prom_api.h"
#include "report/report_builder.h"
#include "report/time_spec.h"
#include "util/ascii.h"
#include "util/atomic_file.h"
#include "util/duration.h"
#include "util/malloc_arenas.h"
#include "util/terminal_text.h"
#include "util/yaml_reader.h"

namespace gpumeter::cli {
namespace {

constexpr int kExitApi = 1;
constexpr int kExitInput = 2;

double wall_now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

int input_error(const std::string& message) {
  std::fprintf(stderr, "gpumeter report: %s\n", message.c_str());
  return kExitInput;
}

Result<double> seconds_flag(const std::string& flag, const std::string& text) {
  auto d = parse_duration(text);
  if (!d) return Error{kExitInput, fmt::format("{}: {}", flag, d.error().message)};
  if (d->count() <= 0) return Error{kExitInput, fmt::format("{}: must be more than zero", flag)};
  return static_cast<double>(d->count()) / 1000.0;
}

// --by project,user and --by project --by user are the same.
std::vector<std::string> split_by(const std::vector<std::string>& values) {
  std::vector<std::string> out;
  for (const auto& v : values) {
    std::stringstream ss(v);
    std::string item;
    while (std::getline(ss, item, ',')) {
      if (!item.empty()) out.push_back(item);
    }
  }
  return out;
}

// --replica-label's names, each a Prometheus label name; "none" alone is none.
Result<std::vector<std::string>> replica_labels(const std::vector<std::string>& names) {
  if (names == std::vector<std::string>{"none"}) return std::vector<std::string>{};
  for (const auto& name : names) {
    if (!is_label_name(name)) return Error{kExitInput, fmt::format("--replica-label \"{}\": not a label name", name)};
  }
  return names;
}

}  // namespace

void setup_report_command(CLI::App& cmd, ReportOptions& o, int& exit_code) {
  cmd.description(
      "Chargeback for a period from any Prometheus-compatible query API (Prometheus, VictoriaMetrics,\n"
      "Thanos, Mimir). Totals are exact: they come from the ledger counters' values at the period's\n"
      "boundaries, with counter resets resolved from raw samples, never from increase() or\n"
      "sum_over_time(). Consecutive periods add up exactly to the whole. See docs/chargeback.md.\n\n"
      "Times: now, -30d, now-12h, unix seconds, 2026-11-01 (midnight UTC), 2026-11-01T08:00:00Z.\n"
      "Exit codes: 0 report written (warnings included), 1 the API failed, answered badly or\n"
      "partially, or with data no ledger can have written, 2 bad flags, dates or pricing file.\n"
      "Nothing is written unless the report is complete.");
  cmd.add_option("--url", o.url, "Base URL of the query API, e.g. http://prometheus:9090 or http://vm:8428")
      ->capture_default_str();
  cmd.add_option("--from", o.from, "Start of the period")->capture_default_str();
  cmd.add_option("--to", o.to, "End of the period")->capture_default_str();
  cmd.add_option("--by", o.by,
                 "Group by: project, user, namespace, pod, hpc_job, model, gpu (uuid), node, cluster (the "
                 "cluster label, as each cluster's Prometheus sets it), mig_profile (a MIG instance's profile; "
                 "empty on whole GPUs); repeat or separate with commas")
      ->capture_default_str();
  cmd.add_option("--pricing", o.pricing_file, "Pricing file (YAML); without one the report shows usage only");
  cmd.add_option("--format", o.format,
                 "table, csv, json, html, or focus (FOCUS 1.2 cost and usage CSV: a row per GPU and owner; "
                 "needs --pricing, takes no --by)")
      ->capture_default_str();
  cmd.add_option("--output", o.output, "File to write; - is stdout")->capture_default_str();
  cmd.add_option("--step", o.step, "Timeline step (default: 1m to 1d, at most 400 steps)");
  cmd.add_option("--node-label", o.node_label, "Label that names the node")->capture_default_str();
  cmd.add_option("--replica-label", o.replica_labels,
                 "Label that tells the replicas of an HA pair of Prometheus servers apart, in a store that keeps "
                 "both copies: each counter is billed from one replica. Repeat for several; none for no replicas")
      ->capture_default_str();
  cmd.add_option("--lookback", o.lookback,
                 "How far before --from a series' previous sample is searched (agent down across the start)")
      ->capture_default_str();
  cmd.add_option("--timeout", o.timeout, "Deadline of each API request, from connecting to the last byte of the answer")
      ->capture_default_str();
  cmd.add_option("--max-answer-size", o.max_answer_size,
                 "Largest API answer accepted (e.g. 256MiB, 1GiB); a larger one fails the report")
      ->capture_default_str();
  cmd.add_option("--read", o.read,
                 "How the counters' samples are read: remote (Prometheus' remote read API, /api/v1/read: the "
                 "store sends its compressed chunks, far cheaper for it than queries over a month of a large "
                 "fleet; Prometheus and Mimir serve it), query (the query API alone: VictoriaMetrics, Thanos, "
                 "any proxy), auto (remote read where the store answers it, else the query API)")
      ->capture_default_str();
  cmd.add_option("--forecast", o.forecast,
                 "Also forecast each group's GPU-hours over this horizon after the period (e.g. 30d), from the "
                 "linear trend of the GPUs it held over the period");
  cmd.add_option("--progress", o.progress, "Progress on stderr: auto (when it is a terminal), always, never")
      ->capture_default_str();
  cmd.add_flag("--no-color", o.no_color, "No colours in the table");
  cmd.callback([&o, &exit_code] {
    // The connections' threads parse answers beside each other, each into its own arena else: at
    // 4000 GPUs the peak RSS was 130 MiB with glibc's default, 108 MiB with two arenas, at the
    // same CPU time (one arena cost 3 s more of it).
    limit_malloc_arenas();
    exit_code = run_report(o);
  });
}

// --from, --to and --step into the request.
Result<void> read_period(const ReportOptions& o, double now, report::ReportRequest& req) {
  auto from = report::parse_time(o.from, now);
  if (!from) return Error{kExitInput, "--from " + from.error().message};
  auto to = report::parse_time(o.to, now);
  if (!to) return Error{kExitInput, "--to " + to.error().message};
  if (*from >= *to) {
    return Error{kExitInput,
                 fmt::format("--from {} is not before --to {}", report::format_utc(*from), report::format_utc(*to))};
  }
  if (*to > now + 1) {
    return Error{kExitInput,
                 fmt::format("--to {} is in the future; a report can only cover the past", report::format_utc(*to))};
  }
  req.from = *from;
  req.to = *to;
  if (o.step.empty()) {
    req.step = report::default_step(req.to - req.from);
  } else {
    auto step = seconds_flag("--step", o.step);
    if (!step) return Error{kExitInput, step.error().message};
    if ((req.to - req.from) / *step > 10000) {
      return Error{kExitInput,
                   fmt::format("--step {}: more than 10,000 steps in the period; choose a longer step", o.step)};
    }
    req.step = *step;
  }
  return {};
}

int run_report(const ReportOptions& o) {
  const double now = wall_now();
  report::ReportRequest req;
  req.now = now;
  req.url = report::url_for_display(o.url);  // never the password, in messages or the report
  req.node_label = o.node_label;
  auto replicas = replica_labels(o.replica_labels);
  if (!replicas) return input_error(replicas.error().message);
  req.replica_labels = std::move(replicas).value();
  if (o.format != "table" && o.format != "csv" && o.format != "json" && o.format != "html" && o.format != "focus") {
    return input_error(fmt::format("--format \"{}\": expected table, csv, json, html or focus", o.format));
  }
  if (o.progress != "auto" && o.progress != "always" && o.progress != "never") {
    return input_error(fmt::format("--progress \"{}\": expected auto, always or never", o.progress));
  }
  if (o.read == "auto" || o.read == "query" || o.read == "remote") {
    req.read = o.read == "auto"    ? report::ReadApi::kAuto
               : o.read == "query" ? report::ReadApi::kQuery
                                   : report::ReadApi::kRemoteRead;
  } else {
    return input_error(fmt::format("--read \"{}\": expected auto, query or remote", o.read));
  }
  req.by = split_by(o.by);
  if (o.format == "focus") {
    // A FOCUS row is one GPU's (or MIG profile's) charge to one owner.
    if (req.by != std::vector<std::string>{"project"}) {
      return input_error("--format focus groups by GPU and owner itself; leave --by out");
    }
    if (o.pricing_file.empty()) return input_error("--format focus needs --pricing: FOCUS rows are costs");
    req.by = report::kFocusDimensions;
  }
  if (req.by.empty()) return input_error("--by: at least one dimension is needed");
  for (const auto& d : req.by) {
    if (!report::is_dimension(d)) {
      return input_error(fmt::format(
          "--by \"{}\": expected project, user, namespace, pod, hpc_job, model, gpu, node, cluster or mig_profile", d));
    }
  }
  if (auto period = read_period(o, now, req); !period) return input_error(period.error().message);
  if (o.format == "focus" && (req.from != std::floor(req.from) || req.to != std::floor(req.to))) {
    return input_error("--format focus: --from and --to must be whole seconds (FOCUS dates have no fraction)");
  }
  if (!o.forecast.empty()) {
    auto horizon = seconds_flag("--forecast", o.forecast);
    if (!horizon) return input_error(horizon.error().message);
    req.forecast = *horizon;
  }
  auto lookback = seconds_flag("--lookback", o.lookback);
  if (!lookback) return input_error(lookback.error().message);
  req.lookback = *lookback;
  auto timeout = seconds_flag("--timeout", o.timeout);
  if (!timeout) return input_error(timeout.error().message);

  pricing::Pricing prices;
  if (!o.pricing_file.empty()) {
    auto loaded = pricing::load_pricing(o.pricing_file);
    if (!loaded) return input_error(loaded.error().message);
    prices = std::move(*loaded);
    req.pricing = &prices;
  }

  const auto max_answer = units::parse_byte_size(o.max_answer_size);
  if (!max_answer || *max_answer < (std::uint64_t{1} << 20)) {
    return input_error(fmt::format("--max-answer-size: expected a byte size of at least 1MiB such as 256MiB, got '{}'",
                                   o.max_answer_size));
  }
  auto api = report::PromApi::connect({o.url, std::chrono::milliseconds(static_cast<long long>(*timeout * 1000)),
                                       static_cast<std::size_t>(*max_answer)});
  if (!api) return input_error(api.error().message);
  const bool progress = o.progress == "always" || (o.progress == "auto" && isatty(STDERR_FILENO));
  const auto started = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(); };
  if (progress) {
    (*api)->on_request([&](const report::RequestInfo& r) {
      std::fprintf(stderr, "report: %6.1f s  request %d: %s (%.2f s)\n", elapsed(), (*api)->requests(),
                   r.what.substr(0, 140).c_str(), r.seconds);
    });
  }
  auto stage = [&](std::string_view what) {
    if (progress)
      std::fprintf(stderr, "report: %6.1f s  %.*s\n", elapsed(), static_cast<int>(what.size()), what.data());
  };
  auto built = report::build_report(**api, req, stage);
  if (!built) {
    // Messages name series, whose label values a GPU user may have chosen: shown as the table shows them.
    std::fprintf(stderr, "gpumeter report: %s\n", printable(built.error().message).c_str());
    return built.error().code == kExitInput ? kExitInput : kExitApi;
  }
  built->elapsed_seconds = elapsed();

  std::string text;
  if (o.format == "json")
    text = report::render_json(*built);
  else if (o.format == "csv")
    text = report::render_csv(*built);
  else if (o.format == "html")
    text = report::render_html(*built);
  else if (o.format == "focus")
    text = report::render_focus(*built);
  else
    text = report::render_table(*built, !o.no_color && o.output == "-" && isatty(STDOUT_FILENO));

  for (const auto& w : built->warnings) {
    if (o.format != "table" || o.output != "-") {
      std::fprintf(stderr, "gpumeter report: warning: %s\n", printable(w.message).c_str());
    }
  }
  if (o.output == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return std::fflush(stdout) == 0 ? 0 : kExitApi;
  }
  auto written = write_file_atomic(o.output, text, 0644);
  if (!written) {
    std::fprintf(stderr, "gpumeter report: cannot write %s: %s\n", o.output.c_str(), written.error().message.c_str());
    return kExitApi;
  }
  stage(fmt::format("wrote {} ({} bytes)", o.output, text.size()));
  return 0;
}

}  // namespace gpumeter::cli
