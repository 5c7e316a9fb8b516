#pragma once
// The price of one step of one ledger series in `gpumeter report`: a GPU's allocated and busy
// time at its model's price per GPU-hour, a MIG instance's allocated time at its profile's price
// per instance-hour where the pricing file sets one (else at its share of the GPU's price, which
// the ledger's GPU-seconds already are), energy at the price per kWh. Prices are looked up at
// the middle of each step; the timeline is split at every effective date, so no step straddles
// a price change.

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "pricing/pricing.h"
#include "util/result.h"

namespace gpumeter::report {

class Pricer {
 public:
  Pricer(const pricing::Pricing& pricing, std::vector<double> timeline);

  // Cost of `gpu_seconds` allocated in step `step` (1-based) on GPU `uuid` of `model`, on the
  // MIG profile `mig_profile` ("" for a whole GPU) of a GPU of `mig_slices` compute slices
  // (its gpu_mig_slices; 0 when unknown, then pricing::kMaxMigSlicesPerGpu); nullopt (and
  // noted) when no price applies.
  std::optional<double> allocation(const std::string& model, const std::string& mig_profile, int mig_slices,
                                   const std::string& uuid, std::size_t step, double gpu_seconds);
  // Cost of busy GPU-seconds at the model's price per busy GPU-hour.
  std::optional<double> utilization(const std::string& model, const std::string& uuid, std::size_t step,
                                    double gpu_seconds);
  double energy(std::size_t step, double joules);
  // The site factors of the `cluster` label's value in step `step` (pricing file `sites`);
  // nullopt (and noted) when neither it nor "*" has factors in effect.
  std::optional<pricing::SiteFactors> site(const std::string& cluster, std::size_t step);

  // Models used without a price in effect, with the GPUs that used them, or sites without
  // factors.
  bool missing() const { return !missing_prices_.empty() || !missing_sites_.empty(); }
  Error missing_price_error() const;

 private:
  std::optional<pricing::GpuPrice> gpu_price(const std::string& model, const std::string& uuid, std::size_t step);
  double mid(std::size_t step) const { return (timeline_[step - 1] + timeline_[step]) / 2; }

  const pricing::Pricing& pricing_;
  std::vector<double> timeline_;
  std::size_t steps_;
  std::map<std::string, std::vector<std::optional<pricing::GpuPrice>>> gpu_cache_;
  // (model, profile) -> per step: the price per instance-hour, or nullopt where the share applies.
  std::map<std::pair<std::string, std::string>, std::vector<std::optional<double>>> mig_cache_;
  std::vector<double> energy_cache_;
  std::map<std::string, std::vector<std::optional<pricing::SiteFactors>>> site_cache_;
  std::map<std::string, std::set<std::string>> missing_prices_;
  std::set<std::string> missing_sites_;
};

}  // namespace gpumeter::report
