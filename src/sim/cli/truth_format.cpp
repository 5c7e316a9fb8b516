#include "sim/cli/truth_format.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

namespace gpumeter::sim {

namespace {

struct Column {
  std::string title;
  bool numeric;
};

// Left-aligns text columns and right-aligns numbers, two spaces apart.
std::string render(const std::vector<Column>& columns, const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width(columns.size());
  for (std::size_t c = 0; c < columns.size(); ++c) {
    width[c] = columns[c].title.size();
    for (const auto& row : rows) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    std::string l;
    for (std::size_t c = 0; c < cells.size(); ++c) {
      if (c > 0) l += "  ";
      l += columns[c].numeric ? fmt::format("{:>{}}", cells[c], width[c])
                              : fmt::format("{:<{}}", cells[c], width[c]);
    }
    while (!l.empty() && l.back() == ' ') l.pop_back();
    out += l + "\n";
  };
  std::vector<std::string> titles;
  for (const auto& c : columns) titles.push_back(c.title);
  line(titles);
  for (const auto& row : rows) line(row);
  return out;
}

std::string num(double v) { return fmt::format("{:.3f}", v); }

}  // namespace

nlohmann::ordered_json truth_to_json(const Scenario& scenario, const Truth& truth) {
  nlohmann::ordered_json out;
  out["scenario"] = scenario.source;
  out["from_seconds"] = to_seconds(truth.from);
  out["to_seconds"] = to_seconds(truth.to);
  out["window_seconds"] = to_seconds(truth.to - truth.from);
  out["gpus"] = nlohmann::ordered_json::array();
  for (const GpuTruth& g : truth.gpus) {
    nlohmann::ordered_json j;
    j["gpu"] = g.gpu;
    j["uuid"] = g.uuid;
    j["model"] = scenario.model_of(g.gpu).name;
    j["busy_seconds"] = g.busy_seconds;
    j["energy_joules"] = g.energy_joules;
    j["idle_energy_joules"] = g.idle_energy_joules;
    j["memory_byte_seconds"] = g.memory_byte_seconds;
    j["allocated_seconds"] = g.allocated_seconds;
    j["idle_seconds"] = g.idle_seconds;
    out["gpus"].push_back(std::move(j));
  }
  out["jobs"] = nlohmann::ordered_json::array();
  for (const JobTruth& t : truth.jobs) {
    nlohmann::ordered_json j;
    j["name"] = t.name;
    j["gpu"] = t.gpu;
    j["uuid"] = t.uuid;
    j["pid"] = t.pid;
    j["uid"] = t.uid;
    j["cgroup"] = t.cgroup;
    j["env"] = nlohmann::ordered_json::object();
    for (const auto& [k, v] : t.env) j["env"][k] = v;
    if (!t.kubernetes.empty()) {
      j["kubernetes"] = {{"namespace", t.kubernetes.namespace_},
                         {"pod", t.kubernetes.pod},
                         {"container", t.kubernetes.container}};
    }
    j["allocated_seconds"] = t.allocated_seconds;
    j["busy_seconds"] = t.busy_seconds;
    j["memory_byte_seconds"] = t.memory_byte_seconds;
    j["energy_joules"] = t.energy_joules;
    out["jobs"].push_back(std::move(j));
  }
  out["users"] = nlohmann::ordered_json::object();
  for (const auto& [name, uid] : scenario.users) out["users"][name] = uid;
  return out;
}

std::string truth_to_table(const Truth& truth) {
  std::vector<std::vector<std::string>> gpu_rows;
  for (const GpuTruth& g : truth.gpus) {
    gpu_rows.push_back({std::to_string(g.gpu), g.uuid, num(g.busy_seconds), num(g.energy_joules),
                        num(g.idle_energy_joules), fmt::format("{:.6g}", g.memory_byte_seconds),
                        num(g.allocated_seconds), num(g.idle_seconds)});
  }
  std::vector<std::vector<std::string>> job_rows;
  for (const JobTruth& t : truth.jobs) {
    job_rows.push_back({t.name, std::to_string(t.gpu), std::to_string(t.pid), std::to_string(t.uid),
                        num(t.allocated_seconds), num(t.busy_seconds),
                        fmt::format("{:.6g}", t.memory_byte_seconds), num(t.energy_joules), t.cgroup});
  }
  std::string out = fmt::format("window [{}, {}) s\n\n", to_seconds(truth.from), to_seconds(truth.to));
  out += render({{"GPU", true},
                 {"UUID", false},
                 {"BUSY_S", true},
                 {"ENERGY_J", true},
                 {"IDLE_ENERGY_J", true},
                 {"MEMORY_BYTE_S", true},
                 {"ALLOCATED_S", true},
                 {"IDLE_S", true}},
                gpu_rows);
  out += "\n";
  out += render({{"JOB", false},
                 {"GPU", true},
                 {"PID", true},
                 {"UID", true},
                 {"ALLOCATED_S", true},
                 {"BUSY_S", true},
                 {"MEMORY_BYTE_S", true},
                 {"ENERGY_J", true},
                 {"CGROUP", false}},
                job_rows);
  return out;
}

}  // namespace gpumeter::sim
