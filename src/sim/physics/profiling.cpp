#include "sim/physics/profiling.h"

#include <algorithm>
#include <map>
#include <cmath>

namespace gpumeter::sim {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// What a live process's kernel does while it runs: burn's spin kernel, one block of 256
// threads per SM reading %globaltimer, so every SM is active at 256 of 2048 threads, and no
// tensor, memory or floating-point work (an assumption about the kernel, docs/simulator.md).
const ProfileIntegrator::JobRates kLiveRates{JobProfile{1.0, 0.125, 0.0, 0.0, 0.0, 0.0, 0.0}, 0.0, 0.0};

// a += r * dt for every member.
void add_scaled(ProfileTotals& a, const ProfileTotals& r, double dt) {
  a.graphics += r.graphics * dt;
  a.sm += r.sm * dt;
  a.occupancy += r.occupancy * dt;
  a.tensor += r.tensor * dt;
  a.dram += r.dram * dt;
  a.fp64 += r.fp64 * dt;
  a.fp32 += r.fp32 * dt;
  a.fp16 += r.fp16 * dt;
  a.encoder += r.encoder * dt;
  a.decoder += r.decoder * dt;
  a.pcie_tx += r.pcie_tx * dt;
  a.pcie_rx += r.pcie_rx * dt;
  for (std::size_t l = 0; l < a.nvlink_tx.size(); ++l) {
    a.nvlink_tx[l] += r.nvlink_tx[l] * dt;
    a.nvlink_rx[l] += r.nvlink_rx[l] * dt;
  }
}

}  // namespace

double ProfileTotals::nvlink_tx_total(unsigned links) const {
  double sum = 0;
  for (unsigned l = 0; l < links && l < nvlink_tx.size(); ++l) sum += nvlink_tx[l];
  return sum;
}

double ProfileTotals::nvlink_rx_total(unsigned links) const {
  double sum = 0;
  for (unsigned l = 0; l < links && l < nvlink_rx.size(); ++l) sum += nvlink_rx[l];
  return sum;
}

bool gpm_supported(const GpuModelSpec& model) {
  return model.vendor == "nvidia" && (model.architecture == "hopper" || model.architecture == "blackwell");
}

ProfileIntegrator::ProfileIntegrator(const Scenario& scenario, const GpuTimeline& timeline, unsigned gpu,
                                     std::size_t instance)
    : timeline_(timeline),
      instance_(instance),
      nvlink_(scenario.model_of(gpu).nvlink),
      pcie_tx_rate_(scenario.model_of(gpu).pcie_tx_bytes_per_second),
      pcie_rx_rate_(scenario.model_of(gpu).pcie_rx_bytes_per_second),
      reloads_(scenario.driver_reloads) {
  for (const MigInstance& m : scenario.mig.instances)
    instance_shares_.push_back(m.slices / static_cast<double>(mig_compute_slices(scenario.model_of(m.gpu))));
  for (const Job& j : scenario.jobs) {
    JobRates r;
    r.profile = j.profile;
    r.nvlink_tx = j.nvlink ? j.nvlink->tx_bytes_per_second : nvlink_.tx_bytes_per_second;
    r.nvlink_rx = j.nvlink ? j.nvlink->rx_bytes_per_second : nvlink_.rx_bytes_per_second;
    jobs_.push_back(r);
  }
  for (const NvlinkFault& f : scenario.nvlink_faults) {
    if (f.gpu != gpu) continue;
    faults_.push_back(f);
    if (!f.down) continue;
    edges_.push_back(f.at);
    if (f.duration != kForever) edges_.push_back(f.at + f.duration);
  }
  std::sort(edges_.begin(), edges_.end());
  std::sort(reloads_.begin(), reloads_.end());
  current_ = piece_at(0);
}

bool ProfileIntegrator::link_up(unsigned link, Micros t) const {
  if (link >= nvlink_.links) return false;
  for (const NvlinkFault& f : faults_) {
    if (f.down && f.link == link && t >= f.at && (f.duration == kForever || t - f.at < f.duration)) return false;
  }
  return true;
}

