#include "cli/snapshot.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "cli/agent_setup.h"
#include "cli/shared_flags.h"
#include "cli/snapshot_render.h"
#include "cli/version.h"
#include "ledger/state_summary.h"
#include "util/duration.h"

namespace gpumeter::cli {

namespace {

using Clock = std::chrono::steady_clock;

// How long past its schedule a GPU's collection may take before it is reported as hung.
constexpr std::chrono::seconds kCallGrace{10};

double unix_now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

// ---- Collection: each GPU on a thread of its own, so a hung GPU delays nobody else.

struct SlotResult {
  std::mutex mu;  // guards everything below
  DeviceIdentity identity;
  bool identified = false;
  std::shared_ptr<const DeviceReading> reading;  // the second reading, when it succeeded
  std::string error;
  bool done = false;
};

struct Progress {
  std::mutex mu;
  std::condition_variable cv;
  size_t finished = 0;
};

struct Collection {
  std::vector<std::shared_ptr<SlotResult>> slots;
  size_t stuck = 0;  // threads still inside the vendor library
};

// Collects every GPU twice, `interval` apart, feeding both readings to the tracker: the
// second one's per-process utilization covers the window between them.
Collection collect_twice(Backend& backend, UsageTracker& tracker, std::chrono::milliseconds interval,
                         Clock::time_point deadline) {
  Collection c;
  auto progress = std::make_shared<Progress>();
  std::vector<std::thread> threads;
  for (unsigned d = 0; d < backend.device_count(); ++d) {
    auto slot = std::make_shared<SlotResult>();
    slot->identity.index = d;
    slot->identity.vendor = backend.status().vendor;
    c.slots.push_back(slot);
    threads.emplace_back([&backend, &tracker, interval, slot, progress, d] {
      const auto begin = Clock::now();
      // Only this thread writes the slot; the lock is never held across a driver call, which
      // may hang while the main thread reads the slot.
      auto identify = [&] {
        {
          std::lock_guard lock(slot->mu);
          if (slot->identified) return slot->identity;
        }
        auto id = backend.identify(d);
        std::lock_guard lock(slot->mu);
        if (id) {
          slot->identity = std::move(id).value();
          slot->identity.index = d;
          slot->identified = true;
        }
        return slot->identity;
      };
      DeviceIdentity id = identify();
      if (auto first = backend.collect(d)) tracker.on_reading(d, id, *first);
      std::this_thread::sleep_until(begin + interval);
      id = identify();
      auto second = backend.collect(d);
      if (second) tracker.on_reading(d, id, *second);
      {
        std::lock_guard lock(slot->mu);
        if (second) {
          slot->reading = std::make_shared<const DeviceReading>(std::move(second).value());
        } else {
          slot->error = second.error().message;
        }
        slot->done = true;
      }
      std::lock_guard lock(progress->mu);
      ++progress->finished;
      progress->cv.notify_all();
    });
  }
  {
    std::unique_lock lock(progress->mu);
    progress->cv.wait_until(lock, deadline, [&] { return progress->finished == threads.size(); });
  }
  for (size_t i = 0; i < threads.size(); ++i) {
    bool done;
    {
      std::lock_guard lock(c.slots[i]->mu);
      done = c.slots[i]->done;
    }
    if (done) {
      threads[i].join();
    } else {
      threads[i].detach();
      ++c.stuck;
    }
  }
  return c;
}

bool use_color(const SnapshotOptions& o) {
  if (o.no_color || o.format != "table") return false;
  if (const char* no = std::getenv("NO_COLOR"); no != nullptr && *no != '\0') return false;
  if (const char* term = std::getenv("TERM"); term != nullptr && std::string_view(term) == "dumb") return false;
  return ::isatty(STDOUT_FILENO) == 1;
}

}  // namespace

void setup_snapshot_command(CLI::App& cmd, SnapshotOptions& o, int& exit_code) {
  cmd.add_option("--format", o.format, "Output: an aligned terminal table, or JSON in base units (docs/snapshot.md)")
      ->capture_default_str()
      ->check(CLI::IsMember({"table", "json"}));
  cmd.add_option("--interval", o.interval,
                 "Time between the two collections of each GPU; per-process utilization is the average over "
                 "this window, so it covers a real stretch of work rather than one instant (100ms to 10m)")
      ->capture_default_str();
  cmd.add_flag("--no-color", o.no_color,
               "No ANSI colours in the table (they are only used when stdout is a terminal, NO_COLOR is unset or "
               "empty and TERM is not dumb)");
  cmd.add_option("--config.file", o.config_file,
                 "The agent's configuration (YAML), so that owners and projects are resolved as `gpumeter serve` "
                 "resolves them. See docs/configuration.md");
  cmd.add_option("--ledger.state-file", o.ledger_state_file,
                 "The agent's ledger state file, read (never written or moved) for the totals per owner; a "
                 "missing file means no totals yet, \"\" skips them")
      ->capture_default_str();
  add_source_flags(cmd, {o.nvml_library, o.sim_scenario, o.procfs, o.rootfs}, "");
  cmd.add_option("--log.level", o.log_level, "Log messages (to stderr) with the given severity or above")
      ->capture_default_str()
      ->check(CLI::IsMember({"debug", "info", "warn", "error"}));
  cmd.callback([&o, &exit_code] { exit_code = run_snapshot(o); });
}

int run_snapshot(const SnapshotOptions& o) {
  Logger log(*parse_log_level(o.log_level), LogFormat::kLogfmt);
  auto bad_flag = [](const std::string& flag, const std::string& why) {
    std::fprintf(stderr, "gpumeter snapshot: bad flag %s: %s\n", flag.c_str(), why.c_str());
    return 2;
  };
  auto interval = parse_duration(o.interval);
  if (!interval) return bad_flag("--interval", interval.error().message);
  if (interval->count() < 100 || interval->count() > 600'000) {
    return bad_flag("--interval", "must be between 100ms and 10m");
  }
  auto loaded = load_agent_config(o.config_file);
  if (!loaded) return bad_flag("--config.file", loaded.error().message);
  const Config config = std::move(loaded).value();
  std::error_code ec;
  if (!o.sim_scenario.empty() && !std::filesystem::is_regular_file(o.sim_scenario, ec)) {
    return bad_flag("--sim.scenario", "no such file: " + o.sim_scenario);
  }
  if (!o.sim_scenario.empty()) {
    if (auto ok = check_sim_scenario(o.sim_scenario, o.nvml_library); !ok)
      return bad_flag("--sim.scenario", ok.error().message);
  }

  SnapshotReport report;
  report.interval = *interval;
  report.state_path = o.ledger_state_file;
  if (!report.state_path.empty()) report.ledger = read_ledger_state_summary(report.state_path);

  auto created = create_nvml_backend({o.nvml_library, o.sim_scenario, std::nullopt, false}, log);
  if (!created) return bad_flag("--sim.scenario", created.error().message);
  auto nvml = std::move(created).value();
  if (!nvml->status().up) {
    std::fprintf(stderr, "gpumeter snapshot: NVML backend down: %s\n", nvml->status().detail.c_str());
    return 1;
  }

  const HostOwnerResolverOptions ro = owner_resolver_options(config, o.procfs, o.rootfs, *interval);
  report.kubelet_socket = ro.kubelet_socket;
  HostOwnerResolver resolver(ro, log);
  // An operator wants every process here; the per-process limit is for Prometheus series.
  UsageTrackerOptions to = usage_tracker_options(config, *interval, ro);
  to.max_process_series = std::numeric_limits<std::size_t>::max();
  UsageTracker tracker(to, resolver, log);
  resolver.start();  // waits briefly for the kubelet's first pod list, so that pods are named
  const auto start = Clock::now();
  const auto deadline = start + *interval + kCallGrace;
  Collection c = collect_twice(*nvml, tracker, *interval, deadline);

  Snapshot& snap = report.snap;
  snap.taken_unix = unix_now();
  snap.build = {kVersion, kRevision};
  snap.backends.push_back(nvml->status());
  for (const auto& slot : c.slots) {
    GpuSnapshot g;
    std::lock_guard lock(slot->mu);
    g.identity = slot->identity;
    if (!slot->done) {
      g.down_reason = fmt::format("collection did not finish within {:.0f} s (a driver call may be hung)",
                                  std::chrono::duration<double>(deadline - start).count());
    } else if (slot->reading) {
      g.up = true;
      g.collect_success = true;
      g.reading = slot->reading;
    } else {
      g.down_reason = slot->error;
    }
    snap.gpus.push_back(std::move(g));
  }
  tracker.contribute(snap);

  // Owner values come from /proc and need not be valid UTF-8: JSON replaces bad bytes, never throws.
  const std::string text = o.format == "json" ? snapshot_json(report) : snapshot_table(report, use_color(o));
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  if (c.stuck > 0) {
    // A thread is still inside the vendor library; unloading it now would crash that thread.
    _exit(0);
  }
  resolver.stop();
  return 0;
}

}  // namespace gpumeter::cli
