#include "pricing/pricing.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <utility>

#include "util/yaml_reader.h"

namespace gpumeter::pricing {

namespace {

namespace chrono = std::chrono;

constexpr std::size_t kMaxPricingBytes = 1 << 20;
// The largest price per GPU-hour, instance-hour or kWh: far above any real price in any
// currency (an H100 hour is about 3,000,000 in the currency with the most digits to the
// dollar), so that an amount out of range, such as 1e308, is refused with its place in the file.
constexpr double kMaxPrice = 1e9;
// The largest monthly budget, for the same reason.
constexpr double kMaxBudget = 1e15;
// The largest carbon intensity, gCO2e per kWh: coal-fired generation is about 1,000 (IPCC AR5,
// WG3, Annex III, lifecycle median 820), so 2,000 leaves room and still catches kg typed as g.
constexpr double kMaxCarbonIntensity = 2000;
constexpr double kSecondsPerDay = 86400;

constexpr std::array<std::pair<IdlePolicy, std::string_view>, 3> kIdlePolicies = {{
    {IdlePolicy::kSeparate, "separate"},
    {IdlePolicy::kSpreadByNode, "spread-by-node"},
    {IdlePolicy::kSpreadByPool, "spread-by-pool"},
}};

constexpr std::array<std::pair<FaultyPolicy, std::string_view>, 2> kFaultyPolicies = {{
    {FaultyPolicy::kBill, "bill"},
    {FaultyPolicy::kExclude, "exclude"},
}};

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Exactly `n` decimal digits at `pos`.
std::optional<int> read_digits(std::string_view s, std::size_t pos, std::size_t n) {
  if (pos + n > s.size()) return std::nullopt;
  int v = 0;
  for (std::size_t i = pos; i < pos + n; ++i) {
    if (!is_digit(s[i])) return std::nullopt;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

// Unix seconds of a valid "YYYY-MM-DD" at UTC midnight.
std::optional<double> parse_date(std::string_view s) {
  auto y = read_digits(s, 0, 4);
  auto m = read_digits(s, 5, 2);
  auto d = read_digits(s, 8, 2);
  if (s.size() < 10 || s[4] != '-' || s[7] != '-' || !y || !m || !d) return std::nullopt;
  chrono::year_month_day date{chrono::year{*y}, chrono::month{static_cast<unsigned>(*m)},
                              chrono::day{static_cast<unsigned>(*d)}};
  if (!date.ok()) return std::nullopt;
  return static_cast<double>(chrono::sys_days(date).time_since_epoch().count()) * kSecondsPerDay;
}

// "Z" or "+HH:MM" / "-HH:MM": seconds east of UTC.
std::optional<double> parse_utc_offset(std::string_view s) {
  if (s == "Z" || s == "z") return 0.0;
  auto h = read_digits(s, 1, 2);
  auto m = read_digits(s, 4, 2);
  if (s.size() != 6 || (s[0] != '+' && s[0] != '-') || s[3] != ':' || !h || !m || *h > 23 || *m > 59) {
    return std::nullopt;
  }
  double seconds = *h * 3600.0 + *m * 60.0;
  return s[0] == '-' ? -seconds : seconds;
}

// "HH:MM:SS[.frac]" followed by the UTC offset: seconds since midnight UTC of the same date.
std::optional<double> parse_time_of_day(std::string_view s) {
  auto h = read_digits(s, 0, 2);
  auto m = read_digits(s, 3, 2);
  auto sec = read_digits(s, 6, 2);
  // Leap second 60 is left out: Prometheus and Go's time package reject it too.
  if (s.size() < 8 || s[2] != ':' || s[5] != ':' || !h || !m || !sec || *h > 23 || *m > 59 || *sec > 59) {
    return std::nullopt;
  }
  double t = *h * 3600.0 + *m * 60.0 + *sec;
  std::size_t pos = 8;
  if (pos < s.size() && s[pos] == '.') {
    std::size_t end = pos + 1;
    while (end < s.size() && is_digit(s[end])) ++end;
    if (end == pos + 1) return std::nullopt;
    t += *units::parse_double(fmt::format("0{}", s.substr(pos, end - pos)));
    pos = end;
  }
  auto offset = parse_utc_offset(s.substr(pos));
  if (!offset) return std::nullopt;
  return t - *offset;
}

double read_number(const YAML::Node& node, const std::string& path) {
  return read_double(node, path, std::numeric_limits<double>::lowest(), std::numeric_limits<double>::max());
}

// A value above `max` is taken for a mistake (a typo such as 1e308 would bill infinity).
void check_at_most(const YAML::Node& node, const std::string& path, double v, double max) {
  if (v > max) {
    fail_at(
        node, path,
        fmt::format("must be at most {:.0f}, got '{}' (a larger amount is taken for a mistake)", max, node.Scalar()));
  }
}

// A price or a rate: never negative, and at most kMaxPrice.
double read_price(const YAML::Node& node, const std::string& path) {
  double v = read_number(node, path);
  if (v < 0) fail_at(node, path, fmt::format("must be at least 0, got '{}'", node.Scalar()));
  check_at_most(node, path, v, kMaxPrice);
  return v;
}

double read_effective_date(const YAML::Node& node, const std::string& path) {
  const std::string& s = read_scalar(node, path, "a date");
  auto t = parse_timestamp(s);
  if (!t) {
    fail_at(node, path,
            fmt::format("expected a date such as 2026-07-01 or 2026-07-01T00:00:00Z (RFC 3339), got '{}'", s));
  }
  return *t;
}

GpuPrice read_gpu_price(const MapReader& m) {
  GpuPrice p;
  p.gpu_hour = read_price(m.require("gpu_hour"), m.path("gpu_hour"));
  if (m.has("busy_gpu_hour")) p.busy_gpu_hour = read_price(m.get("busy_gpu_hour"), m.path("busy_gpu_hour"));
  return p;
}

EnergyPrice read_energy_price(const MapReader& m) {
  EnergyPrice p;
  p.kwh = read_price(m.require("kwh"), m.path("kwh"));
  if (m.has("pue")) p.pue = read_double(m.get("pue"), m.path("pue"), 1, 3);
  return p;
}

// One dated entry; `previous` is the entry before it in the same list, if any.
template <typename T, typename ReadValue>
Dated<T> read_dated_entry(const YAML::Node& node, const std::string& path, std::initializer_list<std::string_view> keys,
                          ReadValue read_value, const Dated<T>* previous) {
  MapReader m(node, path, keys);
  Dated<T> d;
  d.line = node.Mark().line + 1;
  if (m.has("from")) {
    d.from = read_effective_date(m.get("from"), m.path("from"));
    d.from_set = true;
  } else if (previous != nullptr) {
    fail_at(node, path, "missing required key 'from' (only the first entry may leave it out)");
  }
  if (previous != nullptr && previous->from_set && d.from <= previous->from) {
    fail_at(m.get("from"), m.path("from"),
            fmt::format("must be later than the previous entry's from ({})", format_timestamp(previous->from)));
  }
  d.value = read_value(m);
  return d;
}

// One mapping (a single price, in effect from `from` or from the beginning of time), or a
// list of dated entries in increasing order of `from`.
template <typename T, typename ReadValue>
std::vector<Dated<T>> read_dated(const YAML::Node& node, const std::string& path,
                                 std::initializer_list<std::string_view> keys, ReadValue read_value,
                                 std::string_view example) {
  std::vector<Dated<T>> list;
  if (node.IsMap()) {
    list.push_back(read_dated_entry<T>(node, path, keys, read_value, nullptr));
    return list;
  }
  if (!node.IsSequence() || node.size() == 0) {
    fail_at(node, path, fmt::format("expected a price such as {} or a non-empty list of dated prices", example));
  }
  for (std::size_t i = 0; i < node.size(); ++i) {
    list.push_back(
        read_dated_entry<T>(node[i], indexed(path, i), keys, read_value, list.empty() ? nullptr : &list.back()));
  }
  return list;
}

void parse_currency(const YAML::Node& node, Pricing& p) {
  std::string c = read_string(node, "currency");
  bool ok = c.size() == 3 && std::all_of(c.begin(), c.end(), [](char ch) { return ch >= 'A' && ch <= 'Z'; });
  if (!ok) {
    fail_at(node, "currency", fmt::format("expected a 3-letter ISO 4217 code such as USD or EUR, got '{}'", c));
  }
  p.currency = std::move(c);
}

void parse_gpu_models(const YAML::Node& node, Pricing& p) {
  const std::string path = "gpu_models";
  auto entries = read_entries(node, path);
  if (entries.empty()) {
    fail_at(node, path, "must price at least one GPU model (the model \"*\" prices every other model)");
  }
  for (const MapEntry& e : entries) {
    if (e.key.empty()) fail_at(e.key_node, path, "a model name must not be empty");
    p.gpu_models.emplace(e.key, read_dated<GpuPrice>(e.value, e.path, {"from", "gpu_hour", "busy_gpu_hour"},
                                                     read_gpu_price, "{gpu_hour: 2.5}"));
  }
}

MigPrice read_mig_price(const MapReader& m) {
  return MigPrice{read_price(m.require("instance_hour"), m.path("instance_hour"))};
}

// mig_profiles: model (or "*") -> profile -> a dated price per instance-hour.
void parse_mig_profiles(const YAML::Node& node, Pricing& p) {
  const std::string path = "mig_profiles";
  for (const MapEntry& model : read_entries(node, path)) {
    if (model.key.empty()) fail_at(model.key_node, path, "a model name must not be empty");
    auto profiles = read_entries(model.value, model.path);
    if (profiles.empty()) {
      fail_at(model.value, model.path, "expected MIG profiles and their prices, such as 3g.40gb: {instance_hour: 2.5}");
    }
    auto& by_profile = p.mig_profiles[model.key];
    for (const MapEntry& e : profiles) {
      if (!mig_compute_slices(e.key)) {
        fail_at(e.key_node, model.path,
                fmt::format("'{}' is not a MIG profile name such as 1g.10gb, 3g.40gb or 1c.3g.40gb (compute and "
                            "GPU slices from 1 to {}, the compute slices no more than the GPU slices)",
                            e.key, kMaxMigSlicesPerGpu));
      }
      by_profile.emplace(e.key, read_dated<MigPrice>(e.value, e.path, {"from", "instance_hour"}, read_mig_price,
                                                     "{instance_hour: 2.5}"));
    }
  }
}

IdlePolicy read_idle_policy(const YAML::Node& node, const std::string& path) {
  std::string s = read_string(node, path);
  for (const auto& [policy, name] : kIdlePolicies) {
    if (s == name) return policy;
  }
  fail_at(node, path, fmt::format("expected separate, spread-by-node or spread-by-pool, got '{}'", s));
}

FaultyPolicy read_faulty_policy(const YAML::Node& node, const std::string& path) {
  std::string s = read_string(node, path);
  for (const auto& [policy, name] : kFaultyPolicies) {
    if (s == name) return policy;
  }
  fail_at(node, path, fmt::format("expected bill or exclude, got '{}'", s));
}

Pool read_pool(const MapEntry& e, const std::string& pools_path) {
  if (e.key.empty()) fail_at(e.key_node, pools_path, "a pool name must not be empty");
  Pool pool{e.key, read_string(e.value, e.path), {}};
  auto re = FullMatchRegex::compile(pool.node_regex);
  if (!re) {
    fail_at(
        e.value, e.path,
        fmt::format("pool '{}' has an invalid node regex '{}': {}", pool.name, pool.node_regex, re.error().message));
  }
  pool.node_pattern = std::move(re).value();
  return pool;
}

void parse_idle(const YAML::Node& node, Pricing& p) {
  MapReader m(node, "idle", {"policy", "pools"});
  if (m.has("policy")) p.idle_policy = read_idle_policy(m.get("policy"), m.path("policy"));
  const std::string pools_path = m.path("pools");
  if (p.idle_policy != IdlePolicy::kSpreadByPool) {
    if (m.has("pools")) {
      fail_at(m.get("pools"), pools_path,
              fmt::format("applies only to policy spread-by-pool, not {}", to_string(p.idle_policy)));
    }
    return;
  }
  std::vector<MapEntry> entries;
  if (m.has("pools")) entries = read_entries(m.get("pools"), pools_path);
  if (entries.empty()) {
    fail_at(m.has("pools") ? m.get("pools") : node, pools_path,
            "policy spread-by-pool needs at least one pool: a name and a regex matching its nodes' names");
  }
  for (const MapEntry& e : entries) p.pools.push_back(read_pool(e, pools_path));
}

void parse_budgets(const YAML::Node& node, Pricing& p) {
  const std::string path = "budgets";
  for (const MapEntry& e : read_entries(node, path)) {
    if (e.key.empty()) fail_at(e.key_node, path, "a project name must not be empty");
    double v = read_number(e.value, e.path);
    if (v <= 0) fail_at(e.value, e.path, fmt::format("must be more than 0, got '{}'", e.value.Scalar()));
    check_at_most(e.value, e.path, v, kMaxBudget);
    p.budgets.emplace(e.key, v);
  }
}

SiteFactors read_site(const MapReader& m) {
  SiteFactors f;
  if (m.has("pue")) f.pue = read_double(m.get("pue"), m.path("pue"), 1, 3);
  f.gco2e_per_kwh = read_double(m.require("gco2e_per_kwh"), m.path("gco2e_per_kwh"), 0, kMaxCarbonIntensity);
  return f;
}

void parse_sites(const YAML::Node& node, Pricing& p) {
  const std::string path = "sites";
  for (const MapEntry& e : read_entries(node, path)) {
    if (e.key.empty()) fail_at(e.key_node, path, "a site name (a cluster label's value, or \"*\") must not be empty");
    p.sites.emplace(e.key, read_dated<SiteFactors>(e.value, e.path, {"from", "pue", "gco2e_per_kwh"}, read_site,
                                                   "{pue: 1.3, gco2e_per_kwh: 380}"));
  }
}

void parse_billing(const YAML::Node& node, Pricing& p) {
  MapReader m(node, "billing", {"provider", "account_id", "account_name", "service_name"});
  auto text = [&](std::string_view key, std::string& out) {
    if (!m.has(key)) return;
    const std::string path = m.path(key);
    out = read_string(m.get(key), path);
    if (out.find_first_not_of(" \t") == std::string::npos) fail_at(m.get(key), path, "must not be empty");
  };
  text("provider", p.billing.provider);
  text("account_id", p.billing.account_id);
  text("account_name", p.billing.account_name);
  text("service_name", p.billing.service_name);
}

// A section written with no value ("energy:") is the same as no section.
bool present(const YAML::Node& n) { return n.IsDefined() && !n.IsNull(); }

Pricing parse_document(const YAML::Node& root, std::string_view source) {
  if (!root.IsMap()) {
    fail_at(root, "",
            "expected a mapping with the key gpu_models and optionally currency, mig_profiles, energy, idle, faulty, "
            "budgets, billing, sites");
  }
  MapReader top(root, "",
                {"currency", "gpu_models", "mig_profiles", "energy", "idle", "faulty", "budgets", "billing", "sites"});
  Pricing p;
  p.source = std::string(source);
  if (top.has("currency")) parse_currency(top.get("currency"), p);
  parse_gpu_models(top.require("gpu_models"), p);
  if (present(top.get("mig_profiles"))) parse_mig_profiles(top.get("mig_profiles"), p);
  if (present(top.get("energy"))) {
    p.energy = read_dated<EnergyPrice>(top.get("energy"), "energy", {"from", "kwh", "pue"}, read_energy_price,
                                       "{kwh: 0.12, pue: 1.3}");
  }
  if (present(top.get("idle"))) parse_idle(top.get("idle"), p);
  if (present(top.get("faulty"))) p.faulty_policy = read_faulty_policy(top.get("faulty"), "faulty");
  if (present(top.get("budgets"))) parse_budgets(top.get("budgets"), p);
  if (present(top.get("billing"))) parse_billing(top.get("billing"), p);
  if (present(top.get("sites"))) parse_sites(top.get("sites"), p);
  return p;
}

// The value in effect at `t`: the last entry whose `from` is not after `t`.
template <typename T>
const T* in_effect(const std::vector<Dated<T>>& list, double t) {
  const T* found = nullptr;
  for (const Dated<T>& d : list) {
    if (d.from_set && d.from > t) break;
    found = &d.value;
  }
  return found;
}

template <typename T>
void add_change_points(const std::vector<Dated<T>>& list, double from, double to, std::vector<double>& out) {
  for (const Dated<T>& d : list) {
    if (d.from_set && d.from > from && d.from < to) out.push_back(d.from);
  }
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

Result<std::string> read_small_file(const std::string& path) {
  auto fail = [&](int err) {
    return Error{err, fmt::format("{}: cannot read the pricing file: {}", path, std::strerror(err))};
  };
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  if (!f) return fail(errno);
  std::string text;
  char buf[8192];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f.get())) > 0) {
    text.append(buf, n);
    if (text.size() > kMaxPricingBytes) {
      return Error{EFBIG, fmt::format("{}: the pricing file is larger than {} bytes", path, kMaxPricingBytes)};
    }
  }
  if (std::ferror(f.get())) return fail(errno);  // EISDIR for a directory
  return text;
}

}  // namespace

double mig_gpu_hour_price(double instance_hour, int profile_slices, int gpu_slices) {
  return instance_hour * gpu_slices / profile_slices;
}

std::optional<int> mig_compute_slices(std::string_view profile) {
  // One slice count, 1..7, and the letter after it; the rest of the name is left to NVIDIA.
  auto count = [](std::string_view s, char unit) -> std::optional<int> {
    if (s.size() < 2 || !is_digit(s[0]) || s[1] != unit) return std::nullopt;
    int n = s[0] - '0';
    if (n < 1 || n > kMaxMigSlicesPerGpu) return std::nullopt;
    return n;
  };
  std::optional<int> compute;
  if (auto c = count(profile, 'c'); c && profile.size() > 3 && profile[2] == '.') {
    compute = c;
    profile.remove_prefix(3);
  }
  auto gpu = count(profile, 'g');
  // "<n>g.<memory>gb" and any suffix such as "+me".
  if (!gpu || profile.size() < 6 || profile[2] != '.' || !is_digit(profile[3])) return std::nullopt;
  std::size_t i = 3;
  while (i < profile.size() && is_digit(profile[i])) ++i;
  if (profile.substr(i, 2) != "gb") return std::nullopt;
  i += 2;
  if (i < profile.size() && ((profile[i] != '+' && profile[i] != '-') || i + 1 == profile.size())) return std::nullopt;
  if (compute && *compute > *gpu) return std::nullopt;
  return compute ? compute : gpu;
}

std::optional<double> parse_timestamp(std::string_view text) {
  auto day = parse_date(text);
  if (!day) return std::nullopt;
  if (text.size() == 10) return day;
  if (text[10] != 'T' && text[10] != 't') return std::nullopt;
  auto time = parse_time_of_day(text.substr(11));
  if (!time) return std::nullopt;
  return *day + *time;
}

std::string format_timestamp(double unix_seconds) {
  auto seconds = static_cast<std::int64_t>(std::floor(unix_seconds));
  chrono::sys_seconds tp{chrono::seconds{seconds}};
  auto day = chrono::floor<chrono::days>(tp);
  chrono::year_month_day date{day};
  chrono::hh_mm_ss time{tp - day};
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", static_cast<int>(date.year()),
                     static_cast<unsigned>(date.month()), static_cast<unsigned>(date.day()), time.hours().count(),
                     time.minutes().count(), time.seconds().count());
}

