"""Slurm attribution against a REAL Slurm: Debian 12's slurm-wlm 22.05 with munge, slurmdbd on
MariaDB, GRES GPUs and cgroup v1 (ConstrainDevices=yes, PrologFlags=Contain), run as a single-host
cluster by slurm_cluster.py. The agent runs on the simulated NVML of a 4-GPU node and reads the
REAL /proc and /sys/fs/cgroup (`attribution.slurm_cgroups: auto`, the scheduler policy). The jobs
are submitted with sbatch and srun, `--gres=gpu:N -A <account>`, and run `gpumeter burn` on the
simulated CUDA driver, so the process with the real pid in the job's cgroup is a GPU process on
the simulated node.

Choosing the GPU: under ConstrainDevices Slurm renumbers CUDA_VISIBLE_DEVICES from 0 inside the
job (a job holding GPUs 2,3 sees 0,1), and on a real node the job's device cgroup hides the other
GPUs from CUDA, so 0,1 are 2,3. The simulated CUDA driver does not see the device cgroup, so each
job runs burn with CUDA_VISIBLE_DEVICES removed and `--gpus` set to the global indexes Slurm
gives in SLURM_JOB_GPUS (batch) or SLURM_STEP_GPUS (a step). Slurm numbers GPUs by their device
minor (/dev/nvidiaN, made with mknod c 195 N), and the simulated NVML gives GPU N minor N.

Each test documents what real Slurm wrote (/proc/<pid>/cgroup, the environment, devices.list,
sacct) and bills its jobs: per job and GPU, the allocated seconds against the span of the job's
script (its first and last `date`), and the busy and memory seconds against burn's report; within
0.1% plus, at each edge, one collection interval (the Slurm cgroups are read every 1 s, and a
change counts from the read that sees it, docs/ledger.md "Edges") and the read's own time. The
tests share one cluster and one agent: each job has its own id, so its own `hpc_job` series.

Measured on the 2-CPU development VM: docs/attribution.md, "Verified against real Slurm 22.05"."""
import errno
import json
import os
import re
import tempfile
import time

import harness
from harness import BIN, SCENARIOS
from slurm_cluster import SlurmCluster

SCENARIO = os.path.join(SCENARIOS, "slurm-4x-h100.yaml")
GPUS = 4
INTERVAL = 1.0     # the agent's --collect.interval
REFRESH = 1.0      # attribution.slurm_refresh_interval
SOURCE_READ = 0.25  # one walk of the Slurm cgroups on a loaded machine (as test_allocations)
ALLOCATION_EDGE = INTERVAL + SOURCE_READ
TOLERANCE = 1e-3   # 0.1 %
IDLE_W, MAX_W = 70.0, 690.0  # slurm-4x-h100.yaml's H100: P = idle + (max - idle) x utilization
ACCOUNTS = ("chem", "phys")
COUNTERS = ("gpu_allocated_seconds_total", "gpu_busy_seconds_total", "gpu_memory_byte_seconds_total",
            "gpu_attributed_energy_joules_total", "gpu_idle_allocated_seconds_total")
