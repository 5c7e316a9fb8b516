// One replica's series of each counter where a store holds an HA pair's copies
// (report/replicas.h), directly and through build_report against an in-memory API.
#include "report/replicas.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpumeter::report {
namespace {

CounterSeries series(Labels labels, std::vector<double> increase, std::vector<bool> present) {
  return CounterSeries{std::move(labels), std::move(increase), std::move(present)};
}

TEST(KeepOneReplica, TheReplicaWithTheMostDataIsBilledWithoutItsLabel) {
  CounterData d;
  // GPU-a: replica b missed a point, so a is kept. GPU-b: both whole, the first in label order
  // (a) is kept. GPU-c: only replica b has it. GPU-d: no replica label at all.
  d.series.push_back(series({{"uuid", "GPU-a"}, {"replica", "b"}}, {5, 7}, {true, false, true}));
  d.series.push_back(series({{"uuid", "GPU-a"}, {"replica", "a"}}, {6, 6}, {true, true, true}));
  d.series.push_back(series({{"uuid", "GPU-b"}, {"replica", "b"}}, {2, 2}, {true, true, true}));
  d.series.push_back(series({{"uuid", "GPU-b"}, {"replica", "a"}}, {1, 3}, {true, true, true}));
  d.series.push_back(series({{"uuid", "GPU-c"}, {"replica", "b"}}, {4, 4}, {true, true, true}));
  d.series.push_back(series({{"uuid", "GPU-d"}}, {9, 9}, {true, true, true}));
  d.resets.push_back({{{"uuid", "GPU-a"}, {"replica", "a"}}, 10, 20});
  d.resets.push_back({{{"uuid", "GPU-a"}, {"replica", "b"}}, 10, 21});
  // Pending steps of both copies of GPU-a, and of GPU-d.
  for (const Labels& l : {Labels{{"uuid", "GPU-a"}, {"replica", "a"}}, Labels{{"uuid", "GPU-a"}, {"replica", "b"}},
                          Labels{{"uuid", "GPU-d"}}}) {
    d.pending.push_back(PendingStep{series_id(l), series_id(l), l.at("uuid"), 2, 0, 0, 0, 1});
  }

  const ReplicaMerge m = keep_one_replica(d, kDefaultReplicaLabels);
  // The kept copy's, billed as the GPU's series without the replica label.
  ASSERT_EQ(d.pending.size(), 2u);
  EXPECT_EQ(d.pending[0].series, series_id({{"uuid", "GPU-a"}, {"replica", "a"}}));
  EXPECT_EQ(d.pending[0].owner, series_id({{"uuid", "GPU-a"}}));
  EXPECT_EQ(d.pending[1].owner, series_id({{"uuid", "GPU-d"}}));
  EXPECT_EQ(m.replicas, 2u);
  EXPECT_EQ(m.dropped, 2u);
  ASSERT_EQ(d.series.size(), 4u);
  EXPECT_EQ(d.series[0].labels, (Labels{{"uuid", "GPU-a"}}));
  EXPECT_EQ(d.series[0].increase, (std::vector<double>{6, 6}));
  EXPECT_EQ(d.series[1].labels, (Labels{{"uuid", "GPU-b"}}));
  EXPECT_EQ(d.series[1].increase, (std::vector<double>{1, 3}));
  EXPECT_EQ(d.series[2].labels, (Labels{{"uuid", "GPU-c"}}));
  EXPECT_EQ(d.series[3].labels, (Labels{{"uuid", "GPU-d"}}));
  ASSERT_EQ(d.resets.size(), 1u);  // the kept replica's
  EXPECT_EQ(d.resets[0].labels, (Labels{{"uuid", "GPU-a"}}));
  EXPECT_EQ(d.resets[0].at, 20);
}

TEST(KeepOneReplica, OneReplicaForEveryCounterWhereItHasTheSeries) {
  CounterData covered;
  covered.series.push_back(series({{"uuid", "GPU-a"}, {"replica", "a"}}, {1, 1}, {true, false, true}));
  covered.series.push_back(series({{"uuid", "GPU-a"}, {"replica", "b"}}, {1, 1}, {true, true, true}));
  covered.series.push_back(series({{"uuid", "GPU-b"}, {"replica", "a"}}, {1, 1}, {true, true, true}));
  covered.series.push_back(series({{"uuid", "GPU-b"}, {"replica", "b"}}, {1, 1}, {true, true, true}));
  const Labels preferred = preferred_replica(covered, kDefaultReplicaLabels);
  EXPECT_EQ(preferred, (Labels{{"replica", "b"}}));  // 6 points against 5
  EXPECT_TRUE(preferred_replica(covered, {"zone"}).empty());

  // An owner's counter: replica a has a point more, but b is billed, as for the GPU's other
  // counters; where b has no series, a's is.
  CounterData owner;
  owner.series.push_back(series({{"uuid", "GPU-a"}, {"project", "x"}, {"replica", "a"}}, {3}, {true, true, true}));
  owner.series.push_back(series({{"uuid", "GPU-a"}, {"project", "x"}, {"replica", "b"}}, {4}, {false, true, true}));
  owner.series.push_back(series({{"uuid", "GPU-b"}, {"project", "y"}, {"replica", "a"}}, {5}, {true, true, true}));
  const ReplicaMerge m = keep_one_replica(owner, kDefaultReplicaLabels, preferred);
  EXPECT_EQ(m.dropped, 1u);
  ASSERT_EQ(owner.series.size(), 2u);
  EXPECT_EQ(owner.series[0].increase, (std::vector<double>{4}));
  EXPECT_EQ(owner.series[1].increase, (std::vector<double>{5}));
  EXPECT_EQ(owner.series[1].labels, (Labels{{"project", "y"}, {"uuid", "GPU-b"}}));
}

TEST(KeepOneReplica, NothingChangesWithoutReplicaLabelsOrWhenNoneIsNamed) {
  CounterData d;
  d.series.push_back(series({{"uuid", "GPU-b"}, {"zone", "x"}}, {1}, {true, true}));
  d.series.push_back(series({{"uuid", "GPU-a"}, {"zone", "x"}}, {2}, {true, true}));
  const CounterData before = d;
  EXPECT_EQ(keep_one_replica(d, kDefaultReplicaLabels).replicas, 0u);
  ASSERT_EQ(d.series.size(), 2u);
  EXPECT_EQ(d.series[0].labels, before.series[0].labels);  // in read order
  d.series.push_back(series({{"uuid", "GPU-a"}, {"zone", "y"}}, {2}, {true, true}));
  EXPECT_EQ(keep_one_replica(d, {}).replicas, 0u);
  EXPECT_EQ(d.series.size(), 3u);
  // A label named as the replica one merges what it tells apart.
  EXPECT_EQ(keep_one_replica(d, {"zone"}).dropped, 1u);
  EXPECT_EQ(d.series.size(), 2u);
}

}  // namespace
}  // namespace gpumeter::report