std::string_view to_string(IdlePolicy policy) {
  for (const auto& [p, name] : kIdlePolicies) {
    if (p == policy) return name;
  }
  return "unknown";
}

std::string_view to_string(FaultyPolicy policy) {
  for (const auto& [p, name] : kFaultyPolicies) {
    if (p == policy) return name;
  }
  return "unknown";
}

// The entry of `key` in effect at `t`, else that of "*".
template <typename T>
std::optional<T> own_or_any(const std::map<std::string, std::vector<Dated<T>>, std::less<>>& table,
                            std::string_view key, double t) {
  for (std::string_view k : {key, kAnyModel}) {
    auto it = table.find(k);
    if (it == table.end()) continue;
    if (const T* v = in_effect(it->second, t)) return *v;
  }
  return std::nullopt;
}

std::optional<GpuPrice> Pricing::gpu_price(std::string_view model, double t) const {
  return own_or_any(gpu_models, model, t);
}

std::optional<MigPrice> Pricing::mig_price(std::string_view model, std::string_view profile, double t) const {
  for (std::string_view key : {model, kAnyModel}) {
    auto it = mig_profiles.find(key);
    if (it == mig_profiles.end()) continue;
    auto prices = it->second.find(profile);
    if (prices == it->second.end()) continue;
    if (const MigPrice* p = in_effect(prices->second, t)) return *p;
  }
  return std::nullopt;
}