ProfileIntegrator::Piece ProfileIntegrator::piece_at(Micros t) const {
  const Segment s = timeline_.segment_at(t);
  Piece p;
  p.start = t;
  p.end = s.end;
  auto edge = std::upper_bound(edges_.begin(), edges_.end(), t);
  if (edge != edges_.end()) p.end = std::min(p.end, *edge);
  const double denom = std::max(100, s.sum_percent);
  // On a GPU in MIG mode a job shares its instance's time with the instance's other jobs only,
  // and the whole GPU counts an instance by its compute slices' share (of the GPU's), as the MIG
  // parent's utilization does (timeline.h). An assumption: NVML does not say how the whole GPU's
  // GPM metrics weigh its instances. An instance's own integrator counts it unweighted.
  std::map<std::size_t, int> instance_percent;
  for (const JobShare& js : s.jobs) {
    if (js.mig != kNoMigInstance) instance_percent[js.mig] += js.percent;
  }
  double busy = 0, tx = 0, rx = 0;
  for (const JobShare& js : s.jobs) {
    if (instance_ != kNoMigInstance && js.mig != instance_) continue;
    double b = js.percent / denom;
    if (js.mig != kNoMigInstance) {
      b = js.percent / static_cast<double>(std::max(100, instance_percent[js.mig]));
      if (instance_ == kNoMigInstance) b *= instance_shares_[js.mig];
    }
    const JobRates& r = js.job == kLiveJob ? kLiveRates : jobs_[js.job];
    busy += b;
    p.rate.sm += b * r.profile.sm;
    p.rate.occupancy += b * r.profile.occupancy;
    p.rate.tensor += b * r.profile.tensor;
    p.rate.dram += b * r.profile.dram;
    p.rate.fp64 += b * r.profile.fp64;
    p.rate.fp32 += b * r.profile.fp32;
    p.rate.fp16 += b * r.profile.fp16;
    p.rate.encoder += b * r.profile.encoder;
    p.rate.decoder += b * r.profile.decoder;
    tx += b * r.nvlink_tx;
    rx += b * r.nvlink_rx;
  }
  p.rate.graphics = busy;
  if (instance_ != kNoMigInstance) return p;  // PCIe and NVLink are the whole GPU's
  p.rate.pcie_tx = busy * pcie_tx_rate_;
  p.rate.pcie_rx = busy * pcie_rx_rate_;
  unsigned up = 0;
  for (unsigned l = 0; l < nvlink_.links; ++l) up += link_up(l, t) ? 1 : 0;
  if (up > 0) {
    for (unsigned l = 0; l < nvlink_.links; ++l) {
      if (!link_up(l, t)) continue;
      p.rate.nvlink_tx[l] = tx / up;
      p.rate.nvlink_rx[l] = rx / up;
    }
  }
  return p;
}

ProfileTotals ProfileIntegrator::at(Micros t) {
  t = std::max<Micros>(t, 0);
  if (timeline_.version() != version_) {
    version_ = timeline_.version();  // live processes changed: re-read the piece we stand in
    current_ = piece_at(current_.start);
  }
  if (t < current_.start) {
    current_ = piece_at(0);
    at_start_ = ProfileTotals{};
  }
  while (t >= current_.end) {
    add_scaled(at_start_, current_.rate, to_seconds(current_.end - current_.start));
    current_ = piece_at(current_.end);
  }
  ProfileTotals out = at_start_;
  add_scaled(out, current_.rate, to_seconds(t - current_.start));
  return out;
}

Micros ProfileIntegrator::last_reload(Micros t) const {
  auto it = std::upper_bound(reloads_.begin(), reloads_.end(), t);
  return it == reloads_.begin() ? 0 : *std::prev(it);
}

const ProfileTotals& ProfileIntegrator::at_reload(Micros reload) {
  for (const auto& [when, totals] : reload_totals_) {
    if (when == reload) return totals;
  }
  reload_totals_.emplace_back(reload, at(reload));
  return reload_totals_.back().second;
}

std::uint64_t ProfileIntegrator::nvlink_tx_kib(unsigned link, Micros t) {
  const Micros reload = last_reload(t);
  const double base = reload > 0 ? at_reload(reload).nvlink_tx[link] : 0.0;
  const double bytes = at(t).nvlink_tx[link] - base;
  return static_cast<std::uint64_t>(std::floor(std::max(bytes, 0.0) / 1024.0));
}

std::uint64_t ProfileIntegrator::nvlink_rx_kib(unsigned link, Micros t) {
  const Micros reload = last_reload(t);
  const double base = reload > 0 ? at_reload(reload).nvlink_rx[link] : 0.0;
  const double bytes = at(t).nvlink_rx[link] - base;
  return static_cast<std::uint64_t>(std::floor(std::max(bytes, 0.0) / 1024.0));
}

std::uint64_t ProfileIntegrator::nvlink_errors(unsigned link, NvlinkErrorType type, Micros t) const {
  const Micros reload = last_reload(t);
  std::uint64_t n = 0;
  for (const NvlinkFault& f : faults_) {
    if (!f.down && f.link == link && f.type == type && f.at <= t && f.at >= reload) n += f.count;
  }
  return n;
}

ProfileAverages profile_averages(const ProfileTotals& a, const ProfileTotals& b, double seconds, unsigned links) {
  ProfileAverages out;
  if (seconds <= 0) return out;
  auto pct = [&](double x, double y) { return std::clamp(100.0 * (y - x) / seconds, 0.0, 100.0); };
  auto mibs = [&](double x, double y) { return std::max(0.0, (y - x) / seconds / kMiB); };
  out.graphics = pct(a.graphics, b.graphics);
  out.sm = pct(a.sm, b.sm);
  out.occupancy = pct(a.occupancy, b.occupancy);
  out.tensor = pct(a.tensor, b.tensor);
  out.dram = pct(a.dram, b.dram);
  out.fp64 = pct(a.fp64, b.fp64);
  out.fp32 = pct(a.fp32, b.fp32);
  out.fp16 = pct(a.fp16, b.fp16);
  out.pcie_tx = mibs(a.pcie_tx, b.pcie_tx);
  out.pcie_rx = mibs(a.pcie_rx, b.pcie_rx);
  out.nvlink_tx = mibs(a.nvlink_tx_total(links), b.nvlink_tx_total(links));
  out.nvlink_rx = mibs(a.nvlink_rx_total(links), b.nvlink_rx_total(links));
  return out;
}

}  // namespace gpumeter::sim
