#pragma once
// `gpumeter slurm epilog`: run from Slurm's node Epilog, writes a finished job's GPU use on this
// node (GPU-seconds, busy seconds, memory, energy, and cost at the prices in force) into the job's
// accounting record as its AdminComment, through `sacctmgr modify job`. It reads the node agent's
// /metrics, so the figures are the ledger's. It never fails the job: whatever goes wrong is one
// log line on stderr (slurmd's log) and exit 0, within a deadline. docs/slurm.md.

#include <CLI/CLI.hpp>

#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "pricing/pricing.h"
#include "util/result.h"

namespace gpumeter::cli {

struct SlurmEpilogOptions {
  std::string job;  // default: $SLURM_JOB_ID
  std::string agent = "127.0.0.1:9400";
  std::string pricing_file;  // optional: the cost
  std::string deadline = "10s";
  std::string sacctmgr = "sacctmgr";
  bool dry_run = false;  // print the comment instead of writing it
};

// One job's ledger totals on one node, summed over its GPUs.
struct JobSummary {
  double gpu_seconds = 0;
  double busy_seconds = 0;
  double memory_byte_seconds = 0;
  double energy_joules = 0;
  std::set<std::string> gpus;  // uuids
  std::optional<double> cost;  // with a pricing file, every GPU's model priced
  std::string currency;
};

// The job's totals from an agent's text exposition: its owner series (hpc_job="<job>") of the
// four ledger counters, priced by gpu_info's model at time `now` when `pricing` is given. A
// malformed line of those families is an error.
Result<JobSummary> summarize_job(std::string_view exposition, std::string_view job, const pricing::Pricing* pricing,
                                 double now);

// The AdminComment: key=value pairs joined by ';', no quotes or spaces (sacctmgr turns quotes
// into backticks) and in lower case (it lowercases the value), numbers in plain decimal.
std::string admin_comment(const JobSummary& s);

void setup_slurm_command(CLI::App& cmd, SlurmEpilogOptions& options, int& exit_code);
int run_slurm_epilog(const SlurmEpilogOptions& options);

}  // namespace gpumeter::cli
