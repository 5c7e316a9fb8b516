// Render cost: once per snapshot (families + both formats + gzip prefixes) and once per scrape
// (trailer and framing only). Node of 8 GPUs with every metric populated.

#include <benchmark/benchmark.h>

#include "fixture_snapshot.h"
#include "render/compat.h"
#include "render/families.h"
#include "render/prepared_exposition.h"

namespace gpumeter {
namespace {

// The golden-file fixture's fully populated H100, replicated to a node of `gpus` GPUs.
Snapshot full_node(unsigned gpus) {
  Snapshot s = testing::fixture_snapshot();
  const GpuSnapshot h100 = s.gpus.at(0);
  s.gpus.clear();
  for (unsigned i = 0; i < gpus; ++i) {
    GpuSnapshot g = h100;
    g.identity.index = i;
    g.identity.uuid += "-" + std::to_string(i);
    s.gpus.push_back(std::move(g));
  }
  return s;
}

void BM_PerSnapshot_BuildRenderGzip(benchmark::State& state) {
  Snapshot s = full_node(8);
  size_t bytes = 0;
  for (auto _ : state) {
    auto prepared = prepare_exposition(build_families(s), s.taken_unix);
    for (auto f : {ExpositionFormat::kText004, ExpositionFormat::kOpenMetrics100}) (void)prepared->gzip(f);
    bytes = prepared->text(ExpositionFormat::kText004).size();
    benchmark::DoNotOptimize(prepared);
  }
  state.counters["text_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_PerSnapshot_BuildRenderGzip)->Unit(benchmark::kMicrosecond);

// The same, with compat sets on (--compat): gpumeter's families and the chosen sets' families,
// rendered from the same snapshot. Arg: 0 none, 1 dcgm-exporter (its default counters),
// 2 dcgm-exporter-1.x, 3 nvidia-smi, 4 all three. text_bytes is the text 0.0.4 body.
void BM_PerSnapshot_BuildRenderGzip_Compat(benchmark::State& state) {
  Snapshot s = full_node(8);
  CompatOptions o;
  o.hostname = "gpu-node-07";
  switch (state.range(0)) {
    case 1:
      o.sets = {CompatSet::kDcgmExporter};
      break;
    case 2:
      o.sets = {CompatSet::kDcgmExporter1x};
      break;
    case 3:
      o.sets = {CompatSet::kNvidiaSmi};
      break;
    case 4:
      o.sets = {CompatSet::kDcgmExporter, CompatSet::kDcgmExporter1x, CompatSet::kNvidiaSmi};
      break;
    default:
      break;
  }
  size_t bytes = 0;
  for (auto _ : state) {
    std::vector<MetricFamily> families = build_families(s);
    std::vector<MetricFamily> more = build_compat_families(s, o);
    families.insert(families.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
    auto prepared = prepare_exposition(std::move(families), s.taken_unix);
    for (auto f : {ExpositionFormat::kText004, ExpositionFormat::kOpenMetrics100}) (void)prepared->gzip(f);
    bytes = prepared->text(ExpositionFormat::kText004).size();
    benchmark::DoNotOptimize(prepared);
  }
  std::string label;
  for (CompatSet set : o.sets) label += (label.empty() ? "" : "+") + std::string(compat_set_name(set));
  state.SetLabel(label.empty() ? "no compat" : label);
  state.counters["text_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_PerSnapshot_BuildRenderGzip_Compat)->DenseRange(0, 4)->Unit(benchmark::kMicrosecond);

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
