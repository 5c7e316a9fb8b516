// `mig:`: the GPUs in MIG mode and their layouts over time, and the checks that tie jobs and
// allocations (`mig: <instance name>`) to the instances.

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <set>

#include "sim/scenario/scenario_parse_parts.h"
#include "sim/scenario/yaml_reader.h"

namespace gpumeter::sim::parse {

namespace {

Micros end_in(const Scenario& s, Micros end) { return std::min(end, s.duration); }

std::string describe_end(Micros end) {
  return end == kForever ? std::string("forever") : fmt::format("{} s", to_seconds(end));
}

std::string profile_names(const std::vector<MigProfile>& profiles) {
  std::string out;
  for (const MigProfile& p : profiles) out += fmt::format("{}{}", out.empty() ? "" : ", ", p.name);
  return out;
}

// Memory slices [start, start + size) taken on one GPU of a model, and compute slices in use.
struct Occupancy {
  explicit Occupancy(const GpuModelSpec& model)
      : memory(mig_memory_slices(model), false), compute_slices(mig_compute_slices(model)) {}

  std::vector<bool> memory;
  unsigned compute_slices;  // the GPU's
  unsigned compute = 0;
  std::vector<bool> index = std::vector<bool>(kMaxMigDevices, false);

  bool fits(unsigned start, unsigned size) const {
    if (start + size > memory.size()) return false;
    for (unsigned i = start; i < start + size; ++i) {
      if (memory[i]) return false;
    }
    return true;
  }
  void take(const MigInstance& m) {
    for (unsigned i = m.placement; i < m.placement + m.memory_slices; ++i) memory[i] = true;
    compute += m.slices;
  }
};

// A new instance of a layout, before it has its placement (unless given) and its MIG index.
struct Fresh {
  YAML::Node node;
  std::string path;
  MigInstance inst;
  bool placed = false;  // its placement was given
};

// One GPU's `layouts`, read in order: what every layout needs from the ones before it.
struct GpuLayouts {
  Scenario& s;
  unsigned gpu;
  const GpuModelSpec& model;
  const std::vector<MigProfile>& profiles;
  const std::string& uuid_seed;
  std::set<std::string>& names;       // instance names on every GPU so far
  std::vector<std::size_t> previous;  // instances of the previous layout
  std::size_t ordinal = 0;            // instances created on the GPU so far, for their UUIDs
};

// `gpu`: a GPU of the scenario, listed once, of a model with MIG profiles.
unsigned read_mig_gpu(const Scenario& s, const MapReader& m) {
  if (s.gpus.empty()) fail_at(m.require("gpu"), m.path("gpu"), "the scenario has no GPUs");
  const auto gpu = static_cast<unsigned>(read_unsigned(m.require("gpu"), m.path("gpu"), 0, s.gpus.size() - 1));
  if (s.mig.of(gpu)) fail_at(m.get("gpu"), m.path("gpu"), fmt::format("GPU {} is listed twice", gpu));
  const GpuModelSpec& model = s.model_of(gpu);
  if (mig_profiles(model).empty()) {
    fail_at(m.get("gpu"), m.path("gpu"),
            fmt::format("GPU {} is a '{}' ({}), for which no MIG profiles are modelled (A100 40GB and 80GB, "
                        "A30 24GB, H100 80GB: architecture ga100 or hopper, datacenter)",
                        gpu, model.id, model.name));
  }
  return gpu;
}

// One entry of a layout's `instances` {name, profile, placement}, named once in the layout
// (`here`), with its profile's slices and, when given, a legal placement.
Fresh read_instance(const GpuLayouts& g, const YAML::Node& node, const std::string& path, Micros at,
                    std::set<std::string>& here) {
  MapReader im(node, path, {"name", "profile", "placement"});
  const std::string name = read_bounded_string(im.require("name"), im.path("name"), 256);
  if (!here.insert(name).second)
    fail_at(im.get("name"), im.path("name"), fmt::format("instance '{}' is listed twice in this layout", name));
  const std::string pname = read_string(im.require("profile"), im.path("profile"));
  const std::vector<MigProfile>& profiles = g.profiles;
  auto p = std::find_if(profiles.begin(), profiles.end(), [&](const MigProfile& x) { return x.name == pname; });
  if (p == profiles.end()) {
    fail_at(im.get("profile"), im.path("profile"),
            fmt::format("unknown profile '{}' for a {} (profiles: {})", pname, g.model.name, profile_names(profiles)));
  }
  Fresh f{node, path, MigInstance{}, im.has("placement")};
  MigInstance& inst = f.inst;
  inst.name = name;
  inst.gpu = g.gpu;
  inst.profile = static_cast<std::size_t>(p - profiles.begin());
  inst.profile_name = p->name;
  inst.slices = p->slices;
  inst.memory_slices = p->memory_slices;
  inst.start = at;
  if (f.placed) {
    inst.placement = static_cast<unsigned>(
        read_unsigned(im.get("placement"), im.path("placement"), 0, mig_memory_slices(g.model) - 1));
    if (std::find(p->placements.begin(), p->placements.end(), inst.placement) == p->placements.end()) {
      std::string legal;
      for (unsigned x : p->placements) legal += fmt::format("{}{}", legal.empty() ? "" : ", ", x);
      fail_at(im.get("placement"), im.path("placement"),
              fmt::format("{} cannot start at memory slice {} (legal: {})", p->name, inst.placement, legal));
    }
  }
  return f;
}

// Places a layout's new instances around those kept (`occ`): explicit placements first; then,
// larger profiles first, the highest legal free placement (an assumption, see
// docs/nvml-behaviour.md), so that e.g. 3g + 2g + 1g + 1g fits. MIG indices go in file order.
void place_fresh(const GpuLayouts& g, Occupancy& occ, std::vector<Fresh>& fresh) {
  std::vector<std::size_t> order;
  for (std::size_t k = 0; k < fresh.size(); ++k) order.push_back(k);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return fresh[a].inst.memory_slices > fresh[b].inst.memory_slices;
  });
  for (int pass = 0; pass < 2; ++pass) {
    for (std::size_t k : order) {
      Fresh& f = fresh[k];
      if ((pass == 0) != f.placed) continue;
      const MigProfile& p = g.profiles[f.inst.profile];
      if (pass == 1) {
        auto free = std::find_if(p.placements.rbegin(), p.placements.rend(),
                                 [&](unsigned st) { return occ.fits(st, p.memory_slices); });
        if (free == p.placements.rend()) {
          fail_at(f.node, f.path,
                  fmt::format("no free placement for {} '{}' in this layout: its memory slices are taken", p.name,
                              f.inst.name));
        }
        f.inst.placement = *free;
      } else if (!occ.fits(f.inst.placement, p.memory_slices)) {
        fail_at(f.node, f.path,
                fmt::format("{} '{}' at memory slice {} overlaps another instance of this layout", p.name, f.inst.name,
                            f.inst.placement));
      }
      if (occ.compute + p.slices > occ.compute_slices) {
        fail_at(f.node, f.path,
                fmt::format("the layout needs {} compute slices with '{}', more than the GPU's {}",
                            occ.compute + p.slices, f.inst.name, occ.compute_slices));
      }
      f.inst.gpu_instance_id = p.gpu_instance_id(f.inst.placement);
      f.inst.compute_instance_id = 0;
      f.inst.memory_bytes = mig_memory_slice_bytes(g.model) * p.memory_slices;
      occ.take(f.inst);
    }
  }
  for (Fresh& f : fresh) {
    f.inst.mig_index = static_cast<unsigned>(std::find(occ.index.begin(), occ.index.end(), false) - occ.index.begin());
    occ.index[f.inst.mig_index] = true;
  }
}

