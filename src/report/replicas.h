#pragma once
// HA pairs. Two Prometheus servers scraping the same agents send the same counters to a store,
// each under its own replica label (Thanos' `replica`, the Prometheus Operator's
// `prometheus_replica`). A store that de-duplicates on it (Thanos' --query.replica-label,
// VictoriaMetrics' -dedup.minScrapeInterval, Mimir's HA tracker) answers one copy; one that
// does not answers both, and a report that added them would bill every GPU-second twice. Series
// equal but for a replica label are one counter: one replica's series is billed, whole, for the
// period, so its increases add up exactly as a single server's do.

#include <cstddef>
#include <string>
#include <vector>

#include "report/counter_reader.h"

namespace gpumeter::report {

// The replica labels looked for when none is named (--replica-label).
inline const std::vector<std::string> kDefaultReplicaLabels = {"replica", "prometheus_replica"};

struct ReplicaMerge {
  std::size_t replicas = 0;  // the most copies of one series; 0 where no series has a replica label
  std::size_t dropped = 0;   // series of the other replicas left out
};

// The replica to bill from: the one whose series of `data` are present at the most timeline
// points in all (on a tie, the first in label order), as its replica labels; empty where no
// series has one. One replica for every counter keeps a GPU's counters from one server's scrapes,
// which the report's checks compare with each other.
Labels preferred_replica(const CounterData& data, const std::vector<std::string>& replica_labels);

// Keeps, of each set of series equal but for the replica labels, the `preferred` replica's
// series where it has one, else the one present at the most points (on a tie, the first in
// label order), and drops the others with their resets and pending steps. Every series loses its replica labels,
// so that what follows sees one server's data.
ReplicaMerge keep_one_replica(CounterData& data, const std::vector<std::string>& replica_labels,
                              const Labels& preferred = {});

}  // namespace gpumeter::report
