// Render cost: once per snapshot (families + both formats + gzip prefixes) and once per scrape
// (trailer and framing only). Node of 8 GPUs with every metric populated.

#include <benchmark/benchmark.h>

#include <chrono>

#include "render/families.h"
#include "render/prepared_exposition.h"

namespace gpumeter {
namespace {

Snapshot full_node(unsigned gpus) {
  Snapshot s;
  s.taken_unix = 1'800'000'000.0;
  s.build = {"0.1.0", "bench"};
  s.backends.push_back({"nvml", true, "loaded", "libnvidia-ml.so.1", "550.54.15"});
  for (unsigned i = 0; i < gpus; ++i) {
    GpuSnapshot g;
    g.identity = {i, "GPU-5d2a1c0e-7f3b-4a9e-8c6d-00000000000" + std::to_string(i), "nvidia",
                  "NVIDIA H100 80GB HBM3", "00000000:1" + std::to_string(i) + ":00.0", "550.54.15",
                  "96.00.99.00.01", "165022301000" + std::to_string(i)};
    g.up = true;
    g.collect_success = true;
    g.collect_duration_seconds = 0.000412;
    auto r = std::make_shared<DeviceReading>();
    r->utilization_ratio = 0.87;
    r->memory_utilization_ratio = 0.52;
    r->memory_total_bytes = 85520809984.0;
    r->memory_used_bytes = 64424509440.0;
    r->memory_free_bytes = 21096300544.0;
    r->temperature_celsius = {{"gpu", 61}, {"memory", 68}};
    r->power_watts = 611.234;
    r->power_limit_watts = 700;
    r->energy_joules = 123456789.123;
    r->clock_hertz = {{"graphics", 1.98e9}, {"sm", 1.98e9}, {"memory", 2.619e9}, {"video", 1.755e9}};
    r->performance_state = 0;
    r->pcie_link_generation = 5;
    r->pcie_link_width = 16;
    r->pcie_replay_errors = 0;
    r->pcie_transmit_bytes = 9.87e12;
    r->pcie_receive_bytes = 1.23e13;
    for (const char* reason : {"gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown",
                               "sync_boost", "sw_thermal_slowdown", "hw_thermal_slowdown",
                               "hw_power_brake_slowdown", "display_clock_setting"}) {
      r->clock_event_active.push_back({reason, 0});
    }
    r->ecc_errors = {{"corrected", 0}, {"uncorrected", 0}};
    r->remapped_rows = {{"correctable", 0}, {"uncorrectable", 0}, {"pending", 0}, {"failure", 0}};
    g.reading = r;
    g.xid_counts = {{79, 1}};
    s.gpus.push_back(std::move(g));
  }
  return s;
}

void BM_PerSnapshot_BuildRenderGzip(benchmark::State& state) {
  Snapshot s = full_node(8);
  size_t bytes = 0;
  for (auto _ : state) {
    auto prepared = prepare_exposition(build_families(s), s.taken_unix);
    bytes = prepared->text004.text.size();
    benchmark::DoNotOptimize(prepared);
  }
  state.counters["text_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_PerSnapshot_BuildRenderGzip)->Unit(benchmark::kMicrosecond);

void BM_PerScrape(benchmark::State& state) {
  Snapshot s = full_node(8);
  auto prepared = prepare_exposition(build_families(s), s.taken_unix);
  const auto format = state.range(0) ? ExpositionFormat::kOpenMetrics100 : ExpositionFormat::kText004;
  const bool gzip = state.range(1) != 0;
  for (auto _ : state) {
    auto body = make_scrape_body(*prepared, format, gzip, s.taken_unix + 0.25);
    benchmark::DoNotOptimize(body);
  }
  state.SetLabel(std::string(format == ExpositionFormat::kOpenMetrics100 ? "openmetrics" : "text") +
                 (gzip ? "+gzip" : ""));
}
BENCHMARK(BM_PerScrape)->Args({0, 0})->Args({1, 0})->Args({0, 1})->Args({1, 1})->Unit(benchmark::kNanosecond);

}  // namespace
}  // namespace gpumeter

BENCHMARK_MAIN();
