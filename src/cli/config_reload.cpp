#include "cli/config_reload.h"

namespace gpumeter::cli {

namespace {

// Read once, then parsed from memory: the content compared by files_changed() is exactly what
// was parsed, even if the file is replaced meanwhile. Read as at start (config.h,
// web_config.h): a regular file of at most 1 MiB, opened without blocking, so a directory,
// /dev/null, /dev/zero or a FIFO put in a file's place is refused, not read as "no settings".
Result<std::string> read_file(const std::string& path, Result<std::string> (*reader)(const std::string&)) {
  if (path.empty()) return std::string();
  return reader(path);
}

bool same(const Result<std::string>& a, const Result<std::string>& b) {
  if (a.ok() != b.ok()) return false;
  return a.ok() ? *a == *b : a.error().message == b.error().message;
}

// A reload never turns basic auth or TLS off: a web config emptied or half-written in place,
// or replaced by something else, would otherwise open the endpoint until it is mended. Turning
// them off takes a restart, which an operator does on purpose.
Result<void> check_no_downgrade(const WebConfig* before, const WebConfig* after, const std::string& path) {
  const bool auth_before = before != nullptr && !before->basic_auth_users.empty();
  const bool tls_before = before != nullptr && before->tls.has_value();
  if (auth_before && (after == nullptr || after->basic_auth_users.empty())) {
    return Error{0, path +
                        ": it has no basic_auth_users, which would turn basic auth off; a reload does not, "
                        "restart the agent to serve without it"};
  }
  if (tls_before && (after == nullptr || !after->tls)) {
    return Error{0, path +
                        ": it has no tls_server_config, which would turn TLS off; a reload does not, "
                        "restart the agent to serve plain HTTP"};
  }
  return {};
}

bool same_kubelet(const KubeletConfig& a, const KubeletConfig& b) {
  return a.mode == b.mode && a.socket == b.socket && a.refresh_interval == b.refresh_interval &&
         a.timeout == b.timeout && a.max_message_size == b.max_message_size && a.resource_names == b.resource_names;
}

}  // namespace

std::vector<std::string> restart_only_changes(const Config& before, const Config& after) {
  std::vector<std::string> changed;
  auto note = [&](bool same, const char* key) {
    if (!same) changed.emplace_back(key);
  };
  const AttributionConfig &a = before.attribution, &b = after.attribution;
  note(a.hpc_job_mapping_dir == b.hpc_job_mapping_dir, "attribution.hpc_job_mapping_dir");
  note(a.slurm_cgroups == b.slurm_cgroups, "attribution.slurm_cgroups");
  note(a.slurm_refresh_interval == b.slurm_refresh_interval, "attribution.slurm_refresh_interval");
  note(same_kubelet(a.kubelet, b.kubelet), "attribution.kubelet");
  const LedgerConfig &l = before.ledger, &m = after.ledger;
  note(l.allocation == m.allocation, "ledger.allocation");
  note(l.checkpoint_interval == m.checkpoint_interval, "ledger.checkpoint_interval");
  note(l.labels == m.labels, "ledger.labels");
  note(l.owner_retention == m.owner_retention, "ledger.owner_retention");
  note(l.idle_power_watts == m.idle_power_watts, "ledger.idle_power_watts");
  note(before.processes.max_series == after.processes.max_series, "processes.max_series");
  note(before.processes.retention == after.processes.retention, "processes.retention");
  note(before.exposition.max_series == after.exposition.max_series, "exposition.max_series");
  return changed;
}

std::vector<MetricFamily> reload_families(const ReloadStatus& status) {
  std::vector<MetricFamily> out;
  out.push_back(MetricFamily{"gpumeter_config_last_reload_successful",
                             "Whether the last configuration reload attempt was successful (1) or refused (0).",
                             MetricType::kGauge,
                             {MetricSample{{}, status.successful.load() ? 1.0 : 0.0}}});
  out.push_back(MetricFamily{"gpumeter_config_last_reload_success_timestamp_seconds",
                             "Unix time of the last successful configuration load, the start included.",
                             MetricType::kGauge,
                             {MetricSample{{}, status.success_unix.load()}}});
  return out;
}

ConfigReloader::ConfigReloader(Files files, ReloadedSettings current, Prepare prepare, Logger& log, const Clock* clock)
    : files_(std::move(files)),
      prepare_(std::move(prepare)),
      log_(log),
      clock_(clock != nullptr ? *clock : system_clock()),
      current_(std::move(current)),
      config_seen_(read_file(files_.config_file, read_config_file)),
      web_seen_(read_file(files_.web_config_file, read_web_config_file)) {
  status_->success_unix = now();
}

ConfigReloader::~ConfigReloader() { stop_watch(); }

double ConfigReloader::now() const { return clock_.wall_seconds(); }

bool ConfigReloader::files_changed() const {
  const auto config = read_file(files_.config_file, read_config_file);
  const auto web = read_file(files_.web_config_file, read_web_config_file);
  std::lock_guard lock(mu_);
  return !same(config, config_seen_) || !same(web, web_seen_);
}

Result<ReloadedSettings> ConfigReloader::parse_files() const {
  ReloadedSettings next;
  if (!files_.config_file.empty()) {
    if (!config_seen_) return config_seen_.error();
    auto parsed = parse_config(*config_seen_, files_.config_file);
    if (!parsed) return parsed.error();
    next.config = std::move(parsed).value();
  }
  if (!files_.web_config_file.empty()) {
    if (!web_seen_) return web_seen_.error();
    auto parsed = parse_web_config(*web_seen_, files_.web_config_file);
    if (!parsed) return parsed.error();
    next.web = std::make_shared<const WebConfig>(std::move(parsed).value());
  }
  if (auto ok = check_no_downgrade(current_.web.get(), next.web.get(), files_.web_config_file); !ok) return ok.error();
  return next;
}

Result<void> ConfigReloader::reload(std::string_view trigger) {
  std::lock_guard lock(mu_);
  config_seen_ = read_file(files_.config_file, read_config_file);
  web_seen_ = read_file(files_.web_config_file, read_web_config_file);

  auto attempt = [&]() -> Result<std::vector<std::string>> {
    auto next = parse_files();
    if (!next) return next.error();
    auto apply = prepare_(*next);
    if (!apply) return apply.error();
    (*apply)();
    std::vector<std::string> pending = restart_only_changes(current_.config, next->config);
    current_ = std::move(next).value();
    return pending;
  };
  auto done = attempt();
  if (!done) {
    status_->successful = false;
    log_.error("reloading the configuration failed; the previous configuration stays in force",
               {{"trigger", std::string(trigger)}, {"err", done.error().message}});
    return done.error();
  }
  status_->successful = true;
  status_->success_unix = now();
  if (!done->empty()) {
    std::string keys;
    for (const auto& k : *done) keys += (keys.empty() ? "" : ",") + k;
    log_.warn("changed settings take effect at the next restart", {{"settings", keys}});
  }
  log_.info("configuration reloaded", {{"trigger", std::string(trigger)}});
  return {};
}

void ConfigReloader::start_watch(std::chrono::milliseconds interval) {
  if (interval.count() <= 0 || watch_.joinable()) return;
  watch_ = std::thread([this, interval] {
    std::unique_lock lock(watch_mu_);
    while (!watch_cv_.wait_for(lock, interval, [this] { return watch_stop_; })) {
      lock.unlock();
      if (files_changed()) (void)reload("file change");
      lock.lock();
    }
  });
}

void ConfigReloader::stop_watch() {
  {
    std::lock_guard lock(watch_mu_);
    watch_stop_ = true;
  }
  watch_cv_.notify_all();
  if (watch_.joinable()) watch_.join();
}

}  // namespace gpumeter::cli
