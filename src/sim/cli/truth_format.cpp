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
      l += columns[c].numeric ? fmt::format("{:>{}}", cells[c], width[c]) : fmt::format("{:<{}}", cells[c], width[c]);
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

nlohmann::ordered_json kubernetes_json(const KubernetesRef& k) {
  return {{"namespace", k.namespace_}, {"pod", k.pod}, {"container", k.container}};
}

nlohmann::ordered_json gpu_json(const Scenario& scenario, const GpuTruth& g) {
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
  if (g.gpm_supported) {
    const ProfileAverages& p = g.profiling;
    j["profiling"] = {{"graphics_util_percent", p.graphics},
                      {"sm_util_percent", p.sm},
                      {"sm_occupancy_percent", p.occupancy},
                      {"tensor_util_percent", p.tensor},
                      {"dram_bw_util_percent", p.dram},
                      {"fp64_util_percent", p.fp64},
                      {"fp32_util_percent", p.fp32},
                      {"fp16_util_percent", p.fp16},
                      {"pcie_tx_mib_per_second", p.pcie_tx},
                      {"pcie_rx_mib_per_second", p.pcie_rx},
                      {"nvlink_tx_mib_per_second", p.nvlink_tx},
                      {"nvlink_rx_mib_per_second", p.nvlink_rx}};
  }
  if (!g.nvlink_tx_bytes.empty()) {
    nlohmann::ordered_json links = nlohmann::ordered_json::array();
    for (std::size_t l = 0; l < g.nvlink_tx_bytes.size(); ++l)
      links.push_back({{"link", l}, {"tx_bytes", g.nvlink_tx_bytes[l]}, {"rx_bytes", g.nvlink_rx_bytes[l]}});
    j["nvlink"] = std::move(links);
  }
  return j;
}

std::vector<std::string> gpu_row(const GpuTruth& g) {
  return {std::to_string(g.gpu),     g.uuid,
          num(g.busy_seconds),       num(g.energy_joules),
          num(g.idle_energy_joules), fmt::format("{:.6g}", g.memory_byte_seconds),
          num(g.allocated_seconds),  num(g.idle_seconds)};
}

const std::vector<Column> kGpuColumns = {{"GPU", true},         {"UUID", false},         {"BUSY_S", true},
                                         {"ENERGY_J", true},    {"IDLE_ENERGY_J", true}, {"MEMORY_BYTE_S", true},
                                         {"ALLOCATED_S", true}, {"IDLE_S", true}};

// The pid a job runs on a GPU (one per entry of its GPUs).
unsigned pid_on(const Job& job, unsigned gpu) {
  for (std::size_t i = 0; i < job.gpus.size(); ++i) {
    if (job.gpus[i] == gpu) return job.pids[i];
  }
  return 0;
}

// The window of a truth, and the policy when it is not the default one.
nlohmann::ordered_json header_json(const Scenario& scenario, const char* policy, Micros from, Micros to) {
  nlohmann::ordered_json out;
  out["scenario"] = scenario.source;
  if (policy != nullptr) out["policy"] = policy;
  out["from_seconds"] = to_seconds(from);
  out["to_seconds"] = to_seconds(to);
  out["window_seconds"] = to_seconds(to - from);
  return out;
}

// Who a job's process on one GPU is, for attribution: the same members in both policies.
void add_process_identity(nlohmann::ordered_json& j, unsigned pid, const Job& job) {
  j["pid"] = pid;
  j["uid"] = job.uid;
  j["cgroup"] = job.cgroup;
  j["env"] = nlohmann::ordered_json::object();
  for (const auto& [k, v] : job.env) j["env"][k] = v;
  if (!job.kubernetes.empty()) j["kubernetes"] = kubernetes_json(job.kubernetes);
}

nlohmann::ordered_json users_json(const Scenario& scenario) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const auto& [name, uid] : scenario.users) out[name] = uid;
  return out;
}

}  // namespace

nlohmann::ordered_json truth_to_json(const Scenario& scenario, const Truth& truth) {
  nlohmann::ordered_json out = header_json(scenario, nullptr, truth.from, truth.to);
  out["gpus"] = nlohmann::ordered_json::array();
  for (const GpuTruth& g : truth.gpus) out["gpus"].push_back(gpu_json(scenario, g));
  out["jobs"] = nlohmann::ordered_json::array();
  for (const JobTruth& t : truth.jobs) {
    nlohmann::ordered_json j;
    j["name"] = t.name;
    j["gpu"] = t.gpu;
    j["uuid"] = t.uuid;
    add_process_identity(j, t.pid, scenario.jobs[t.job]);
    j["allocated_seconds"] = t.allocated_seconds;
    j["busy_seconds"] = t.busy_seconds;
    j["memory_byte_seconds"] = t.memory_byte_seconds;
    j["energy_joules"] = t.energy_joules;
    j["idle_power_energy_joules"] = t.idle_power_energy_joules;
    out["jobs"].push_back(std::move(j));
  }
  out["users"] = users_json(scenario);
  return out;
}

