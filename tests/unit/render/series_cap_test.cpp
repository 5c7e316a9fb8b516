// The series cap (render/series_cap.h): per-process detail goes first, the last process in the
// per-process limit's order first, then per-link NVLink traffic; the ledger is never cut.

#include "render/series_cap.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fixture_snapshot.h"
#include "render/families.h"

namespace gpumeter {
namespace {

ProcessSnapshot process(unsigned pid, double memory, bool running = true) {
  ProcessSnapshot p;
  p.pid = pid;
  p.owner.project = "p" + std::to_string(pid);
  p.memory_bytes = memory;
  p.utilization_ratio = 0.1;
  p.running = running;
  return p;
}

// The fixture with three processes on GPU 0 and one on GPU 1 (two per-process series each), an
// owner each in the ledger, and two NVLinks on GPU 0.
Snapshot snapshot() {
  Snapshot s = testing::fixture_snapshot();
  s.gpus[0].processes = {process(100, 8e9), process(101, 2e9), process(102, 1e9, /*running=*/false)};
  s.gpus[1].processes = {process(200, 4e9)};
  for (auto* g : {&s.gpus[0], &s.gpus[1]}) {
    GpuLedgerSnapshot l;
    for (const auto& p : g->processes) l.owners.push_back({p.owner, 10, 5, 1e9, 100, 0, {}});
    g->ledger = std::make_shared<const GpuLedgerSnapshot>(l);
  }
  auto r = std::make_shared<DeviceReading>(*s.gpus[0].reading);
  for (unsigned link = 0; link < 2; ++link) {
    NvlinkReading n;
    n.link = link;
    n.active = true;
    n.speed_bytes_per_second = 25e9;
    n.transmit_bytes = 1e12;
    n.receive_bytes = 2e12;
    n.errors = {{"crc", 0}};
    r->nvlinks.push_back(n);
  }
  s.gpus[0].reading = r;
  return s;
}

std::size_t count(const std::vector<MetricFamily>& families) {
  std::size_t n = 0;
  for (const auto& f : families) n += f.samples.size();
  return n;
}

const MetricFamily* find(const std::vector<MetricFamily>& families, const std::string& name) {
  for (const auto& f : families) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::vector<std::string> pids(const std::vector<MetricFamily>& families) {
  std::vector<std::string> out;
  if (const auto* f = find(families, "gpu_process_memory_used_bytes")) {
    for (const auto& s : f->samples) {
      for (const auto& [k, v] : s.labels) {
        if (k == "pid") out.push_back(v);
      }
    }
  }
  return out;
}

TEST(SeriesCap, NoCapOrRoomEnoughLeavesEverything) {
  const Snapshot s = snapshot();
  const std::vector<MetricFamily> all = build_families(s);
  const std::size_t n = count(all);
  for (std::size_t max : {std::size_t{0}, n + kSeriesCapReserved, n + 100}) {
    std::vector<MetricFamily> f = all;
    const SeriesCut cut = cap_series(f, s, max);
    EXPECT_EQ(cut.wanted, n);
    EXPECT_EQ(cut.served, n);
    EXPECT_EQ(cut.dropped(), 0u);
    EXPECT_FALSE(cut.over);
    EXPECT_EQ(count(f), n) << max;
  }
  EXPECT_TRUE(series_cap_families(0, SeriesCut{}).empty());
}

TEST(SeriesCap, ProcessesGoFirstTheLastInTheLimitsOrderFirst) {
  const Snapshot s = snapshot();
  std::vector<MetricFamily> f = build_families(s);
  const std::size_t n = count(f);
  EXPECT_EQ(pids(f), (std::vector<std::string>{"100", "101", "102", "200"}));
  // Three series too many: two processes of two series each go. The exited one (102) is last,
  // then the smallest running one (101, 2 GB).
  const SeriesCut cut = cap_series(f, s, n + kSeriesCapReserved - 3);
  EXPECT_EQ(cut.dropped(), 4u);
  EXPECT_EQ(cut.dropped_by_kind.at("process"), 4u);
  EXPECT_FALSE(cut.dropped_by_kind.count("nvlink"));
  EXPECT_FALSE(cut.over);
  EXPECT_EQ(count(f), n - 4);
  EXPECT_EQ(pids(f), (std::vector<std::string>{"100", "200"}));
  // The ledger is whole.
  EXPECT_EQ(find(f, "gpu_busy_seconds_total")->samples.size(), 4u);

  const std::vector<MetricFamily> own = series_cap_families(n, cut);
  ASSERT_EQ(own.size(), 2u);
  EXPECT_EQ(own[0].name, "gpumeter_series_limit");
  EXPECT_EQ(own[0].samples[0].value, static_cast<double>(n));
  EXPECT_EQ(own[1].name, "gpumeter_series_limit_dropped");
  ASSERT_EQ(own[1].samples.size(), 2u);
  EXPECT_EQ(own[1].samples[0].labels, (Labels{{"kind", "process"}}));
  EXPECT_EQ(own[1].samples[0].value, 4.0);
  EXPECT_EQ(own[1].samples[1].value, 0.0);
}

TEST(SeriesCap, ThenNvlinkTrafficAndNeverTheLedger) {
  const Snapshot s = snapshot();
  std::vector<MetricFamily> f = build_families(s);
  const std::size_t n = count(f);
  // Every process (8 series) and one NVLink traffic family (2 links) must go.
  SeriesCut cut = cap_series(f, s, n + kSeriesCapReserved - 9);
  EXPECT_EQ(cut.dropped_by_kind.at("process"), 8u);
  EXPECT_EQ(cut.dropped_by_kind.at("nvlink"), 2u);
  EXPECT_FALSE(cut.over);
  EXPECT_EQ(find(f, "gpu_process_memory_used_bytes"), nullptr);  // emptied families are left out
  EXPECT_EQ(find(f, "gpu_nvlink_transmit_bytes_total"), nullptr);
  ASSERT_NE(find(f, "gpu_nvlink_receive_bytes_total"), nullptr);
  ASSERT_NE(find(f, "gpu_nvlink_up"), nullptr);  // the links' state, which the NVLink alerts read, stays

  // A cap below what is never cut: everything that may go goes, and the rest is served.
  f = build_families(s);
  cut = cap_series(f, s, 50);
  EXPECT_TRUE(cut.over);
  EXPECT_EQ(cut.dropped(), 8u + 6u);
  EXPECT_EQ(count(f), n - 14);
  EXPECT_EQ(find(f, "gpu_busy_seconds_total")->samples.size(), 4u);
  EXPECT_EQ(find(f, "gpu_allocated_seconds_total")->samples.size(), 4u);
  EXPECT_NE(find(f, "gpu_nvlink_errors_total"), nullptr);
}

}  // namespace
}  // namespace gpumeter
