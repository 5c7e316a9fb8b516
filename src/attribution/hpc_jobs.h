#pragma once
// dcgm-exporter's HPC job mapping directory (--hpc-job-mapping-dir, DCGM_HPC_JOB_MAPPING_DIR):
// a batch system's prolog writes one file per GPU, named by the GPU's index ("0", "1", or
// "<gpu>.<gpu instance>" for a MIG slice), holding the ids of the jobs using that GPU, one
// per line; the epilog removes it. gpumeter reads the same files, and also accepts files
// named by UUID ("GPU-<uuid>", "MIG-<uuid>"), so one prolog serves both exporters.

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace gpumeter {

// GPU file name -> job ids in file order (blank lines and surrounding spaces dropped,
// repeats removed).
using HpcJobMapping = std::map<std::string, std::vector<std::string>>;

// Whether `name` is a mapping file name: a GPU index, "<index>.<instance>", or a
// "GPU-"/"MIG-" UUID. Other files in the directory are ignored, as dcgm-exporter does.
bool is_hpc_job_file_name(std::string_view name);

// The mapping in `dir`. A directory that does not exist (or is not a directory, or cannot
// be listed) is an Error whose code is the errno (ENOENT, ENOTDIR, EACCES), distinct from
// an existing directory with no jobs, which is an empty map. A file that disappears while
// being read (an epilog ran) is skipped.
Result<HpcJobMapping> read_hpc_job_mapping(const std::string& dir);

// The jobs for one GPU: those of the file named by its index, then those of the file named
// by its UUID, without repeats.
std::vector<std::string> hpc_jobs_for_gpu(const HpcJobMapping& mapping, unsigned index,
                                          std::string_view uuid);

}  // namespace gpumeter
