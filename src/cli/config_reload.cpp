#include "cli/config_reload.h"

#include <fstream>
#include <sstream>

namespace gpumeter::cli {

namespace {

// Read once, then parsed from memory: the content compared by files_changed() is exactly what
// was parsed, even if the file is replaced meanwhile.
constexpr std::string_view kUnreadable{"\0unreadable", 11};

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

ConfigReloader::ConfigReloader(Files files, Config current, Prepare prepare, Logger& log,
                               std::function<double()> clock)
    : files_(std::move(files)),
      prepare_(std::move(prepare)),
      log_(log),
      clock_(std::move(clock)),
      current_(std::move(current)),
      config_seen_(read_content(files_.config_file)),
      web_seen_(read_content(files_.web_config_file)) {
  status_->success_unix = now();
}

ConfigReloader::~ConfigReloader() { stop_watch(); }

double ConfigReloader::now() const {
  if (clock_) return clock_();
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string ConfigReloader::read_content(const std::string& path) {
  if (path.empty()) return "";
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::string(kUnreadable);
  std::ostringstream out;
  out << in.rdbuf();
  if (in.bad()) return std::string(kUnreadable);
  return std::move(out).str();
}

bool ConfigReloader::files_changed() const {
  const std::string config = read_content(files_.config_file);
  const std::string web = read_content(files_.web_config_file);
  std::lock_guard lock(mu_);
  return config != config_seen_ || web != web_seen_;
}

Result<void> ConfigReloader::reload(std::string_view trigger) {
  std::lock_guard lock(mu_);
  const std::string config_text = read_content(files_.config_file);
  const std::string web_text = read_content(files_.web_config_file);
  config_seen_ = config_text;
  web_seen_ = web_text;

  auto attempt = [&]() -> Result<std::vector<std::string>> {
    ReloadedSettings next;
    if (!files_.config_file.empty()) {
      if (config_text == kUnreadable) return Error{0, files_.config_file + ": cannot read the file"};
      auto parsed = parse_config(config_text, files_.config_file);
      if (!parsed) return parsed.error();
      next.config = std::move(parsed).value();
    }
    if (!files_.web_config_file.empty()) {
      if (web_text == kUnreadable) return Error{0, files_.web_config_file + ": cannot read the file"};
      if (web_text.size() > kMaxWebConfigBytes) return Error{0, files_.web_config_file + ": file too large"};
      auto parsed = parse_web_config(web_text, files_.web_config_file);
      if (!parsed) return parsed.error();
      next.web = std::make_shared<const WebConfig>(std::move(parsed).value());
    }
    auto apply = prepare_(next);
    if (!apply) return apply.error();
    (*apply)();
    std::vector<std::string> pending = restart_only_changes(current_, next.config);
    current_ = std::move(next.config);
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