// One entry of `layouts` {at, instances}: instances of the previous layout it names again live
// on, those it does not are destroyed at `at`, and new ones are created then.
MigLayout parse_layout(GpuLayouts& g, const YAML::Node& node, const std::string& path, const MigGpu& mg) {
  MapReader lm(node, path, {"at", "instances"});
  MigLayout layout;
  layout.at = lm.has("at") ? read_duration(lm.get("at"), lm.path("at")) : 0;
  if (!mg.layouts.empty() && layout.at <= mg.layouts.back().at)
    fail_at(lm.get("at"), lm.path("at"), "layouts must be listed by strictly increasing 'at'");
  YAML::Node list = lm.require("instances");
  if (!list.IsSequence()) fail_at(list, lm.path("instances"), "expected a list of instances {name, profile}");
  std::vector<MigInstance>& instances = g.s.mig.instances;
  Occupancy occ(g.model);
  std::vector<std::size_t> kept;
  std::vector<Fresh> fresh;
  std::set<std::string> here;
  for (std::size_t i = 0; i < list.size(); ++i) {
    Fresh f = read_instance(g, list[i], indexed(lm.path("instances"), i), layout.at, here);
    const std::string& name = f.inst.name;
    // The same instance as in the previous layout lives on.
    auto same =
        std::find_if(g.previous.begin(), g.previous.end(), [&](std::size_t k) { return instances[k].name == name; });
    if (same != g.previous.end()) {
      const MigInstance& old = instances[*same];
      if (old.profile_name != f.inst.profile_name || (f.placed && old.placement != f.inst.placement)) {
        fail_at(f.node, f.path,
                fmt::format("instance '{}' was {} at memory slice {}; an instance keeps its profile and placement "
                            "for life: give the new one another name",
                            name, old.profile_name, old.placement));
      }
      kept.push_back(*same);
      occ.take(old);
      occ.index[old.mig_index] = true;
      continue;
    }
    if (g.names.count(name)) {
      const YAML::Node& entry = f.node;
      fail_at(entry["name"], f.path + ".name",
              fmt::format("instance name '{}' is already used by another MIG instance", name));
    }
    fresh.push_back(std::move(f));
  }
  place_fresh(g, occ, fresh);
  // Instances of the previous layout not kept are destroyed now.
  for (std::size_t k : g.previous) {
    if (std::find(kept.begin(), kept.end(), k) == kept.end()) instances[k].end = layout.at;
  }
  for (std::size_t k : kept) layout.instances.push_back(k);
  for (Fresh& f : fresh) {
    if (instances.size() >= kMaxMigInstances)
      fail_at(f.node, f.path, fmt::format("at most {} MIG instances are supported", kMaxMigInstances));
    f.inst.uuid = mig_uuid(g.uuid_seed, g.gpu, g.ordinal++);
    g.names.insert(f.inst.name);
    layout.instances.push_back(instances.size());
    instances.push_back(std::move(f.inst));
  }
  g.previous = layout.instances;
  return layout;
}

