#pragma once
// What a Slurm node shows for its jobs' allocations, for `gpumeter sim procfs`: dcgm-exporter's
// HPC job-mapping directory, <dir>/run/gpumeter-hpc-jobs/, holding one file per GPU index with
// the ids of the Slurm jobs allocated that GPU, one per line, as a prolog writes it and an
// epilog removes it (the format src/attribution/hpc_jobs.h reads). A file exists exactly over
// its jobs' allocations [start, end), with no lead: that is what the batch system shows.
//
// Every change is atomic for a reader: a file is written as .<index>.tmp and renamed into
// place, and removed by one unlink.

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sim/scenario/scenario.h"
#include "util/result.h"

namespace gpumeter::sim {

// The mapping directory under a procfs output directory.
inline constexpr const char* kHpcJobsDir = "run/gpumeter-hpc-jobs";

// GPU index -> the Slurm job ids allocated it at t (in scenario order), for GPUs with any.
std::map<unsigned, std::vector<std::string>> hpc_jobs_at(const Scenario& scenario, Micros t);

// A mapping file's content: the job ids, one per line.
std::string hpc_jobs_file(const std::vector<std::string>& job_ids);

class HpcJobsTree {
 public:
  // Creates <dir>/run/gpumeter-hpc-jobs and takes over the files an earlier writer left there
  // (the first sync() replaces or removes them). Only for scenarios with Slurm allocations.
  static Result<std::unique_ptr<HpcJobsTree>> open(const std::filesystem::path& dir, const Scenario& scenario);

  // Makes the directory hold exactly the files of the allocations that contain t (t < 0 counts as 0).
  Result<void> sync(Micros t);

  // The earliest allocation edge after t; kForever if none.
  Micros next_change_after(Micros t) const;

  // The files present after the last sync(): GPU index -> content.
  const std::map<unsigned, std::string>& present() const { return present_; }

 private:
  HpcJobsTree(std::filesystem::path dir, const Scenario& scenario);

  std::filesystem::path dir_;
  const Scenario& scenario_;
  std::vector<Micros> edges_;
  std::map<unsigned, std::string> present_;
};

}  // namespace gpumeter::sim
