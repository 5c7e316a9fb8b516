#include "cli/snapshot_render.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <optional>
#include <set>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/version.h"
#include "util/terminal_text.h"

namespace gpumeter::cli {

namespace {

using nlohmann::json;

// The lists a process was found in ("compute", "graphics", "mps"), from the reading: the
// snapshot model keeps owners, not types.
std::vector<std::string> process_types(const GpuSnapshot& g, unsigned pid) {
  std::vector<std::string> types;
  if (!g.reading || !g.reading->usage.processes) return types;
  for (const auto& p : *g.reading->usage.processes) {
    if (p.pid != pid) continue;
    if (p.types & kProcessCompute) types.push_back("compute");
    if (p.types & kProcessGraphics) types.push_back("graphics");
    if (p.types & kProcessMps) types.push_back("mps");
  }
  return types;
}

const LabeledValue* find_label(const std::vector<LabeledValue>& v, std::string_view label) {
  for (const auto& x : v) {
    if (x.label == label) return &x;
  }
  return nullptr;
}

// ---- JSON: base units, every key always present, null where a value is unknown.

json opt(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

json owner_json(const OwnerLabels& o) {
  return {{"project", o.project}, {"user", o.user},           {"namespace", o.namespace_},
          {"pod", o.pod},         {"container", o.container}, {"hpc_job", o.hpc_job}};
}

json ledger_json(const LedgerStateGpu& g) {
  json owners = json::array();
  for (const auto& e : g.owners) {
    owners.push_back({{"owner", owner_json(e.owner)},
                      {"allocated_seconds", e.allocated_seconds},
                      {"busy_seconds", e.busy_seconds},
                      {"energy_joules", e.energy_joules},
                      {"memory_byte_seconds", e.memory_byte_seconds}});
    if (!e.mig.mig_uuid.empty()) {
      owners.back()["mig"] = {{"mig_uuid", e.mig.mig_uuid},
                              {"gpu_instance", e.mig.gpu_instance},
                              {"compute_instance", e.mig.compute_instance},
                              {"mig_profile", e.mig.mig_profile}};
    }
  }
  return {{"problem", g.problem.empty() ? json(nullptr) : json(g.problem)},
          {"covered_seconds", g.covered_seconds},
          {"gap_seconds", g.gap_seconds},
          {"owners", std::move(owners)}};
}

json report_json(const SnapshotReport& r) {
  const Snapshot& s = r.snap;
  json backends = json::array();
  for (const auto& b : s.backends) {
    backends.push_back({{"backend", b.backend},
                        {"up", b.up},
                        {"absent", b.absent},
                        {"detail", b.detail},
                        {"library", b.library},
                        {"driver_version", b.driver_version}});
  }
  const AttributionStatus& a = s.attribution;
  json attribution = {{"kubelet_socket", r.kubelet_socket},
                      {"kubelet_up", a.kubelet_up ? json(*a.kubelet_up) : json(nullptr)},
                      {"owner_lookups", a.owner_lookups},
                      {"owner_lookup_errors", a.owner_lookup_errors}};

  std::set<std::string> shown;
  json gpus = json::array();
  for (const auto& g : s.gpus) {
    const DeviceReading* rd = g.reading.get();
    auto value = [&](std::optional<double> DeviceValues::*field) {
      return rd ? opt(rd->device.*field) : json(nullptr);
    };
    json temperature = json::object();
    if (rd) {
      for (const auto& t : rd->device.temperature_celsius) temperature[t.label] = t.value;
    }
    json procs = json::array();
    for (const auto& p : g.processes) {
      procs.push_back({{"pid", p.pid},
                       {"running", p.running},
                       {"types", process_types(g, p.pid)},
                       {"memory_bytes", opt(p.memory_bytes)},
                       {"sm_utilization_ratio", opt(p.utilization_ratio)},
                       {"owner", owner_json(p.owner)}});
    }
    json ledger = nullptr;
    if (auto it = r.ledger.gpus.find(g.identity.uuid); !g.identity.uuid.empty() && it != r.ledger.gpus.end()) {
      ledger = ledger_json(it->second);
      shown.insert(it->first);
    }
    gpus.push_back({{"gpu", g.identity.index},
                    {"uuid", g.identity.uuid},
                    {"model", g.identity.model},
                    {"pci_bus_id", g.identity.pci_bus_id},
                    {"up", g.up},
                    {"down_reason", g.up ? json(nullptr) : json(g.down_reason)},
                    {"utilization_ratio", value(&DeviceValues::utilization_ratio)},
                    {"memory_utilization_ratio", value(&DeviceValues::memory_utilization_ratio)},
                    {"memory_used_bytes", value(&DeviceValues::memory_used_bytes)},
                    {"memory_total_bytes", value(&DeviceValues::memory_total_bytes)},
                    {"power_watts", value(&DeviceValues::power_watts)},
                    {"power_limit_watts", value(&DeviceValues::power_limit_watts)},
                    {"temperature_celsius", std::move(temperature)},
                    {"processes", std::move(procs)},
                    {"ledger", std::move(ledger)}});
  }

  json other = json::array();
  for (const auto& [uuid, lg] : r.ledger.gpus) {
    if (shown.count(uuid)) continue;
    json e = {{"uuid", uuid}, {"gpu", lg.index ? json(*lg.index) : json(nullptr)}, {"model", lg.model}};
    e["ledger"] = ledger_json(lg);
    other.push_back(std::move(e));
  }
  json state = {{"path", r.state_path},
                {"status", r.state_path.empty() ? "off" : std::string(to_string(r.ledger.status))},
                {"problem", r.ledger.problem.empty() ? json(nullptr) : json(r.ledger.problem)},
                {"saved_unix", r.ledger.saved_unix ? json(*r.ledger.saved_unix) : json(nullptr)},
                {"other_gpus", std::move(other)}};

  return {{"format", "gpumeter-snapshot"},
          {"version", 1},
          {"taken_unix", s.taken_unix},
          {"interval_seconds", std::chrono::duration<double>(r.interval).count()},
          {"build", {{"version", s.build.version}, {"revision", s.build.revision}}},
          {"backends", std::move(backends)},
          {"attribution", std::move(attribution)},
          {"ledger_state", std::move(state)},
          {"gpus", std::move(gpus)}};
}

// ---- Table: aligned columns, long values cut with "…", ANSI colour only when asked.

struct Style {
  bool color = false;
  std::string wrap(std::string_view s, const char* code) const {
    if (!color || s.empty()) return std::string(s);
    return std::string("\033[") + code + "m" + std::string(s) + "\033[0m";
  }
  std::string bold(std::string_view s) const { return wrap(s, "1"); }
  std::string dim(std::string_view s) const { return wrap(s, "2"); }
  std::string good(std::string_view s) const { return wrap(s, "32"); }
  std::string bad(std::string_view s) const { return wrap(s, "1;31"); }
};

struct Column {
  std::string header;
  size_t max_width = 40;
  bool right = false;          // numbers
  bool drop_if_empty = false;  // left out of a table where no row has a value
};

class Table {
 public:
  explicit Table(std::vector<Column> columns) : columns_(std::move(columns)) {}
  void add(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }

  void render(std::string& out, std::string_view indent, const Style& style) const {
    std::vector<size_t> shown;
    std::vector<size_t> widths;
    for (size_t c = 0; c < columns_.size(); ++c) {
      const bool any = std::any_of(rows_.begin(), rows_.end(), [&](const auto& r) { return !r[c].empty(); });
      if (columns_[c].drop_if_empty && !any) continue;
      size_t w = text_width(columns_[c].header);
      for (const auto& r : rows_) w = std::max(w, text_width(cell(r, c)));
      shown.push_back(c);
      widths.push_back(w);
    }
    auto line = [&](auto text_of, bool header) {
      std::string l(indent);
      for (size_t k = 0; k < shown.size(); ++k) {
        const Column& col = columns_[shown[k]];
        std::string text = text_of(shown[k]);
        const std::string pad(widths[k] - text_width(text), ' ');
        std::string padded = col.right ? pad + text : text + (k + 1 < shown.size() ? pad : "");
        l += header ? style.bold(padded) : padded;
        if (k + 1 < shown.size()) l += "  ";
      }
      out += l + "\n";
    };
    line([&](size_t c) { return columns_[c].header; }, true);
    for (const auto& r : rows_) line([&](size_t c) { return cell(r, c); }, false);
  }

 private:
  std::string cell(const std::vector<std::string>& row, size_t c) const {
    if (row[c].empty()) return "-";
    return truncate_utf8(printable(row[c]), columns_[c].max_width);
  }
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

std::string bytes_text(double b) {
  if (b >= 1024.0 * 1024 * 1024) return fmt::format("{:.1f} GiB", b / (1024.0 * 1024 * 1024));
  return fmt::format("{:.0f} MiB", b / (1024.0 * 1024));
}

std::string percent_text(double ratio) { return fmt::format("{:.0f}%", 100 * ratio); }

std::string utc_text(double unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string duration_text(double seconds) {
  if (seconds < 60) return fmt::format("{:.0f} s", seconds);
  if (seconds < 3600) return fmt::format("{:.1f} min", seconds / 60);
  return fmt::format("{:.2f} h", seconds / 3600);
}

std::string short_uuid(const std::string& uuid) { return truncate_utf8(uuid, 13); }  // "GPU-" and 8 hex digits

void render_ledger_table(std::string& out, const LedgerStateGpu& lg, const Style& style) {
  out += "  " + style.bold("ledger totals") + " " +
         style.dim("(state file: covered " + duration_text(lg.covered_seconds) + ", gaps " +
                   duration_text(lg.gap_seconds) + ")") +
         "\n";
  if (!lg.problem.empty()) {
    out += "    " + style.bad("unreadable entry: ") + printable(lg.problem) + "\n";
    return;
  }
  if (lg.owners.empty()) {
    out += "    no owners recorded\n";
    return;
  }
  Table t({{"PROJECT", 24},
           {"USER", 16, false, true},
           {"NAMESPACE", 24, false, true},
           {"POD", 40, false, true},
           {"CONTAINER", 20, false, true},
           {"HPC_JOB", 16, false, true},
           {"ALLOCATED h", 12, true},
           {"BUSY h", 12, true},
           {"EFFICIENCY", 10, true},
           {"ENERGY kWh", 12, true},
           {"MEMORY GiB·h", 14, true}});
  for (const auto& e : lg.owners) {
    const OwnerLabels& o = e.owner;
    t.add({o.project, o.user, o.namespace_, o.pod, o.container, o.hpc_job,
           fmt::format("{:.3f}", e.allocated_seconds / 3600), fmt::format("{:.3f}", e.busy_seconds / 3600),
           e.allocated_seconds > 0 ? percent_text(e.busy_seconds / e.allocated_seconds) : "",
           fmt::format("{:.3f}", e.energy_joules / 3.6e6),
           fmt::format("{:.2f}", e.memory_byte_seconds / (1024.0 * 1024 * 1024) / 3600)});
  }
  t.render(out, "    ", style);
}

// The table's head: when, the backends, the kubelet, failed owner lookups and the ledger file.
void render_header(std::string& out, const SnapshotReport& r, const Style& style) {
  const Snapshot& s = r.snap;
  out += style.bold("gpumeter snapshot") + "  " + utc_text(s.taken_unix) + "  " +
         style.dim("(per-process utilization over " +
                   fmt::format("{:.1f} s", std::chrono::duration<double>(r.interval).count()) + ")") +
         "\n";
  for (const auto& b : s.backends) {
    const std::string state = b.up ? style.good("up") : b.absent ? style.dim("absent") : style.bad("DOWN");
    out += "backend  " + b.backend + " " + state + ": " + printable(b.detail) + "\n";
  }
  const AttributionStatus& a = s.attribution;
  if (r.kubelet_socket.empty()) {
    out += "kubelet  off\n";
  } else {
    out += "kubelet  " + (a.kubelet_up.value_or(false) ? style.good("up") : style.bad("DOWN")) + ": " +
           printable(r.kubelet_socket) + "\n";
  }
  if (a.owner_lookup_errors > 0) {
    // Processes whose /proc entry could not be read: their owner is __unattributed__.
    out += "owners   " + style.bad(std::to_string(a.owner_lookup_errors) + " lookup(s) failed") +
           ": /proc/<pid> unreadable under --path.procfs\n";
  }
  out += "ledger   ";
  if (r.state_path.empty()) {
    out += "off (--ledger.state-file is empty): no totals\n";
    return;
  }
  switch (r.ledger.status) {
    case LedgerStateSummary::Status::kMissing:
      out += printable(r.state_path) + ": no state file, so no ledger totals\n";
      break;
    case LedgerStateSummary::Status::kUnusable:
      out += printable(r.state_path) + ": " + style.bad("unusable") + ": " + printable(r.ledger.problem) +
             " (file left as it is)\n";
      break;
    case LedgerStateSummary::Status::kOk:
      out += printable(r.state_path) + ": saved " +
             (r.ledger.saved_unix ? utc_text(*r.ledger.saved_unix) : std::string("at an unknown time")) + ", " +
             std::to_string(r.ledger.gpus.size()) + " GPU(s)\n";
      break;
  }
}

// One line of a GPU's readings: utilization, memory, power, temperature (what it has of them).
void render_gpu_facts(std::string& out, const DeviceReading& rd) {
  std::vector<std::string> facts;
  if (rd.device.utilization_ratio) facts.push_back("utilization " + percent_text(*rd.device.utilization_ratio));
  if (rd.device.memory_used_bytes && rd.device.memory_total_bytes) {
    facts.push_back("memory " + bytes_text(*rd.device.memory_used_bytes) + " / " +
                    bytes_text(*rd.device.memory_total_bytes));
  } else if (rd.device.memory_used_bytes) {
    facts.push_back("memory " + bytes_text(*rd.device.memory_used_bytes));
  }
  if (rd.device.power_watts) {
    facts.push_back("power " + fmt::format("{:.0f} W", *rd.device.power_watts) +
                    (rd.device.power_limit_watts ? fmt::format(" / {:.0f} W", *rd.device.power_limit_watts) : ""));
  }
  if (const LabeledValue* t = find_label(rd.device.temperature_celsius, "gpu")) {
    facts.push_back("temperature " + fmt::format("{:.0f} °C", t->value));
  }
  std::string line = " ";
  for (const auto& f : facts) line += "  " + f;
  if (!facts.empty()) out += line.substr(1) + "\n";
}

// A GPU's processes with their owners, as nvidia-smi lists them plus the owner columns.
void render_processes(std::string& out, const GpuSnapshot& g, const Style& style) {
  if (g.processes.empty()) {
    out += "  " + style.dim("no processes") + "\n";
    return;
  }
  Table t({{"PID", 10, true},
           {"TYPE", 8},
           {"MEMORY", 10, true},
           {"SM", 5, true},
           {"PROJECT", 24},
           {"USER", 16},
           {"NAMESPACE", 24, false, true},
           {"POD", 40, false, true},
           {"CONTAINER", 20, false, true},
           {"HPC_JOB", 16, false, true}});
  for (const auto& p : g.processes) {
    const OwnerLabels& o = p.owner;
    // nvidia-smi's letters: C, G, M, C+G.
    std::string type;
    for (const auto& name : process_types(g, p.pid)) {
      type += (type.empty() ? "" : "+") + std::string(1, static_cast<char>(std::toupper(name[0])));
    }
    if (!p.running) type = "exited";
    t.add({std::to_string(p.pid), type, p.memory_bytes ? bytes_text(*p.memory_bytes) : "",
           p.utilization_ratio ? percent_text(*p.utilization_ratio) : "", o.project, o.user, o.namespace_, o.pod,
           o.container, o.hpc_job});
  }
  t.render(out, "  ", style);
}

std::string report_table(const SnapshotReport& r, const Style& style) {
  const Snapshot& s = r.snap;
  std::string out;
  render_header(out, r, style);
  if (s.gpus.empty()) out += "\nno GPUs\n";

  std::set<std::string> shown;
  for (const auto& g : s.gpus) {
    const DeviceIdentity& id = g.identity;
    out += "\n" + style.bold("GPU " + std::to_string(id.index));
    for (const std::string& part :
         {truncate_utf8(printable(id.model), 32), short_uuid(printable(id.uuid)), id.pci_bus_id}) {
      if (!part.empty()) out += "  " + part;
    }
    out += "  " + (g.up ? style.good("up") : style.bad("DOWN")) + "\n";
    if (!g.up) out += "  " + style.bad("down: ") + printable(g.down_reason) + "\n";
    if (const DeviceReading* rd = g.reading.get()) render_gpu_facts(out, *rd);
    render_processes(out, g, style);

    if (r.ledger.status != LedgerStateSummary::Status::kOk) continue;
    auto it = r.ledger.gpus.find(id.uuid);
    if (id.uuid.empty() || it == r.ledger.gpus.end()) {
      out += "  " + style.dim("ledger totals: none recorded for this GPU") + "\n";
      continue;
    }
    shown.insert(it->first);
    render_ledger_table(out, it->second, style);
  }

  for (const auto& [uuid, lg] : r.ledger.gpus) {
    if (shown.count(uuid)) continue;
    out += "\n" + style.bold("not on this node now: " + printable(uuid));
    if (lg.index) out += "  (was GPU " + std::to_string(*lg.index) + ")";
    if (!lg.model.empty()) out += "  " + printable(lg.model);
    out += "\n";
    render_ledger_table(out, lg, style);
  }
  return out;
}

}  // namespace

std::string snapshot_json(const SnapshotReport& r) {
  return report_json(r).dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

std::string snapshot_table(const SnapshotReport& r, bool color) { return report_table(r, Style{color}); }

}  // namespace gpumeter::cli