GPU_VARIABLES = ("SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "CUDA_VISIBLE_DEVICES")

# A job script records its span; burn names the GPUs Slurm gave it by their global indexes.
SCRIPT = """#!/bin/sh
echo "start $(date +%s.%N)"
echo "job_gpus ${SLURM_JOB_GPUS:-} step_gpus ${SLURM_STEP_GPUS:-} cuda ${CUDA_VISIBLE_DEVICES:-}"
BODY
echo "end $(date +%s.%N)"
"""
BURN = ('env -u CUDA_VISIBLE_DEVICES "$GPUMETER_BIN" burn --sim.scenario "$GPUMETER_SIM_SCENARIO" '
        '--gpus "${GPUS_VAR}" --duration DURATION --duty DUTY --memory MEMORY --report "REPORT" >/dev/null')
# A job that holds its GPUs with no process on them until the test creates the file.
HOLD = 'while [ ! -e "RELEASE" ]; do sleep 0.05; done'


def burn(var, report, duration="3s", duty=50, memory="1GiB"):
    return (BURN.replace("GPUS_VAR", var).replace("DURATION", duration).replace("DUTY", str(duty))
            .replace("MEMORY", memory).replace("REPORT", report))


def script(body):
    return SCRIPT.replace("BODY", body)


def read(path):
    with open(path, "rb") as f:
        return f.read().decode("utf-8", "replace")


def proc_cgroups(pid):
    """/proc/<pid>/cgroup as {hierarchy: path}."""
    out = {}
    for line in read("/proc/%d/cgroup" % pid).splitlines():
        _, controllers, path = line.split(":", 2)
        out[controllers] = path
    return out


def proc_environ(pid):
    return dict(e.split("=", 1) for e in read("/proc/%d/environ" % pid).split("\0") if "=" in e)


def span_of(output):
    """The job script's (start, end) unix times from its output; end None when it was killed."""
    start = re.search(r"^start (\S+)$", output, re.M)
    end = re.search(r"^end (\S+)$", output, re.M)
    return float(start.group(1)), float(end.group(1)) if end else None


class SlurmRealTest(harness.AgentTestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="gpumeter-slurm-real-")
        cls.env = {"GPUMETER_BIN": BIN, "GPUMETER_SIM_SCENARIO": SCENARIO, "GPUMETER_SIM_EPOCH": repr(time.time()),
                   "GPUMETER_SIM_CUDA_DIR": os.path.join(cls.dir, "cuda")}
        # The node Epilog writes each job's GPU use into its record (docs/slurm.md), from the
        # agent the test starts below, whose address it reads from a file.
        cls.agent_address = os.path.join(cls.dir, "agent-address")
        cls.pricing = os.path.join(cls.dir, "pricing.yaml")
        with open(cls.pricing, "w") as f:
            f.write('currency: EUR\ngpu_models: {"*": {gpu_hour: 2, busy_gpu_hour: 1}}\n')
        epilog = ("#!/bin/sh\nexport SLURM_CONF=@SLURM_CONF@\n[ -r %s ] || exit 0\n"
                  "exec %s slurm epilog --agent \"$(cat %s)\" --pricing %s --deadline 8s >> %s 2>&1\n"
                  % (cls.agent_address, BIN, cls.agent_address, cls.pricing, os.path.join(cls.dir, "epilog.log")))
        cls.cluster = SlurmCluster(gpus=GPUS, epilog=epilog)
        cls.addClassCleanup(cls.stop_cluster)
        cls.cluster.start()
        for a in ACCOUNTS:
            cls.cluster.add_account(a)
        cls.config = os.path.join(cls.dir, "gpumeter.yaml")
        with open(cls.config, "w") as f:
            f.write("attribution:\n"
                    "  environment: [SLURM_JOB_ID, SLURM_JOB_GPUS, SLURM_STEP_GPUS, SLURM_JOB_ACCOUNT, "
                    "CUDA_VISIBLE_DEVICES]\n"
                    "  slurm_cgroups: auto\n"  # <rootfs>/sys/fs/cgroup: the real one
                    "  slurm_refresh_interval: %gs\n" % REFRESH)
            f.write("project:\n  default: unknown\n  rules:\n    - {source: slurm_account}\n")
            f.write("ledger:\n  allocation: scheduler\n  checkpoint_interval: 1s\n")
        # The real /proc (the default --path.procfs) and the real cgroup tree.
        cls.agent = harness.Agent(SCENARIO, env=cls.env, interval="%gs" % INTERVAL,
                                  extra_args=["--config.file", cls.config])
        cls.addClassCleanup(cls.agent.stop)
        cls.agent.wait_ready()
        with open(cls.agent_address, "w") as f:
            f.write("127.0.0.1:%d" % cls.agent.port)
        labels = {dict(ls)["gpu"]: dict(ls)["uuid"] for (n, ls), v in harness.parse_text(cls.agent.metrics()[1]).items()
                  if n == "gpu_info"}
        cls.uuids = {int(g): u for g, u in labels.items()}

    @classmethod
    def stop_cluster(cls):
        took = cls.cluster.stop()
        print("slurm cluster: %s, stopped in %.2f s" % (cls.cluster.timings, took))

    def setUp(self):
        super().setUp()
        self.jobs_dir = self.cluster.path("jobs")
        os.makedirs(self.jobs_dir, exist_ok=True)

    def tearDown(self):
        failures = self.failures_so_far()
        # No job of this test outlives it: the next one starts on free GPUs.
        self.cluster.run("scancel", "--full", "--partition=debug", check=False)
        self.cluster.wait_until(lambda: self.cluster.run("squeue", "-h", check=False).stdout.strip() == "",
                                "the test's jobs to end")
        if failures is None or failures:
            print("---- tail of the agent's log ----\n" + self.agent.process.log()[-4000:])
            print(self.cluster.log_tails(("slurmctld", "slurmd")))
            for name in sorted(os.listdir(self.jobs_dir)):
                if name.endswith(".out"):
                    print("---- %s ----\n%s" % (name, read(os.path.join(self.jobs_dir, name))[-1500:]))
        super().tearDown()

    # ---- what real Slurm wrote ---------------------------------------------------------------
    def job_cgroup(self, job, *parts):
        return os.path.join("/sys/fs/cgroup/devices", "slurm_" + self.cluster.node, "uid_0", "job_%s" % job, *parts)

    def pids_in(self, job, step, task="task_0"):
        path = self.job_cgroup(job, "step_" + step, *([task] if task else []), "cgroup.procs")
        try:
            return [int(p) for p in read(path).split()]
        except FileNotFoundError:
            return []

    def wait_burn(self, job, step):
        """The pid of the burn process running in the job's step (devices: .../step_<step>/task_0),
        once `env` has exec'd it (before, its environment is not burn's yet)."""
        def find():
            for pid in self.pids_in(job, step):
                try:
                    argv = read("/proc/%d/cmdline" % pid).split("\0")
                except FileNotFoundError:
                    continue
                if len(argv) > 1 and argv[0] == BIN and argv[1] == "burn":
                    return pid
            return None
        return self.cluster.wait_until(find, "burn in job %s step %s" % (job, step), timeout=30)

    def assert_real_layout(self, pid, job, step, task=True):
        """The process sits where real Slurm 22.05 puts a job's task on cgroup v1:
        devices:/slurm_<node>/uid_0/job_<id>/step_<step>/task_0, freezer one level up."""
        cg = proc_cgroups(pid)
        base = "/slurm_%s/uid_0/job_%s/step_%s" % (self.cluster.node, job, step)
        self.assertEqual(cg["devices"], base + ("/task_0" if task else ""), cg)
        self.assertEqual(cg["freezer"], base, cg)
        # Under a default-allow parent the kernel lists `a *:* rwm` whatever Slurm denied
        # (docs/attribution.md): the agent must take the GPUs from the environment.
        self.assertEqual(read(self.job_cgroup(job, "devices.list")), "a *:* rwm\n")

    def report(self, name):
        with open(os.path.join(self.jobs_dir, name)) as f:
            return json.load(f)

    # ---- the agent ---------------------------------------------------------------------------
    def scrape(self):
        return harness.parse_text(self.agent.metrics()[1])

    def series(self, samples, job):
        """{(counter, gpu, project, user): value} of the job's ledger series."""
        out = {}
        for (n, ls), v in samples.items():
            labels = dict(ls)
            if n in COUNTERS and labels.get("hpc_job") == str(job):
                key = (n, int(labels["gpu"]), labels["project"], labels["user"])
                out[key] = out.get(key, 0.0) + v
        return out

    def wait_billed(self, jobs):
        """Polls until the agent has seen the jobs end: their cgroups are gone and two scrapes
        more than one collection apart give their series the same values. Returns the scrape."""
        for job in jobs:
            self.cluster.wait_until(lambda: not os.path.exists(self.job_cgroup(job)), "job %s's cgroup removed" % job)
        last = [None, 0.0]

        def settled():
            s = self.scrape()
            now = {j: self.series(s, j) for j in jobs}
            if last[0] == now and time.monotonic() - last[1] > 1.5 * INTERVAL:
                return s
            if last[0] != now:
                last[0], last[1] = now, time.monotonic()
            return None
        return harness.wait_until(settled, 30, interval=0.25, what="the jobs' ledger series to settle")

    def wait_allocated(self, job, gpus):
        """Polls until the agent bills `gpus` to the job as allocated with no process on them,
        which it can only know from the job's cgroup and its processes' environment."""
        def held():
            got = self.series(self.scrape(), job)
            idle = {g for (n, g, _, _), v in got.items() if n == "gpu_idle_allocated_seconds_total" and v > 0}
            return idle == set(gpus) and {g for (_, g, _, _) in got} == set(gpus)
        harness.wait_until(held, 15, what="job %s's GPUs %r allocated before any process" % (job, gpus))

    def check_job(self, samples, job, account, span, burns, gpus):
        """The job's series against the truth: on exactly `gpus`; allocated seconds on each the
        script's span; busy and memory seconds burn's (`burns`: GPU index -> burn's per-GPU
        report, absent for a GPU the job held with no process); the account as project."""
        got = self.series(samples, job)
        self.assertTrue(got, "no ledger series for job %s" % job)
        self.assertEqual({g for (_, g, _, _) in got}, set(gpus), "job %s billed on %r" % (job, got))
        per_gpu = {}
        for (n, g, project, user), v in got.items():
            per_gpu.setdefault(g, {}).setdefault(n, 0.0)
            per_gpu[g][n] += v
        wall = span[1] - span[0]
        for g in gpus:
            c = per_gpu[g]
            allocated = c.get("gpu_allocated_seconds_total", 0.0)
            print("job %s gpu %d: allocated %.3f s over a %.3f s span; busy %.3f s; energy %.1f J" % (
                job, g, allocated, wall, c.get("gpu_busy_seconds_total", 0.0),
                c.get("gpu_attributed_energy_joules_total", 0.0)))
            self.assertLessEqual(abs(allocated - wall), TOLERANCE * wall + 2 * ALLOCATION_EDGE,
                                 "job %s GPU %d: allocated %.3f s, the job ran %.3f s" % (job, g, allocated, wall))
            b = burns.get(g)
            busy = c.get("gpu_busy_seconds_total", 0.0)
            memory = c.get("gpu_memory_byte_seconds_total", 0.0)
            idle = c.get("gpu_idle_allocated_seconds_total", 0.0)
            # The job held the GPU alone, so its energy is all the GPU drew over its span: the
            # idle power throughout and the power above it while burn kept the GPU busy.
            energy = c.get("gpu_attributed_energy_joules_total", 0.0)
            if b is None:
                self.assertEqual(busy, 0.0, "job %s GPU %d ran nothing" % (job, g))
                self.assertEqual(memory, 0.0)
                self.assertAlmostEqual(idle, allocated, delta=1e-6)
                self.assertLessEqual(abs(energy - IDLE_W * wall), TOLERANCE * IDLE_W * wall + IDLE_W * 2 * ALLOCATION_EDGE,
                                     "job %s GPU %d: energy %.1f J holding it idle %.3f s" % (job, g, energy, wall))
                continue
            bound = harness.allowed_deviation(b["busy_seconds"], b["seconds"], 2, TOLERANCE, INTERVAL)
            self.assertLessEqual(abs(busy - b["busy_seconds"]), bound,
                                 "job %s GPU %d: busy %.3f s, burn reports %.3f s" % (job, g, busy, b["busy_seconds"]))
            want = IDLE_W * wall + (MAX_W - IDLE_W) * b["busy_seconds"]
            self.assertLessEqual(abs(energy - want),
                                 TOLERANCE * want + IDLE_W * 2 * ALLOCATION_EDGE + (MAX_W - IDLE_W) * bound,
                                 "job %s GPU %d: energy %.1f J, the truth %.1f J" % (job, g, energy, want))
            want = b["memory_bytes"] * b["seconds"]
            self.assertLessEqual(abs(memory - want),
                                 harness.allowed_deviation(want, b["seconds"], 2, TOLERANCE, INTERVAL),
                                 "job %s GPU %d: memory %.4g B s, burn held %.4g" % (job, g, memory, want))
            # Idle-allocated: the job's time on the GPU with burn not there.
            self.assertLessEqual(abs(idle - (allocated - b["seconds"])), 2 * ALLOCATION_EDGE,
                                 "job %s GPU %d: idle-allocated %.3f s" % (job, g, idle))
        # The project is the job's account (rules: slurm_account) once a process of the job has
        # been seen on the GPU: an allocation's owner has the scheduler's labels only
        # (docs/ledger.md, "The scheduler policy"), and takes the project and user of its first
        # process. Before burn started, and for a collection or two after (one to see it, one
        # for the allocation to take its labels), the job's GPU is the default project's.
        for (n, g, project, user), v in got.items():
            self.assertIn(project, (account, "unknown"), (job, n, g, user))
            if project == "unknown" and n == "gpu_allocated_seconds_total" and burns.get(g) is not None:
                before = burns[g]["start_unix"] - span[0]
                self.assertLessEqual(v, before + 2 * INTERVAL + SOURCE_READ,
                                     "job %s GPU %d before its account" % (job, g))
        if burns:
            self.assertTrue(any(p == account and u == "root" for (_, _, p, u) in got), got)

    def busy_of_gpu(self, samples, gpu):
        """The GPU's busy seconds, every owner's."""
        return sum(v for (n, ls), v in samples.items() if n == "gpu_busy_seconds_total" and dict(ls)["gpu"] == str(gpu))

    def check_invariants(self, samples):
        """Per GPU, the owners' allocated seconds add up to the seconds the ledger covered."""
        covered = {dict(ls)["gpu"]: v for (n, ls), v in samples.items() if n == "gpumeter_ledger_covered_seconds_total"}
        self.assertEqual(set(covered), {str(g) for g in range(GPUS)})
        for gpu, total in covered.items():
            alloc = sum(v for (n, ls), v in samples.items()
                        if n == "gpu_allocated_seconds_total" and dict(ls)["gpu"] == gpu)
            self.assertAlmostEqual(alloc, total, delta=1e-9 * total + 1e-6, msg="gpu %s" % gpu)

    def check_sacct(self, job, account, gpus):
        """Slurm's own accounting names the same job, account and GPU count: a report joins
        the agent's hpc_job to sacct's JobID."""
        def ended():
            rows = {r["JobID"]: r for r in self.cluster.sacct(job)}
            row = rows.get(str(job))
            return rows if row is not None and row["State"] not in ("PENDING", "RUNNING") else None
        rows = self.cluster.wait_until(ended, "job %s ended in sacct" % job, timeout=15)
        self.assertEqual(rows[str(job)]["Account"], account)
        self.assertIn("gres/gpu=%d" % gpus, rows[str(job)]["AllocTRES"])

    def hold(self, account, gpus=1):
        """A batch job holding `gpus` GPUs with no process on them; returns (job, release file)."""
        release = os.path.join(self.jobs_dir, "release-%d" % time.monotonic_ns())
        job = self.cluster.sbatch(script(HOLD.replace("RELEASE", release)), "--gres=gpu:%d" % gpus, "-A", account,
                                  env=self.env)
        self.cluster.wait_state(job, ("RUNNING",))
        self.cluster.wait_until(lambda: self.pids_in(job, "batch"), "job %s's batch script" % job)
        return job, release

    # ---- the tests ---------------------------------------------------------------------------
    def test_two_batch_jobs_each_billed_on_its_own_gpu_pair(self):
        # Both jobs wait for the test to start their burns: the second one may be scheduled a
        # pass later than the first (sched/builtin), and they are to hold their GPUs together.
        release = os.path.join(self.jobs_dir, "release-pair")
        jobs = {}
        for account, duration in (("chem", "3s"), ("phys", "4s")):
            body = HOLD.replace("RELEASE", release) + "\n" + burn("SLURM_JOB_GPUS", "burn-%s.json" % account,
                                                                   duration=duration)
            jobs[account] = self.cluster.sbatch(script(body), "--gres=gpu:2", "-A", account, env=self.env)
        for job in jobs.values():
            self.cluster.wait_state(job, ("RUNNING",))
        # Slurm gives the first job the first free GPUs (checked against SLURM_JOB_GPUS below).
        self.wait_allocated(jobs["chem"], [0, 1])
        self.wait_allocated(jobs["phys"], [2, 3])
        with open(release, "w"):
            pass
        pids = {}
        for account, job in jobs.items():
            pid = pids[account] = self.wait_burn(job, "batch")
            self.assert_real_layout(pid, job, "batch")
            env = proc_environ(pid)
            self.assertEqual(env["SLURM_JOB_ID"], job)
            self.assertEqual(env["SLURM_JOB_ACCOUNT"], account)
            self.assertNotIn("SLURM_STEP_GPUS", env)  # the batch step has none
            self.assertNotIn("CUDA_VISIBLE_DEVICES", env)  # removed for burn, see the module's doc
        # While they run, each burn is a process of its own job and account.
        seen = {}

        def listed():
            for (n, ls), v in self.scrape().items():
                labels = dict(ls)
                if n == "gpu_process_memory_used_bytes" and v > 0:
                    seen.setdefault(labels["pid"], set()).add((labels["hpc_job"], labels["project"]))
            return all((jobs[a], a) in seen.get(str(pids[a]), ()) for a in jobs)
        harness.wait_until(listed, 15, what="both burns listed with their job and account")
        for a in jobs:  # and never as anyone else's
            self.assertEqual({j for j, _ in seen[str(pids[a])]}, {jobs[a]}, seen)
        samples = self.wait_billed(list(jobs.values()))
        pairs = []
        for account, job in jobs.items():
            self.assertEqual(self.cluster.wait_state(job, ("COMPLETED",)), "COMPLETED")
            out = self.cluster.output(job)
            # Under ConstrainDevices CUDA_VISIBLE_DEVICES is renumbered; SLURM_JOB_GPUS is global.
            m = re.search(r"^job_gpus (\S+) step_gpus  cuda (\S+)$", out, re.M)
            self.assertIsNotNone(m, out)
            self.assertEqual(m.group(2), "0,1")
            gpus = [int(g) for g in m.group(1).split(",")]
            pairs.append(tuple(gpus))
            report = self.report("burn-%s.json" % account)
            self.assertEqual(report["pid"], pids[account])
            burns = {g["index"]: g for g in report["gpus"]}
            self.assertEqual(sorted(burns), gpus)
            for g, b in burns.items():
                self.assertEqual(b["uuid"], self.uuids[g])  # the simulated NVML's GPU of that index
            self.check_job(samples, job, account, span_of(out), burns, gpus)
            self.check_sacct(job, account, 2)
        self.assertEqual(sorted(pairs), [(0, 1), (2, 3)])
        self.check_invariants(samples)

    def test_srun_step_inside_a_batch_job(self):
        holder, release = self.hold("phys")  # GPU 0: the step's job gets GPUs 1 and 2
        body = "srun --gres=gpu:1 sh -c '%s'" % burn("SLURM_STEP_GPUS", "burn-step.json").replace("'", "'\\''")
        job = self.cluster.sbatch(script(body), "--gres=gpu:2", "-A", "chem", env=self.env)
        pid = self.wait_burn(job, "0")
        self.assert_real_layout(pid, job, "0")
        env = proc_environ(pid)
        # A step's SLURM_STEP_GPUS is global; the batch script's SLURM_JOB_GPUS is inherited.
        self.assertEqual((env["SLURM_JOB_ID"], env["SLURM_STEP_ID"]), (job, "0"))
        self.assertEqual(env["SLURM_JOB_GPUS"], "1,2")
        self.assertEqual(env["SLURM_STEP_GPUS"], "1")
        # The batch script is still in its own step, with the job's GPUs.
        shell = self.pids_in(job, "batch")
        self.assertTrue(shell)
        self.assertEqual(proc_environ(shell[0])["SLURM_JOB_GPUS"], "1,2")
        samples = self.wait_billed([job])
        out = self.cluster.output(job)
        self.assertIn("job_gpus 1,2 step_gpus  cuda 0,1\n", out)
        burns = {g["index"]: g for g in self.report("burn-step.json")["gpus"]}
        self.assertEqual(sorted(burns), [1])
        # Both of the job's GPUs are its own for the whole job; only GPU 1 was busy.
        self.check_job(samples, job, "chem", span_of(out), burns, [1, 2])
        self.check_sacct(job, "chem", 2)
        with open(release, "w"):
            pass
        samples = self.wait_billed([holder])
        self.check_job(samples, holder, "unknown", span_of(self.cluster.output(holder)), {}, [0])
        self.check_invariants(samples)

    def test_job_allocating_srun(self):
        holder, release = self.hold("chem")  # GPU 0: the srun gets GPUs 1 and 2
        release_step = os.path.join(self.jobs_dir, "release-srun")
        step = ("echo \"start $(date +%%s.%%N)\"; %s; %s; echo \"end $(date +%%s.%%N)\""
                % (HOLD.replace("RELEASE", release_step),
                   burn("SLURM_STEP_GPUS", os.path.join(self.jobs_dir, "burn-srun.json"))))
        srun = self.cluster.srun_background("--gres=gpu:2", "-A", "phys", "sh", "-c", step, env=self.env)
        try:
            jobs = self.cluster.wait_until(
                lambda: self.cluster.run("squeue", "-h", "-A", "phys", "-o", "%i", check=False).stdout.split(),
                "the srun's job")
            self.assertEqual(len(jobs), 1, jobs)
            job = jobs[0]
            # From SLURM_STEP_GPUS, the only variable this job's processes have.
            self.wait_allocated(job, [1, 2])
            with open(release_step, "w"):
                pass
            pid = self.wait_burn(job, "0")
            self.assert_real_layout(pid, job, "0")
            env = proc_environ(pid)
            # Only SLURM_STEP_GPUS, global; no SLURM_JOB_GPUS.
            self.assertEqual(env["SLURM_STEP_GPUS"], "1,2")
            self.assertNotIn("SLURM_JOB_GPUS", env)
            self.assertEqual(env["SLURM_JOB_ACCOUNT"], "phys")
            out, err = srun.communicate(timeout=60)
        finally:
            if srun.poll() is None:
                srun.kill()
                srun.communicate()
        self.assertEqual(srun.returncode, 0, err)
        samples = self.wait_billed([job])
        burns = {g["index"]: g for g in self.report("burn-srun.json")["gpus"]}
        self.assertEqual(sorted(burns), [1, 2])
        self.check_job(samples, job, "phys", span_of(out), burns, [1, 2])
        self.check_sacct(job, "phys", 2)
        with open(release, "w"):
            pass
        self.wait_billed([holder])

    def test_the_epilog_writes_the_jobs_gpu_use_into_its_record(self):
        """gpumeter slurm epilog, run by slurmd at the job's end, writes the job's GPU use as its
        AdminComment; sacct shows it, and it is the ledger's, priced."""
        job = self.cluster.sbatch(script(burn("SLURM_JOB_GPUS", "burn-epilog.json", duration="2s", duty=50)),
                                  "--gres=gpu:2", "-A", "chem", env=self.env)
        self.assertEqual(self.cluster.wait_state(job, ("COMPLETED",)), "COMPLETED")
        samples = self.wait_billed([job])

        def comment():
            rows = {r["JobID"]: r for r in self.cluster.sacct(job, ("JobID", "AdminComment"))}
            text = rows.get(str(job), {}).get("AdminComment", "")
            return text if text.startswith("gpumeter=1;") else None
        text = self.cluster.wait_until(comment, "job %s's AdminComment in sacct" % job, timeout=20)
        self.assertNotIn("`", text)  # nothing sacctmgr would have mangled
        got = dict(kv.split("=", 1) for kv in text.split(";"))
        ledger = {}
        for (n, gpu, _, _), v in self.series(samples, job).items():
            ledger[n] = ledger.get(n, 0.0) + v
        self.assertEqual(got["gpus"], "2")
        # The epilog read the ledger once it had integrated the GPUs after the job's end; the
        # allocation itself ends when the agent sees the job's cgroup gone, up to one read of the
        # cgroups and one collection later.
        self.assertAlmostEqual(float(got["busy_seconds"]), ledger["gpu_busy_seconds_total"], delta=1e-6)
        self.assertAlmostEqual(float(got["gpu_seconds"]), ledger["gpu_allocated_seconds_total"],
                               delta=2 * 2 * ALLOCATION_EDGE)
        self.assertAlmostEqual(float(got["memory_gib_hours"]) * 2**30 * 3600, ledger["gpu_memory_byte_seconds_total"],
                               delta=1e-6 * max(1.0, ledger["gpu_memory_byte_seconds_total"]) + 2**30 * 3600 * 1e-6)
        # Energy as the ledger has it, to the comment's 1e-6 kWh, less the allocation's edges at idle power.
        self.assertLessEqual(abs(float(got["energy_kwh"]) * 3.6e6 - ledger["gpu_attributed_energy_joules_total"]),
                             3.6 + 2 * 2 * ALLOCATION_EDGE * IDLE_W)
        self.assertEqual(got["currency"], "eur")  # sacctmgr lowercases the comment: written so
        want = float(got["gpu_seconds"]) / 3600 * 2 + float(got["busy_seconds"]) / 3600 * 1
        self.assertAlmostEqual(float(got["cost"]), want, delta=2e-6)
        self.assertGreater(float(got["busy_seconds"]), 0.5)  # 2 GPUs x 2 s at 50 %, less the edges
        with open(os.path.join(self.dir, "epilog.log")) as f:
            self.assertIn("job %s: wrote gpumeter=1;" % job, f.read())

    def test_extern_step_is_no_gpu_work(self):
        before = self.scrape()
        holder, release = self.hold("chem", gpus=2)
        # PrologFlags=Contain: the extern step holds slurmstepd and a `sleep` placeholder, in
        # step_extern with no task_ level, and none of the job's GPU variables.
        sleeps = [p for p in self.pids_in(holder, "extern", task=None)
                  if read("/proc/%d/cmdline" % p).startswith("sleep\0")]
        self.assertEqual(len(sleeps), 1, self.pids_in(holder, "extern", task=None))
        placeholder = sleeps[0]
        self.assert_real_layout(placeholder, holder, "extern", task=False)
        env = proc_environ(placeholder)
        self.assertEqual([v for v in GPU_VARIABLES + ("SLURM_JOB_ID",) if v in env], [])
        # The agent bills the GPUs to the job, with no process on them.
        def held():
            s = self.scrape()
            got = self.series(s, holder)
            return got and all(v > 1.0 for (n, g, p, u), v in got.items() if n == "gpu_allocated_seconds_total") and s
        s = harness.wait_until(held, 15, what="the holder's GPUs billed")
        processes = [dict(ls) for (n, ls), v in s.items() if n == "gpu_process_memory_used_bytes"]
        self.assertNotIn(str(placeholder), [p["pid"] for p in processes])
        self.assertEqual([p for p in processes if p.get("hpc_job") == holder], [])
        with open(release, "w"):
            pass
        samples = self.wait_billed([holder])
        gpus = sorted({g for (_, g, _, _) in self.series(samples, holder)})
        self.assertEqual(gpus, [0, 1])
        # Allocated all along, busy never: no GPU work is billed to anyone for the extern step.
        # With no process of the job on its GPUs, the agent never learns its account: the
        # allocation is the default project's (docs/attribution.md), while sacct has it.
        self.check_job(samples, holder, "unknown", span_of(self.cluster.output(holder)), {}, gpus)
        self.check_sacct(holder, "chem", 2)
        for g in gpus:
            self.assertEqual(self.busy_of_gpu(samples, g), self.busy_of_gpu(before, g), "GPU %d" % g)
        self.check_invariants(samples)

    def test_a_removed_cgroups_files_answer_enodev(self):
        # What the agent meets when a job's cgroup goes between its open() of a file and the
        # read(): ENODEV from cgroupfs, not ENOENT (src/attribution/slurm_cgroups.h,
        # slurm_cgroup_entry_gone). Checked here on a cgroup of the test's own in the devices
        # hierarchy Slurm uses.
        probe = "/sys/fs/cgroup/devices/gpumeter-probe-%d" % os.getpid()
        os.mkdir(probe)
        try:
            fds = [os.open(os.path.join(probe, name), os.O_RDONLY) for name in ("cgroup.procs", "devices.list")]
        finally:
            os.rmdir(probe)
        for fd in fds:
            with self.assertRaises(OSError) as e:
                os.read(fd, 4096)
            os.close(fd)
            self.assertEqual(e.exception.errno, errno.ENODEV)

    def test_cgroups_vanishing_while_the_agent_reads(self):
        before = self.scrape()
        log_before = len(self.agent.process.log())
        # A job cancelled in the middle of its burn, and short jobs starting and ending (each
        # cgroup made and removed in about 0.2 s) while the agent walks the tree every second.
        # burn is the batch task itself (exec): scancel's SIGTERM reaches it, and it reports;
        # under a shell, slurmstepd SIGKILLs what is left once the shell has died of it.
        job = self.cluster.sbatch(script("exec " + burn("SLURM_JOB_GPUS", "burn-cancelled.json", duration="60s")),
                                  "--gres=gpu:1", "-A", "chem", env=self.env)
        pid = self.wait_burn(job, "batch")
        harness.wait_until(lambda: any(n == "gpu_process_memory_used_bytes" and dict(ls)["pid"] == str(pid) and v > 0
                                       for (n, ls), v in self.scrape().items()), 15, what="the burn listed")
        churn = [self.cluster.srun("--gres=gpu:1", "-A", "phys", "true").returncode for _ in range(6)]
        self.cluster.scancel(job)
        # The job holds its GPU until its last process, burn, is gone: seen here within a poll.
        self.cluster.wait_until(lambda: not os.path.exists("/proc/%d" % pid), "burn to exit after scancel", timeout=15)
        ended = time.time()
        churn += [self.cluster.srun("--gres=gpu:1", "-A", "phys", "true").returncode for _ in range(6)]
        self.assertEqual(churn, [0] * 12)
        samples = self.wait_billed([job])
        self.assertTrue(self.agent.process.alive())
        self.assertEqual(harness.http_get(self.agent.base + "/-/healthy")[0], 200)
        # Nothing said about it: a job that ends while it is read is left out silently.
        log = self.agent.process.log()[log_before:]
        self.assertEqual([line for line in log.splitlines() if "level=warn" in line or "level=error" in line], [])
        report = self.report("burn-cancelled.json")
        self.assertTrue(report["interrupted"])
        start, _ = span_of(self.cluster.output(job))
        burns = {g["index"]: g for g in report["gpus"]}
        self.assertEqual(len(burns), 1)
        g, b = next(iter(burns.items()))
        self.assertLessEqual(b["end_unix"], ended)
        self.check_job(samples, job, "chem", (start, ended), burns, [g])
        self.check_invariants(samples)
        # Counters only grow.
        for key, v in before.items():
            if key[0] in COUNTERS and key in samples:
                self.assertGreaterEqual(samples[key], v, key)
        self.assertEqual(self.cluster.sacct(job)[0]["State"].split()[0], "CANCELLED")


if __name__ == "__main__":
    import unittest
    unittest.main()
