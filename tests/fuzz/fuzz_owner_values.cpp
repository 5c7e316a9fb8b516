// What a GPU's users control and the agent writes out: an allow-listed environment value, the
// process name (stat's comm), the /proc/<pid>/cgroup text and an HPC job mapping file. Whatever
// the bytes, the owner built from them is valid UTF-8 within the label bound, and the state
// file's JSON (written as the agent writes it; nlohmann throws on bytes that are not UTF-8) and
// the JSON API's answers are written and read back with the same values.
//
// Input: a selector byte (which attribute names the project), then the four values separated
// by 0x1e.
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attribution/cgroup.h"
#include "attribution/hpc_jobs.h"
#include "attribution/owner_builder.h"
#include "attribution/procfs.h"
#include "fuzz_check.h"
#include "ledger/ledger.h"
#include "render/api_v1.h"
#include "util/utf8.h"

using namespace gpumeter;

namespace {

std::vector<std::string_view> fields(std::string_view text, std::size_t n) {
  std::vector<std::string_view> out;
  while (out.size() + 1 < n) {
    const std::size_t at = text.find('\x1e');
    if (at == std::string_view::npos) break;
    out.push_back(text.substr(0, at));
    text.remove_prefix(at + 1);
  }
  out.push_back(text);
  out.resize(n);
  return out;
}

const ProjectResolver& resolver(unsigned source) {
  static const std::vector<ProjectResolver> kResolvers = [] {
    std::vector<ProjectResolver> out;
    for (const char* s : {"env.GPUMETER_PROJECT", "comm", "cgroup", "hpc_job", "systemd_unit"}) {
      // A template that can lengthen the value past the label bound, and \C, which matches a byte
      // that is not UTF-8 where . would not.
      auto r = ProjectResolver::create({{s, std::string("(\\C*)"), std::string("p-$1-$1"), std::nullopt}}, "d");
      FUZZ_CHECK(r.ok());
      out.push_back(std::move(*r));
    }
    return out;
  }();
  return kResolvers[source % kResolvers.size()];
}

void check_label(const std::string& v) {
  FUZZ_CHECK(is_valid_utf8(v));
  FUZZ_CHECK(v.size() <= kMaxLabelValueBytes);
}

void check_owner(const OwnerLabels& o) {
  for (const std::string* v : {&o.project, &o.user, &o.namespace_, &o.pod, &o.container, &o.hpc_job}) check_label(*v);
}

// The state file: the ledger as a checkpoint writes it, read back.
void check_state_file(const OwnerLabels& owner) {
  GpuLedger ledger;
  for (std::int64_t t : {1'000'000, 2'000'000}) {
    LedgerTick tick;
    tick.wall_us = t;
    tick.processes = {LedgerProcess{.pid = 1, .owner = owner, .memory_bytes = 1}};
    tick.utilization_ratio = 0.5;
    (void)ledger.advance(tick);
  }
  const std::string text = ledger.to_json().dump();  // strict, as a checkpoint was
  auto back = GpuLedger::from_json(nlohmann::json::parse(text), {});
  FUZZ_CHECK(back.ok());
  FUZZ_CHECK(back->owners().contains(owner));
}

// The JSON API: both answers parse, with the owner as built.
void check_api(const OwnerLabels& owner) {
  auto snap = std::make_shared<Snapshot>();
  GpuSnapshot g;
  g.identity.uuid = "GPU-1";
  g.up = true;
  g.processes.push_back(ProcessSnapshot{.pid = 1, .owner = owner});
  snap->gpus.push_back(std::move(g));
  const PreparedApi api(snap);
  const auto all = nlohmann::json::parse(std::string(api.gpus()) + render_api_tail(0));
  FUZZ_CHECK(all["gpus"][0]["owners"][0]["project"].get<std::string>() == owner.project);
  const auto one = nlohmann::json::parse(std::string(*api.gpu("GPU-1")) + render_api_tail(0));
  FUZZ_CHECK(one["gpu"]["processes"][0]["owner"] == all["gpus"][0]["owners"][0]);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto [selector, text] = fuzz::select(data, size, 5);
  const auto f = fields(text, 4);
  ProcessInfo p;
  p.pid = 1;
  p.user = "u";
  static const std::vector<std::string> kAllow = {"GPUMETER_PROJECT", "SLURM_JOB_ID"};
  EnvironFilter env(kAllow);  // keeps a reference
  for (const char* name : {"GPUMETER_PROJECT=", "SLURM_JOB_ID="}) {
    env.feed(name);
    env.feed(f[0]);
    env.feed(std::string_view("\0", 1));
  }
  p.env = env.finish();
  p.comm = std::string(f[1]);
  p.cgroup = parse_cgroup(f[2]);
  const std::vector<std::string> jobs = parse_hpc_job_file(f[3]).jobs;

  const ProjectResolver& rules = resolver(selector);
  const OwnerLabels owner = build_owner(p, nullptr, jobs, rules);
  check_owner(owner);
  const OwnerLabels allocation = build_allocation_owner(nullptr, jobs.empty() ? "" : jobs.front(), p.comm, rules);
  check_owner(allocation);
  check_state_file(owner);
  check_api(owner);
  return 0;
}