// One entry of `mig` {gpu, layouts}.
void parse_gpu_layouts(Scenario& s, const YAML::Node& node, const std::string& path, const std::string& uuid_seed,
                       std::set<std::string>& names) {
  MapReader m(node, path, {"gpu", "layouts"});
  const unsigned gpu = read_mig_gpu(s, m);
  const GpuModelSpec& model = s.model_of(gpu);
  YAML::Node layouts = m.require("layouts");
  if (!layouts.IsSequence() || layouts.size() == 0)
    fail_at(layouts, m.path("layouts"), "expected a non-empty list of layouts {at, instances}");
  GpuLayouts g{s, gpu, model, mig_profiles(model), uuid_seed, names, {}, 0};
  MigGpu mg;
  mg.gpu = gpu;
  for (std::size_t l = 0; l < layouts.size(); ++l)
    mg.layouts.push_back(parse_layout(g, layouts[l], indexed(m.path("layouts"), l), mg));
  s.mig.gpus.push_back(std::move(mg));
}

}  // namespace

void parse_mig(Scenario& s, const YAML::Node& node, const std::string& uuid_seed) {
  if (!node.IsSequence()) fail_at(node, "mig", "expected a list of {gpu, layouts}");
  std::set<std::string> names;
  for (std::size_t i = 0; i < node.size(); ++i) parse_gpu_layouts(s, node[i], indexed("mig", i), uuid_seed, names);
  std::set<std::string> uuids;
  for (const GpuSpec& g : s.gpus) uuids.insert(g.uuid);
  for (const MigInstance& m : s.mig.instances) {
    if (!uuids.insert(m.uuid).second)
      fail_at(node, "mig", fmt::format("MIG UUID {} of '{}' collides; change uuid_seed", m.uuid, m.name));
  }
}

std::size_t resolve_mig(const Scenario& s, const YAML::Node& node, const std::string& path) {
  const std::string name = read_string(node, path);
  const std::size_t i = s.mig.find(name);
  if (i != kNoMigInstance) return i;
  std::string known;
  for (const MigInstance& m : s.mig.instances) known += fmt::format("{}{}", known.empty() ? "" : ", ", m.name);
  fail_at(node, path, fmt::format("unknown MIG instance '{}' (instances: {})", name, known.empty() ? "none" : known));
}

