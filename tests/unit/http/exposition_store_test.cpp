#include "http/exposition_store.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <thread>

#include "../render/fixture_snapshot.h"
#include "render/families.h"
#include "render/text_writer.h"

namespace gpumeter {
namespace {

TEST(ExpositionStore, EmptyUntilFirstPublish) {
  ExpositionStore store;
  EXPECT_EQ(store.latest(), nullptr);
  EXPECT_FALSE(store.publish(nullptr).ok());
  EXPECT_EQ(store.latest(), nullptr);
}

TEST(ExpositionStore, PublishedSnapshotsRenderBothFormatsOnDemand) {
  ExpositionStore store;
  auto snap = std::make_shared<const Snapshot>(testing::fixture_snapshot());
  ASSERT_TRUE(store.publish(snap).ok());
  auto p = store.latest();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->snapshot, snap);
  EXPECT_EQ(p->exposition.taken_unix(), testing::kFixtureTakenUnix);
  auto fams = build_families(*snap);
  EXPECT_EQ(p->exposition.text(ExpositionFormat::kText004), render(fams, ExpositionFormat::kText004));
  EXPECT_EQ(p->exposition.text(ExpositionFormat::kOpenMetrics100), render(fams, ExpositionFormat::kOpenMetrics100));
  ASSERT_TRUE(p->exposition.gzip(ExpositionFormat::kText004).ok());
  EXPECT_FALSE(p->exposition.gzip(ExpositionFormat::kText004)->bytes.empty());
}

// The JSON API's answers are rendered once per snapshot, as the exposition is: every request of
// one publication gets the same prepared body, and only the age after it is its own. A client
// asking in a loop no longer renders the snapshot each time (two cores for 24 clients before).
TEST(ExpositionStore, TheApiIsRenderedOncePerSnapshotAndOnlyTheAgeIsPerRequest) {
  ExpositionStore store;
  Snapshot s = testing::fixture_snapshot();
  // More processes than any series limit would keep: every one is listed.
  for (unsigned pid = 100; pid < 400; ++pid) {
    ProcessSnapshot p;
    p.pid = pid;
    p.owner.project = "p" + std::to_string(pid);
    p.series = pid < 102;
    s.gpus[0].processes.push_back(p);
  }
  ASSERT_TRUE(store.publish(std::make_shared<const Snapshot>(s)).ok());
  auto p = store.latest();
  const std::string_view first = p->api.gpus();
  const std::string_view again = p->api.gpus();
  EXPECT_EQ(first.data(), again.data());  // the same bytes, not rendered again
  const auto one = p->api.gpu(s.gpus[1].identity.uuid);
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(one->data(), p->api.gpu(s.gpus[1].identity.uuid)->data());
  EXPECT_FALSE(p->api.gpu("GPU-none").has_value());
  const auto doc = nlohmann::json::parse(std::string(first) + render_api_tail(0.25));
  EXPECT_EQ(doc["snapshot_age_seconds"], 0.25);
  EXPECT_EQ(doc["gpus"][0]["processes"].size(), 300u);  // 2 of them within the series limit
  EXPECT_EQ(nlohmann::json::parse(std::string(first) + render_api_tail(-3))["snapshot_age_seconds"], 0.0);
  // A newer publication renders its own.
  ASSERT_TRUE(store.publish(std::make_shared<const Snapshot>(s)).ok());
  EXPECT_NE(store.latest()->api.gpus().data(), first.data());
}

TEST(ExpositionStore, ReaderKeepsItsPublicationAcrossNewerOnes) {
  ExpositionStore store;
  Snapshot a = testing::fixture_snapshot();
  a.build.version = "a";
  ASSERT_TRUE(store.publish(std::make_shared<const Snapshot>(a)).ok());
  auto held = store.latest();
  Snapshot b = a;
  b.build.version = "b";
  ASSERT_TRUE(store.publish(std::make_shared<const Snapshot>(b)).ok());
  EXPECT_EQ(held->snapshot->build.version, "a");
  EXPECT_NE(held->exposition.text(ExpositionFormat::kText004).find("version=\"a\""), std::string::npos);
  EXPECT_EQ(store.latest()->snapshot->build.version, "b");
}

TEST(ExpositionStore, ConcurrentReadersSeeWholePublications) {
  ExpositionStore store;
  ASSERT_TRUE(store.publish(std::make_shared<const Snapshot>(testing::fixture_snapshot())).ok());
  std::atomic<bool> stop{false};
  std::atomic<long> reads{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < 4; ++i) {
    readers.emplace_back([&] {
      while (!stop.load()) {
        auto p = store.latest();
        // The rendered text must always belong to the snapshot it is published with.
        const std::string want = "version=\"" + p->snapshot->build.version + "\"";
        ASSERT_NE(p->exposition.text(ExpositionFormat::kText004).find(want), std::string::npos);
        ++reads;
      }
    });
  }
  // Publishing renders nothing, so it outruns the readers: each publication waits until the
  // readers have read (and rendered) at least once more.
  for (int v = 0; v < 200; ++v) {
    Snapshot s = testing::fixture_snapshot();
    s.build.version = "v" + std::to_string(v);
    ASSERT_TRUE(store.publish(std::make_shared<const Snapshot>(std::move(s))).ok());
    const long seen = reads.load();
    while (reads.load() == seen) std::this_thread::yield();
  }
  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_GE(reads.load(), 200);
  EXPECT_EQ(store.latest()->snapshot->build.version, "v199");
}

}  // namespace
}  // namespace gpumeter
