"""The soak's scenario: a day (or any duration) of jobs starting and stopping on 8 H100 GPUs, every
owner resolvable, generated deterministically from a seed.

Owners are a fixed pool, as on a real node: long-lived Kubernetes pods (nlp, vision, speech) whose
processes come and go, Slurm allocations (climate under cgroup v2, genomics under cgroup v1) that
run one step after another, and Docker containers (recsys). Each GPU has two lanes, each a
sequence of jobs with gaps between them; every job is a new process (its own pid) at a constant
utilization of at most 50 %, so a GPU is never asked for more than 100 % and each process's share
is exact. Each lane plays three owners, and its first three jobs are of the shortest length and give
each of them a turn, so every owner has appeared early in the run and the owner set stops growing.

The driver's sample buffers are made deep enough to hold `history_wall_seconds` of wall time at
the given time scale (a real driver holds about 20 s of wall time); at a scale S the simulator's
default buffer (20 s of scenario time) would hold 20/S s of wall time, less than one collection.
"""
import math
import random

MODEL = """models:
  h100-sxm:
    name: NVIDIA H100 80GB HBM3
    memory: 81559MiB
    power: {limit: 700, idle: 70, max: 690}
    temperature: {idle: 31, max: 72, memory_offset: 6}
    clocks:
      graphics: {idle: 345, max: 1980}
      sm: {idle: 345, max: 1980}
      memory: {idle: 2619, max: 2619}
      video: {idle: 765, max: 1545}
    pcie: {generation: 5, width: 16, device_id: 0x2330, subsystem_id: 0x16C110DE}
    samples: {utilization_period: 200ms, utilization_depth: %d, power_period: 100ms, power_depth: %d}
"""

USERS = {"dana": 1000, "bob": 1001, "erin": 1002, "frank": 1003, "alice": 2050, "carol": 2051}
GPUS = 8
LANES = 2  # per GPU, each at most 50 % utilization


def _hex(rng, n):
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def _uuid(rng):
    return "%s_%s_%s_%s_%s" % (_hex(rng, 8), _hex(rng, 4), _hex(rng, 4), _hex(rng, 4), _hex(rng, 12))


def owner_pool(rng):
    """12 owners: 6 pods, 4 Slurm allocations, 2 Docker containers. Each is a dict of job keys."""
    pool = []
    for team, uid, qos in (("nlp", 1000, "burstable"), ("vision", 1001, "besteffort"), ("speech", 1002, "")):
        for n in range(2):
            pod = "%s-train-%d-%s" % (team, n, _hex(rng, 5))
            slice_ = "kubepods-%s.slice/kubepods-%s-pod%s.slice" % (qos, qos, _uuid(rng)) if qos else \
                "kubepods-pod%s.slice" % _uuid(rng)
            pool.append({
                "uid": uid,
                "cgroup": "/kubepods.slice/%s/cri-containerd-%s.scope" % (slice_, _hex(rng, 64)),
                "kubernetes": "{namespace: team-%s, pod: %s, container: worker}" % (team, pod),
                "env": "{GPUMETER_PROJECT: %s, POD_NAMESPACE: team-%s, HOSTNAME: %s}" % (team, team, pod),
            })
    for team, uid, version in (("climate", 2050, 2), ("genomics", 2051, 1)):
        for n in range(2):
            job = 70000 + 10 * len(pool) + n
            cgroup = ("/system.slice/slurmstepd.scope/job_%d/step_0/user/task_0" % job if version == 2
                      else "/slurm/uid_%d/job_%d/step_0" % (uid, job))
            pool.append({
                "uid": uid, "cgroup": cgroup, "cgroup_version": version,
                "env": '{GPUMETER_PROJECT: %s, SLURM_JOB_ID: "%d", SLURM_JOB_ACCOUNT: %s}' % (team, job, team),
            })
    for n in range(2):
        pool.append({"uid": 1003, "cgroup": "/system.slice/docker-%s.scope" % _hex(rng, 64),
                     "env": "{GPUMETER_PROJECT: recsys}"})
    return pool


def generate(duration, time_scale, interval=1.0, seed=13, history_wall_seconds=20.0):
    """Returns (YAML text, number of jobs). `duration` in scenario seconds (whole)."""
    duration = int(duration)
    rng = random.Random(seed)
    pool = owner_pool(rng)
    # A job must be listed by the driver at several collections: at least 4 intervals long.
    min_len = max(int(math.ceil(4 * interval * time_scale)), duration // 150, 10)
    max_len = max(duration // 15, 2 * min_len)
    max_gap = max(duration // 100, 1)
    first = max(int(math.ceil(2 * interval * time_scale)), 3)  # after the agent's first collections
    util_depth = min(10000, max(100, int(math.ceil(history_wall_seconds * time_scale / 0.2))))
    power_depth = min(10000, max(120, int(math.ceil(history_wall_seconds * time_scale / 0.1))))
    jobs = []
    for gpu in range(GPUS):
        for lane in range(LANES):
            owners = [(gpu * LANES + lane + k * GPUS * LANES // 3) % len(pool) for k in range(3)]
            t = first + rng.randint(0, max_gap)
            n = 0
            while True:
                length = min_len if n < 3 else rng.randint(min_len, max_len)
                if t + length > duration - 1:
                    break
                owner = owners[n % 3] if n < 3 else rng.choice(owners)
                jobs.append((t, t + length, gpu, owner, rng.choice((10, 15, 20, 25, 30, 40, 50)),
                             rng.choice((2, 4, 8, 16, 24, 32))))
                t += length + rng.randint(0, max_gap)
                n += 1
    jobs.sort()
    out = ["# Generated by bench/soak_scenario.py (seed %d) for a time scale of %g." % (seed, time_scale),
           "description: soak, %d s of jobs starting and stopping on 8 GPUs, every owner resolvable" % duration,
           'driver_version: "550.90.07"', "duration: %d" % duration, "uuid_seed: soak-%d" % seed, "",
           MODEL % (util_depth, power_depth), "gpus:\n  count: %d\n  model: h100-sxm\n" % GPUS,
           "users: {%s}\n" % ", ".join("%s: %d" % kv for kv in USERS.items()), "jobs:"]
    for i, (start, end, gpu, owner, util, mem) in enumerate(jobs):
        o = pool[owner]
        out.append("  - name: job-%04d" % i)
        out.append("    start: %d\n    end: %d\n    gpus: [%d]\n    pid: %d\n    uid: %d"
                   % (start, end, gpu, 100000 + i, o["uid"]))
        out.append("    cgroup: %s" % o["cgroup"])
        if o.get("cgroup_version") == 1:
            out.append("    cgroup_version: 1")
        if "kubernetes" in o:
            out.append("    kubernetes: %s" % o["kubernetes"])
        out.append("    env: %s" % o["env"])
        out.append("    memory: %dGiB\n    utilization: %d%%" % (mem, util))
    return "\n".join(out) + "\n", len(jobs)
