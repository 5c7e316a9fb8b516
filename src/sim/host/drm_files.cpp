#include "sim/host/drm_files.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace gpumeter::sim {

namespace {

constexpr unsigned kFirstDrmFd = 5;  // after stdin, stdout, stderr and a couple of others
constexpr const char* kDevNullFdinfo = "pos:\t0\nflags:\t0100002\nmnt_id:\t26\nino:\t5\n";

Micros run_end(const Scenario& s, const Job& j) { return std::min(j.end, s.duration); }

}  // namespace

DrmFiles::DrmFiles(const Scenario& scenario, Micros period) : scenario_(scenario), period_(period) {
  unsigned card = 0;
  for (unsigned g = 0; g < scenario.gpus.size(); ++g) {
    if (scenario.is_amd(g)) card_[g] = card++;
  }
  for (std::size_t j = 0; j < scenario.jobs.size(); ++j) {
    const Job& job = scenario.jobs[j];
    const Micros end = run_end(scenario, job);
    if (job.start >= end) continue;
    if (std::none_of(job.gpus.begin(), job.gpus.end(), [&](unsigned g) { return card_.count(g) != 0; })) continue;
    edges_.push_back(job.start);
    if (end != kForever) edges_.push_back(end);
    if (!job.graphics) continue;
    graphics_runs_.emplace_back(job.start, end);
    for (unsigned g : job.gpus) {
      if (integrals_.count(g) == 0) integrals_[g].timeline = std::make_unique<GpuTimeline>(scenario, g);
    }
  }
  std::sort(edges_.begin(), edges_.end());
  edges_.erase(std::unique(edges_.begin(), edges_.end()), edges_.end());
}

Micros DrmFiles::next_rewrite_after(Micros t) const {
  for (const auto& [start, end] : graphics_runs_) {
    if (start <= t && t < end) return t + period_;
  }
  return kForever;
}

double DrmFiles::engine_seconds(std::size_t job, std::size_t slot, Micros t) {
  const unsigned gpu = scenario_.jobs[job].gpus[slot];
  auto it = integrals_.find(gpu);
  if (it == integrals_.end()) return 0;
  Integral& in = it->second;
  if (t < in.done) {  // asked about an earlier time: integrate again from the start
    in.done = 0;
    in.seconds.clear();
  }
  // The truth's busy split (sim/truth/truth.h): U × u_j / Σu over each segment.
  in.timeline->for_each_segment(in.done, t, [&](const Segment& s) {
    if (s.sum_percent <= 0) return;
    const double d = to_seconds(s.end - s.start);
    for (const JobShare& j : s.jobs) {
      if (!scenario_.jobs[j.job].graphics) continue;
      in.seconds[j.job] += s.util_percent / 100.0 * static_cast<double>(j.percent) / s.sum_percent * d;
    }
  });
  in.done = std::max(in.done, t);
  auto s = in.seconds.find(job);
  return s == in.seconds.end() ? 0.0 : s->second;
}

std::vector<OpenFile> DrmFiles::files(unsigned pid, std::size_t job_index, Micros t) {
  const Job& job = scenario_.jobs[job_index];
  std::vector<OpenFile> out;
  std::vector<std::size_t> slots;  // entries of job.gpus run by this pid on an AMD GPU
  for (std::size_t i = 0; i < job.gpus.size(); ++i) {
    if (job.pids[i] == pid && card_.count(job.gpus[i]) != 0) slots.push_back(i);
  }
  if (slots.empty()) return out;
  for (unsigned fd = 0; fd < 3; ++fd) out.push_back({fd, "/dev/null", kDevNullFdinfo});
  if (t < job.start || t >= run_end(scenario_, job)) return out;
  for (std::size_t k = 0; k < slots.size(); ++k) {
    const std::size_t slot = slots[k];
    const unsigned gpu = job.gpus[slot];
    const PciAddress& pci = scenario_.gpus[gpu].pci;
    const std::uint64_t client_id = static_cast<std::uint64_t>(job_index) * 1024 + slot + 1;
    const unsigned fd = kFirstDrmFd + 2 * static_cast<unsigned>(k);
    // amdgpu_show_fdinfo() of Linux 6.2-6.x: drm-memory-gtt and -cpu have a space before the tab,
    // and an engine is printed only once it has been used.
    std::string info = fmt::format(
        "pos:\t0\nflags:\t02100002\nmnt_id:\t24\nino:\t{ino}\n"
        "pasid:\t{pasid}\n"
        "drm-driver:\tamdgpu\n"
        "drm-pdev:\t{domain:04x}:{bus:02x}:{dev:02x}.0\n"
        "drm-client-id:\t{client}\n"
        "drm-memory-vram:\t{vram} KiB\n"
        "drm-memory-gtt: \t0 KiB\n"
        "drm-memory-cpu: \t0 KiB\n",
        fmt::arg("ino", 1000 + card_.at(gpu)), fmt::arg("pasid", 32768 + client_id % 32768),
        fmt::arg("domain", pci.domain), fmt::arg("bus", pci.bus), fmt::arg("dev", pci.device),
        fmt::arg("client", client_id), fmt::arg("vram", job.memory_bytes / 1024));
    if (job.graphics) {
      const auto ns = static_cast<std::uint64_t>(std::llround(engine_seconds(job_index, slot, t) * 1e9));
      if (ns > 0) info += fmt::format("drm-engine-gfx:\t{} ns\n", ns);
    }
    const std::string node = fmt::format("/dev/dri/renderD{}", 128 + card_.at(gpu));
    out.push_back({fd, node, info});
    if (job.graphics) out.push_back({fd + 1, node, info});  // a dup: the same client
  }
  return out;
}

}  // namespace gpumeter::sim