std::optional<SiteFactors> Pricing::site(std::string_view cluster, double t) const {
  return own_or_any(sites, cluster, t);
}

std::optional<EnergyPrice> Pricing::energy_price(double t) const {
  if (const EnergyPrice* p = in_effect(energy, t)) return *p;
  return std::nullopt;
}

std::vector<double> Pricing::change_points(double from, double to) const {
  std::vector<double> out;
  for (const auto& [model, list] : gpu_models) add_change_points(list, from, to, out);
  for (const auto& [site, list] : sites) add_change_points(list, from, to, out);
  for (const auto& [model, profiles] : mig_profiles) {
    for (const auto& [profile, list] : profiles) add_change_points(list, from, to, out);
  }
  add_change_points(energy, from, to, out);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::optional<std::string> Pricing::pool_for(std::string_view node) const {
  for (const Pool& pool : pools) {
    if (pool.node_pattern && pool.node_pattern->matches(node)) return pool.name;
  }
  return std::nullopt;
}

Result<Pricing> parse_pricing(std::string_view text, std::string_view source) {
  try {
    std::vector<YAML::Node> docs = load_documents(text);
    if (docs.size() > 1) fail_at(docs[1], "", fmt::format("expected one YAML document, found {}", docs.size()));
    return parse_document(docs.empty() ? YAML::Node() : docs[0], source);
  } catch (const YamlError& e) {
    return to_error(source, e);
  } catch (const YAML::Exception& e) {
    return to_error(source, e);
  }
}

Result<Pricing> load_pricing(const std::string& path) {
  auto text = read_small_file(path);
  if (!text) return text.error();
  return parse_pricing(*text, path);
}

}  // namespace gpumeter::pricing
