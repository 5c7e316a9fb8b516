#pragma once
// The MIG device handle side of calls that take either a GPU or a MIG device handle
// (nvml_exports_mig.cpp): the GPU-handle implementations call these first when handed a MIG
// handle. Per-instance answers, as nvml.h describes them for MIG device handles.

#include <optional>

#include "sim/nvml/nvml_call.h"

namespace gpumeter::sim::mig {

nvmlReturn_t uuid(nvmlDevice_t device, char* out, unsigned length);
nvmlReturn_t name(nvmlDevice_t device, char* out, unsigned length);
nvmlReturn_t index(nvmlDevice_t device, unsigned* out);
nvmlReturn_t memory_info(nvmlDevice_t device, nvmlMemory_t* memory);
nvmlReturn_t memory_info_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory);
nvmlReturn_t compute_processes(NvmlFunction fn, nvmlDevice_t device, unsigned* count, nvmlProcessInfo_t* infos);
nvmlReturn_t compute_processes_v1(nvmlDevice_t device, unsigned* count, nvmlProcessInfo_v1_t* infos);
nvmlReturn_t no_processes(NvmlFunction fn, nvmlDevice_t device, unsigned* count);
nvmlReturn_t compute_mode(nvmlDevice_t device, unsigned* mode);

// The live instance with this MIG UUID (index into Scenario::mig.instances), if any.
std::optional<std::size_t> instance_by_uuid(const Session& session, const char* uuid);

// The GPU instance and compute instance ids a process record carries: those of the job's
// instance, or 0xFFFFFFFF outside MIG.
void instance_ids(const Scenario& scenario, const JobShare& job, unsigned& gpu_instance, unsigned& compute_instance);

}  // namespace gpumeter::sim::mig
