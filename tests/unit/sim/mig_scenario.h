#pragma once
// The MIG scenarios the MIG tests share. mig_yaml: an H100 in MIG mode split 3g.40gb + 2g.20gb +
// 1g.10gb + 1g.10gb, whose two 1g.10gb instances are re-partitioned into one 2g.20gb at 45 s, and
// an H100 beside it not in MIG mode. Expected placements (larger first, highest free): train 4:4 (GPU
// instance 1), infer 2:2 (6), small-a 1:1 (8), small-b 0:1 (7), merged 0:2 (5).

#include <string>

namespace gpumeter::sim::testing {

inline std::string mig_yaml(const std::string& extra_jobs = "") {
  return R"(
duration: 90
uuid_seed: mig-test
models:
  h100:
    name: NVIDIA H100 80GB HBM3
    architecture: hopper
    memory: 81920MiB
    power: {limit: 700, idle: 70, max: 690}
    temperature: {idle: 31, max: 72, memory_offset: 6}
    clocks:
      graphics: {idle: 345, max: 1980}
      sm: {idle: 345, max: 1980}
      memory: {idle: 2619, max: 2619}
      video: {idle: 765, max: 1545}
gpus:
  count: 2
  model: h100
mig:
  - gpu: 0
    layouts:
      - at: 0
        instances:
          - {name: train, profile: 3g.40gb}
          - {name: infer, profile: 2g.20gb}
          - {name: small-a, profile: 1g.10gb}
          - {name: small-b, profile: 1g.10gb}
      - at: 45
        instances:
          - {name: train, profile: 3g.40gb}
          - {name: infer, profile: 2g.20gb}
          - {name: merged, profile: 2g.20gb}
allocations:
  - {name: notebook-f, start: 47, end: 88, gpus: [0], mig: merged, kubernetes: {namespace: team-ml, pod: nb-f, container: notebook}}
jobs:
  - {name: train-a, start: 2, end: 88, gpus: [0], mig: train, pid: 61001, memory: 30GiB, utilization: 0.9,
     kubernetes: {namespace: team-vision, pod: train-a, container: trainer}}
  - {name: serve-b, start: 5, end: 80, gpus: [0], mig: infer, pid: 61002, memory: 8GiB, utilization: 0.5,
     kubernetes: {namespace: team-nlp, pod: serve-b, container: server}}
  - {name: asr-c, start: 20, end: 60, gpus: [0], mig: infer, pid: 61003, memory: 6GiB, utilization: 0.3,
     kubernetes: {namespace: team-speech, pod: asr-c, container: asr}}
  - {name: nb-d, start: 3, end: 40, gpus: [0], mig: small-a, pid: 61004, memory: 4GiB, utilization: 0.7}
  - {name: batch-e, start: 10, end: 44, gpus: [0], mig: small-b, pid: 61005, memory: 5GiB, utilization: 1.0}
  - {name: nb-f-kernel, allocation: notebook-f, start: 50, end: 85, gpus: [0], mig: merged, pid: 61006,
     memory: 12GiB, utilization: 0.6}
  - {name: train-g, start: 0, end: 90, gpus: [1], pid: 61007, memory: 40GiB, utilization: 0.8,
     kubernetes: {namespace: team-vision, pod: train-g, container: trainer}}
)" + extra_jobs;
}

// An A30 (4 compute slices, 4 memory slices) in MIG mode: four 1g.6gb from 0 s; at 45 s q2 and
// q3 give way to one 2g.12gb. Expected placements (highest free): q0 3 (GPU instance 6), q1 2
// (5), q2 1 (4), q3 0 (3), half 0:2 (1), which takes MIG index 2.
inline std::string a30_mig_yaml() {
  return R"(
duration: 90
uuid_seed: mig-a30
models:
  a30:
    name: NVIDIA A30
    memory: 24576MiB
    power: {limit: 165, idle: 32, max: 165}
    temperature: {idle: 30, max: 75, memory_offset: 5}
    clocks:
      graphics: {idle: 210, max: 1440}
      sm: {idle: 210, max: 1440}
      memory: {idle: 1215, max: 1215}
      video: {idle: 585, max: 1305}
gpus:
  count: 1
  model: a30
mig:
  - gpu: 0
    layouts:
      - at: 0
        instances:
          - {name: q0, profile: 1g.6gb}
          - {name: q1, profile: 1g.6gb}
          - {name: q2, profile: 1g.6gb}
          - {name: q3, profile: 1g.6gb}
      - at: 45
        instances:
          - {name: q0, profile: 1g.6gb}
          - {name: q1, profile: 1g.6gb}
          - {name: half, profile: 2g.12gb}
jobs:
  - {name: j0, start: 0, end: 90, gpus: [0], mig: q0, pid: 62001, memory: 4GiB, utilization: 0.8}
  - {name: j2, start: 5, end: 40, gpus: [0], mig: q2, pid: 62002, memory: 2GiB, utilization: 0.5}
  - {name: jh, start: 50, end: 85, gpus: [0], mig: half, pid: 62003, memory: 10GiB, utilization: 0.6}
)";
}

}  // namespace gpumeter::sim::testing