std::string truth_to_table(const Truth& truth) {
  std::vector<std::vector<std::string>> gpu_rows;
  for (const GpuTruth& g : truth.gpus) gpu_rows.push_back(gpu_row(g));
  std::vector<std::vector<std::string>> job_rows;
  for (const JobTruth& t : truth.jobs) {
    job_rows.push_back({t.name, std::to_string(t.gpu), std::to_string(t.pid), std::to_string(t.uid),
                        num(t.allocated_seconds), num(t.busy_seconds), fmt::format("{:.6g}", t.memory_byte_seconds),
                        num(t.energy_joules), t.cgroup});
  }
  std::string out = fmt::format("window [{}, {}) s\n\n", to_seconds(truth.from), to_seconds(truth.to));
  out += render(kGpuColumns, gpu_rows);
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

nlohmann::ordered_json scheduler_truth_to_json(const Scenario& scenario, const SchedulerTruth& truth) {
  nlohmann::ordered_json out = header_json(scenario, "scheduler", truth.from, truth.to);
  out["gpus"] = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < truth.gpus.size(); ++i) {
    nlohmann::ordered_json j = gpu_json(scenario, truth.gpus[i]);
    j["foreign_seconds"] = truth.foreign_seconds[i];
    out["gpus"].push_back(std::move(j));
  }
  out["owners"] = nlohmann::ordered_json::array();
  for (const OwnerTruth& o : truth.owners) {
    nlohmann::ordered_json j;
    j["name"] = o.name;
    j["kind"] = o.is_allocation ? "allocation" : "job";
    j["gpu"] = o.gpu;
    j["uuid"] = o.uuid;
    if (o.is_allocation) {
      const Allocation& a = scenario.allocations[o.index];
      j["uid"] = a.uid;
      if (!a.kubernetes.empty()) j["kubernetes"] = kubernetes_json(a.kubernetes);
      if (!a.slurm_job.empty()) j["slurm"] = {{"job_id", a.slurm_job}};
    } else {
      const Job& job = scenario.jobs[o.index];
      add_process_identity(j, pid_on(job, o.gpu), job);
    }
    j["allocated_seconds"] = o.allocated_seconds;
    j["busy_seconds"] = o.busy_seconds;
    j["idle_allocated_seconds"] = o.idle_allocated_seconds;
    out["owners"].push_back(std::move(j));
  }
  out["users"] = users_json(scenario);
  return out;
}

std::string scheduler_truth_to_table(const Scenario& scenario, const SchedulerTruth& truth) {
  std::vector<std::vector<std::string>> gpu_rows;
  std::vector<Column> gpu_columns = kGpuColumns;
  gpu_columns.push_back({"FOREIGN_S", true});
  for (std::size_t i = 0; i < truth.gpus.size(); ++i) {
    gpu_rows.push_back(gpu_row(truth.gpus[i]));
    gpu_rows.back().push_back(num(truth.foreign_seconds[i]));
  }
  std::vector<std::vector<std::string>> owner_rows;
  for (const OwnerTruth& o : truth.owners) {
    std::string who;
    if (o.is_allocation) {
      const Allocation& a = scenario.allocations[o.index];
      who = a.slurm_job.empty()
                ? fmt::format("pod {}/{}/{}", a.kubernetes.namespace_, a.kubernetes.pod, a.kubernetes.container)
                : fmt::format("slurm job {}", a.slurm_job);
    } else {
      who = fmt::format("pid {}", pid_on(scenario.jobs[o.index], o.gpu));
    }
    owner_rows.push_back({o.name, o.is_allocation ? "allocation" : "job", std::to_string(o.gpu),
                          num(o.allocated_seconds), num(o.busy_seconds), num(o.idle_allocated_seconds), who});
  }
  std::string out =
      fmt::format("policy scheduler, window [{}, {}) s\n\n", to_seconds(truth.from), to_seconds(truth.to));
  out += render(gpu_columns, gpu_rows);
  out += "\n";
  out += render({{"OWNER", false},
                 {"KIND", false},
                 {"GPU", true},
                 {"ALLOCATED_S", true},
                 {"BUSY_S", true},
                 {"IDLE_ALLOCATED_S", true},
                 {"WHO", false}},
                owner_rows);
  return out;
}

}  // namespace gpumeter::sim
