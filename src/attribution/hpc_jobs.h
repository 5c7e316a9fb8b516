#pragma once
// dcgm-exporter's HPC job mapping directory (--hpc-job-mapping-dir, DCGM_HPC_JOB_MAPPING_DIR):
// a batch system's prolog writes one file per GPU, named by the GPU's index ("0", "1", or
// "<gpu>.<gpu instance>" for a MIG slice), holding the ids of the jobs using that GPU, one
// per line; the epilog removes it. gpumeter reads the same files, and also accepts files
// named by UUID ("GPU-<uuid>", "MIG-<uuid>"), so one prolog serves both exporters.
//
// Each job id becomes an owner with series of its own, and whoever can write the directory
// chooses the ids, so what is read is bounded: a file's first 64 KiB, at most kMaxHpcJobsPerFile
// ids per file (more jobs than that on one GPU at once is no real allocation), kMaxHpcJobFiles
// files; and a symbolic link is never followed, as the Slurm cgroup reader never follows one (a
// link would put any file the agent can read on /metrics as label values).

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace gpumeter {

inline constexpr std::size_t kMaxHpcJobsPerFile = 64;
inline constexpr std::size_t kMaxHpcJobFiles = 1024;

struct HpcJobMapping {
  // GPU file name -> job ids in file order (blank lines and surrounding spaces dropped,
  // repeats removed).
  std::map<std::string, std::vector<std::string>> files;
  // GPU file name -> the ids beyond kMaxHpcJobsPerFile, left out.
  std::map<std::string, std::size_t> dropped;
  std::size_t links_skipped = 0;  // mapping files that are symbolic links, or not regular files
  std::size_t files_skipped = 0;  // mapping files beyond kMaxHpcJobFiles
};

// Whether `name` is a mapping file name: a GPU index, "<index>.<instance>", or a
// "GPU-"/"MIG-" UUID. Other files in the directory are ignored, as dcgm-exporter does.
bool is_hpc_job_file_name(std::string_view name);

struct HpcJobFile {
  std::vector<std::string> jobs;  // at most kMaxHpcJobsPerFile
  std::size_t dropped = 0;        // distinct ids beyond them
};
// The job ids of one mapping file's content.
HpcJobFile parse_hpc_job_file(std::string_view text);

// The mapping in `dir`. A directory that does not exist (or is not a directory, or cannot
// be listed) is an Error whose code is the errno (ENOENT, ENOTDIR, EACCES), distinct from
// an existing directory with no jobs, which is an empty map. A file that disappears while
// being read (an epilog ran) is skipped.
Result<HpcJobMapping> read_hpc_job_mapping(const std::string& dir);

// The jobs for one GPU: those of the file named by its index, then those of the file named
// by its UUID, without repeats.
std::vector<std::string> hpc_jobs_for_gpu(const HpcJobMapping& mapping, unsigned index, std::string_view uuid);

}  // namespace gpumeter
