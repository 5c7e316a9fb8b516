#pragma once
// The pricing file of `gpumeter report --pricing` and `gpumeter rules --pricing`: a price per
// GPU-hour by GPU model (allocation), an optional price per busy GPU-hour (utilization-weighted),
// an optional energy price ($/kWh x PUE), effective dates so prices can change mid-period, the
// idle policy and per-project monthly budgets. docs/chargeback.md documents the format;
// deploy/pricing/list-prices.yaml is the shipped default table.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/regex.h"
#include "util/result.h"

namespace gpumeter::pricing {

// Model name that matches any GPU model without an entry of its own.
inline constexpr std::string_view kAnyModel = "*";

struct GpuPrice {
  double gpu_hour = 0;       // per allocated GPU-hour
  double busy_gpu_hour = 0;  // per busy GPU-hour (utilization-weighted), 0 when not used
};

struct EnergyPrice {
  double kwh = 0;  // per kWh at the meter
  double pue = 1;  // facility overhead: charged energy = GPU energy x pue
};

// A MIG instance's own price: per hour that one instance of the profile is allocated.
struct MigPrice {
  double instance_hour = 0;
};

// A GPU in MIG mode is cut into G compute slices, 7 on A100 and H100 and 4 on A30 (NVIDIA's MIG
// User Guide, "Supported MIG Profiles"); the agent exports each GPU's G as gpu_mig_slices, and
// the ledger bills an instance of s slices s/G GPU-seconds per second. No GPU has more than 7:
// that bounds a profile's slices, and is the G taken for a GPU whose own is not known.
inline constexpr int kMaxMigSlicesPerGpu = 7;

// The compute slices of a MIG profile as NVIDIA names it ("MIG Device Names"): the leading
// number, "3g.40gb" -> 3; a compute instance smaller than its GPU instance is "1c.3g.40gb" -> 1.
// nullopt for a name that is not such a profile (the slice counts must lie in 1..7, and a
// compute instance may not exceed its GPU instance).
std::optional<int> mig_compute_slices(std::string_view profile);

// A price per instance-hour of a profile of `profile_slices` compute slices as a price per
// GPU-hour of the ledger's GPU-seconds on a GPU of `gpu_slices`: an hour of the instance is
// profile_slices / gpu_slices GPU-hours, so x gpu_slices / profile_slices.
double mig_gpu_hour_price(double instance_hour, int profile_slices, int gpu_slices);

// A value that takes effect at `from` (unix seconds; -infinity for the first entry when the
// file gives no date) and holds until the next entry's `from`.
template <typename T>
struct Dated {
  double from = 0;
  bool from_set = false;  // false: in effect since the beginning of time
  T value{};
  int line = 0;  // 1-based line in the pricing file, for messages
};

enum class IdlePolicy {
  kSeparate,      // idle GPU time is a line of its own, project "__idle__"
  kSpreadByNode,  // each node's idle cost is spread over that node's owners, by their cost
  kSpreadByPool,  // each pool's idle cost is spread over that pool's owners, by their cost
};

// Time on a faulty GPU (the ledger's series with `fault="true"`, docs/ledger.md, "Faulty GPUs").
enum class FaultyPolicy {
  kBill,     // billed to the owners who held the GPU, like any other time
  kExclude,  // kept out of the owners' charges, on a line of its own, project "__faulty__"
};

struct Pool {
  std::string name;
  std::string node_regex;  // as written; matched against the whole node name, in RE2 as PromQL does
  std::optional<FullMatchRegex> node_pattern;
};

// Where a GPU runs, for its energy's footprint: the facility's power usage effectiveness (the
// energy drawn per joule the GPU uses) and the carbon intensity of the grid, gCO2e per kWh.
struct SiteFactors {
  double pue = 1;
  double gco2e_per_kwh = 0;
};

// Who bills whom, for exports that name them (report --format focus): the platform that sells
// GPU time, the account it bills, and the name of its GPU service. Empty: the export's default.
struct BillingIdentity {
  std::string provider;
  std::string account_id;
  std::string account_name;
  std::string service_name;
};

struct Pricing {
  std::string source;  // the file's path, for messages and report metadata
  std::string currency = "USD";
  // Model name (gpu_info's `model` label, exactly as NVML reports it) or "*".
  // Each list is sorted by `from`, strictly increasing.
  std::map<std::string, std::vector<Dated<GpuPrice>>, std::less<>> gpu_models;
  // Model name or "*" -> MIG profile ("3g.40gb") -> its dated prices, sorted like gpu_models.
  std::map<std::string, std::map<std::string, std::vector<Dated<MigPrice>>, std::less<>>, std::less<>> mig_profiles;
  std::vector<Dated<EnergyPrice>> energy;  // empty: energy is not charged
  IdlePolicy idle_policy = IdlePolicy::kSeparate;
  FaultyPolicy faulty_policy = FaultyPolicy::kBill;
  std::vector<Pool> pools;                             // kSpreadByPool only, in file order
  std::map<std::string, double, std::less<>> budgets;  // project -> budget per calendar month
  BillingIdentity billing;
  // Site (a `cluster` label's value, or "*" for any other) -> its dated factors, sorted like
  // gpu_models. Empty: no footprint is reported.
  std::map<std::string, std::vector<Dated<SiteFactors>>, std::less<>> sites;

  // The price in effect at unix time `t` for `model`, falling back to "*"; nullopt when
  // neither has an entry in effect at `t`.
  std::optional<GpuPrice> gpu_price(std::string_view model, double t) const;
  // The price per instance-hour of `profile` on a GPU of `model` in effect at `t`: the model's
  // own entry, else the "*" entry; nullopt when neither has one in effect (the instance is then
  // priced by its share of the GPU's price).
  std::optional<MigPrice> mig_price(std::string_view model, std::string_view profile, double t) const;
  // The energy price in effect at `t`; nullopt when energy is not charged at `t`.
  std::optional<EnergyPrice> energy_price(double t) const;
  // The factors in effect at `t` for the site named `cluster`, falling back to "*".
  std::optional<SiteFactors> site(std::string_view cluster, double t) const;
  // Every effective date strictly inside (from, to), sorted and unique: a report splits its
  // period there so no step straddles a price change.
  std::vector<double> change_points(double from, double to) const;
  // The first pool whose regex matches the whole node name, or nullopt.
  std::optional<std::string> pool_for(std::string_view node) const;
};

// An effective date: "YYYY-MM-DD" (UTC midnight) or RFC 3339 with "Z" or a numeric offset
// ("2026-07-01T00:00:00Z", "2026-07-01T02:00:00+02:00", fractions of a second allowed).
// Unix seconds, or nullopt when the text is not such a date.
std::optional<double> parse_timestamp(std::string_view text);
// RFC 3339 in UTC, "2026-07-01T00:00:00Z" (fractions of a second are dropped), for messages
// and comments.
std::string format_timestamp(double unix_seconds);

// Parses and validates. Every error reads "source:line:col: path: what is wrong".
Result<Pricing> parse_pricing(std::string_view text, std::string_view source);
Result<Pricing> load_pricing(const std::string& path);

std::string_view to_string(IdlePolicy policy);
std::string_view to_string(
    FaultyPolicy policy);  // "bill", "exclude"  // "separate", "spread-by-node", "spread-by-pool"

}  // namespace gpumeter::pricing
