#include "report/pricer.h"

#include <fmt/format.h>

namespace gpumeter::report {

Pricer::Pricer(const pricing::Pricing& pricing, std::vector<double> timeline)
    : pricing_(pricing), timeline_(std::move(timeline)), steps_(timeline_.empty() ? 0 : timeline_.size() - 1) {}

std::optional<pricing::GpuPrice> Pricer::gpu_price(const std::string& model, const std::string& uuid,
                                                   std::size_t step) {
  auto& cache = gpu_cache_[model];
  if (cache.empty()) {
    cache.resize(steps_);
    for (std::size_t i = 0; i < steps_; ++i) cache[i] = pricing_.gpu_price(model, mid(i + 1));
  }
  if (!cache[step - 1]) missing_prices_[model].insert(uuid);
  return cache[step - 1];
}

std::optional<double> Pricer::allocation(const std::string& model, const std::string& mig_profile, int mig_slices,
                                         const std::string& uuid, std::size_t step, double gpu_seconds) {
  auto slices = mig_profile.empty() ? std::nullopt : pricing::mig_compute_slices(mig_profile);
  if (slices && !pricing_.mig_profiles.empty()) {
    auto& cache = mig_cache_[{model, mig_profile}];
    if (cache.empty()) {
      cache.resize(steps_);
      for (std::size_t i = 0; i < steps_; ++i) {
        if (auto p = pricing_.mig_price(model, mig_profile, mid(i + 1))) cache[i] = p->instance_hour;
      }
    }
    // An instance of s compute slices on a GPU of G accrues s/G GPU-seconds per second.
    const int gpu_slices = mig_slices > 0 ? mig_slices : pricing::kMaxMigSlicesPerGpu;
    if (cache[step - 1]) {
      return gpu_seconds / 3600 * pricing::mig_gpu_hour_price(*cache[step - 1], *slices, gpu_slices);
    }
  }
  auto price = gpu_price(model, uuid, step);
  if (!price) return std::nullopt;
  return gpu_seconds / 3600 * price->gpu_hour;
}

std::optional<double> Pricer::utilization(const std::string& model, const std::string& uuid, std::size_t step,
                                          double gpu_seconds) {
  auto price = gpu_price(model, uuid, step);
  if (!price) return std::nullopt;
  return gpu_seconds / 3600 * price->busy_gpu_hour;
}

double Pricer::energy(std::size_t step, double joules) {
  if (energy_cache_.empty()) {
    energy_cache_.resize(steps_);
    for (std::size_t i = 0; i < steps_; ++i) {
      auto p = pricing_.energy_price(mid(i + 1));
      energy_cache_[i] = p ? p->kwh * p->pue / 3.6e6 : 0.0;  // per joule
    }
  }
  return joules * energy_cache_[step - 1];
}

std::optional<pricing::SiteFactors> Pricer::site(const std::string& cluster, std::size_t step) {
  auto [it, inserted] = site_cache_.try_emplace(cluster);
  if (inserted) {
    it->second.resize(steps_);
    for (std::size_t i = 0; i < steps_; ++i) it->second[i] = pricing_.site(cluster, mid(i + 1));
  }
  const auto& f = it->second[step - 1];
  if (!f) missing_sites_.insert(cluster);
  return f;
}

Error Pricer::missing_price_error() const {
  if (missing_prices_.empty()) {
    std::string sites;
    for (const auto& s : missing_sites_) sites += (sites.empty() ? "\"" : ", \"") + s + "\"";
    return Error{2, fmt::format("{}: no sites entry in effect for the cluster label value {} during the period; add "
                                "it or a \"*\" entry under sites (\"\" is a GPU without a cluster label)",
                                pricing_.source, sites)};
  }
  std::string what;
  for (const auto& [model, uuids] : missing_prices_) {
    if (!what.empty()) what += "; ";
    what += fmt::format("\"{}\" ({} GPU{}, e.g. {})", model.empty() ? "unknown model (no gpu_info)" : model,
                        uuids.size(), uuids.size() == 1 ? "" : "s", *uuids.begin());
  }
  return Error{2, fmt::format("{}: no price for GPU model {} during the period; add the model or a \"*\" "
                              "entry under gpu_models",
                              pricing_.source, what)};
}

}  // namespace gpumeter::report