namespace {

// A holder (job or allocation) of `gpus` over [start, end) on instance `mig`.
void check_holder(const Scenario& s, const YAML::Node& node, const std::string& path, const char* what,
                  const std::vector<unsigned>& gpus, std::size_t mig, Micros start, Micros end) {
  if (mig == kNoMigInstance) {
    for (unsigned g : gpus) {
      if (s.mig.enabled(g)) {
        fail_at(node, path, fmt::format("{} on GPU {}, which is in MIG mode: name its instance with 'mig:'", what, g));
      }
    }
    return;
  }
  const MigInstance& m = s.mig.instances[mig];
  if (gpus.size() != 1 || gpus[0] != m.gpu) {
    fail_at(node, path,
            fmt::format("runs on MIG instance '{}' of GPU {}: its gpus must be [{}]", m.name, m.gpu, m.gpu));
  }
  if (start < m.start || end_in(s, end) > end_in(s, m.end)) {
    fail_at(node, path,
            fmt::format("{} over [{} s, {}), outside the life of MIG instance '{}' [{} s, {}): the processes of a "
                        "destroyed instance must have ended",
                        what, to_seconds(start), describe_end(end_in(s, end)), m.name, to_seconds(m.start),
                        describe_end(end_in(s, m.end))));
  }
}

}  // namespace

void check_mig_event(const Scenario& s, const YAML::Node& node, const std::string& path, unsigned gpu, std::size_t mig,
                     Micros at) {
  const MigInstance& m = s.mig.instances[mig];
  if (m.gpu != gpu) fail_at(node, path, fmt::format("MIG instance '{}' is on GPU {}, not GPU {}", m.name, m.gpu, gpu));
  if (at < m.start || at >= m.end) {
    fail_at(node, path,
            fmt::format("at {} s, outside the life of MIG instance '{}' [{} s, {})", to_seconds(at), m.name,
                        to_seconds(m.start), describe_end(m.end)));
  }
}

void check_mig_holders(const Scenario& s, const std::vector<YAML::Node>& job_nodes,
                       const std::vector<YAML::Node>& allocation_nodes) {
  for (std::size_t a = 0; a < s.allocations.size(); ++a) {
    const Allocation& al = s.allocations[a];
    check_holder(s, allocation_nodes[a], indexed("allocations", a), "holds", al.gpus, al.mig, al.start, al.end);
  }
  for (std::size_t j = 0; j < s.jobs.size(); ++j) {
    const Job& job = s.jobs[j];
    if (job.start >= end_in(s, job.end)) continue;
    check_holder(s, job_nodes[j], indexed("jobs", j), "runs", job.gpus, job.mig, job.start, job.end);
    if (job.allocation != kNoAllocation && s.allocations[job.allocation].mig != job.mig) {
      fail_at(job_nodes[j], indexed("jobs", j),
              fmt::format("runs on another MIG instance than its allocation '{}'", s.allocations[job.allocation].name));
    }
  }
  // Memory the jobs of an instance hold at once must fit in it.
  for (std::size_t i = 0; i < s.mig.instances.size(); ++i) {
    const MigInstance& m = s.mig.instances[i];
    std::vector<std::pair<Micros, std::int64_t>> edges;  // ends sort first at equal times
    for (const Job& job : s.jobs) {
      if (job.mig != i || job.start >= end_in(s, job.end)) continue;
      edges.emplace_back(job.start, static_cast<std::int64_t>(job.memory_bytes));
      edges.emplace_back(end_in(s, job.end), -static_cast<std::int64_t>(job.memory_bytes));
    }
    std::sort(edges.begin(), edges.end());
    std::int64_t used = 0;
    for (const auto& [t, delta] : edges) {
      used += delta;
      if (used > static_cast<std::int64_t>(m.memory_bytes)) {
        fail_at(job_nodes.empty() ? YAML::Node() : job_nodes[0], "jobs",
                fmt::format("jobs on MIG instance '{}' would hold {} bytes at {} s, more than its {} bytes", m.name,
                            used, to_seconds(t), m.memory_bytes));
      }
    }
  }
}

}  // namespace gpumeter::sim::parse
