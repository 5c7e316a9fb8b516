"""Scheduler allocations in the simulator (tests/integration/scenarios/allocations.yaml): the
scenario loads, `sim truth` gives the hand-computed truth under both policies, and `sim procfs`
writes the Slurm job mapping and (with --slurm-cgroup) the jobs' cgroups over each job's
allocation."""
import json
import os
import subprocess
import tempfile
import unittest

from harness import BIN, DEPLOY_SCENARIOS, SCENARIOS

SCENARIO = os.path.join(SCENARIOS, "allocations.yaml")


def run(*args, env=None):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=60, env=env)


def truth(*args):
    r = run("sim", "truth", "--scenario", SCENARIO, "--format", "json", *args)
    if r.returncode != 0:
        raise AssertionError(r.stderr)
    return json.loads(r.stdout)


class SimAllocations(unittest.TestCase):
    def test_check_counts_the_allocations(self):
        r = run("sim", "check", "--scenario", SCENARIO)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("5 GPUs (5 x NVIDIA H100 80GB HBM3), 6 jobs, 4 allocations, 0 faults", r.stdout)

    def test_process_policy_counts_only_processes(self):
        t = truth("--policy", "process")
        self.assertNotIn("policy", t)  # the process policy's output is today's, key for key
        got = {(j["name"], j["gpu"]): j["allocated_seconds"] for j in t["jobs"]}
        self.assertEqual(got, {
            ("jupyter-alice-kernel", 0): 10.0,
            ("slurm-51300-step0", 1): 12.0, ("slurm-51300-step0", 2): 12.0,
            ("slurm-51300-step1", 1): 14.0,
            ("bypass-bob", 2): 4.0,
            ("eval-a-main", 3): 27.5,
            ("asr-b-main", 3): 12.5,
        })
        kernel = next(j for j in t["jobs"] if j["name"] == "jupyter-alice-kernel")
        self.assertEqual(kernel["kubernetes"],
                         {"namespace": "team-vision", "pod": "jupyter-alice", "container": "notebook"})
        self.assertEqual(t["gpus"][0]["idle_seconds"], 50.0)
        self.assertEqual(t, truth())  # the default

    def test_scheduler_policy_bills_allocations(self):
        t = truth("--policy", "scheduler")
        self.assertEqual(t["policy"], "scheduler")
        got = {(o["name"], o["gpu"]): (o["kind"], o["allocated_seconds"], o["idle_allocated_seconds"])
               for o in t["owners"]}
        self.assertEqual(got, {
            ("jupyter-alice", 0): ("allocation", 56.0, 46.0),
            ("slurm-51300", 1): ("allocation", 48.0, 22.0),
            ("slurm-51300", 2): ("allocation", 46.0, 34.0),
            ("eval-a", 3): ("allocation", 28.0, 4.5),
            ("asr-b", 3): ("allocation", 26.0, 13.5),
            ("bypass-bob", 2): ("job", 2.0, 0.0),
        })
        owners = {(o["name"], o["gpu"]): o for o in t["owners"]}
        self.assertEqual(owners[("slurm-51300", 1)]["slurm"], {"job_id": "51300"})
        self.assertEqual(owners[("slurm-51300", 1)]["uid"], 2051)
        self.assertEqual(owners[("jupyter-alice", 0)]["kubernetes"],
                         {"namespace": "team-vision", "pod": "jupyter-alice", "container": "notebook"})
        self.assertEqual(owners[("bypass-bob", 2)]["pid"], 53001)
        self.assertAlmostEqual(owners[("jupyter-alice", 0)]["busy_seconds"], 4.0, places=9)
        self.assertEqual([g["foreign_seconds"] for g in t["gpus"]], [0.0, 0.0, 4.0, 0.0, 0.0])
        self.assertEqual([g["idle_seconds"] for g in t["gpus"]], [4.0, 12.0, 12.0, 6.0, 60.0])
        # Both policies see the same busy time.
        process = truth()
        for a, b in zip(t["gpus"], process["gpus"]):
            self.assertEqual(a["busy_seconds"], b["busy_seconds"])

    def test_scheduler_table_and_bad_policy(self):
        r = run("sim", "truth", "--scenario", SCENARIO, "--policy", "scheduler")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("policy scheduler, window [0, 60) s", r.stdout)
        self.assertIn("IDLE_ALLOCATED_S", r.stdout)
        self.assertRegex(r.stdout, r"jupyter-alice\s+allocation\s+0\s+56\.000\s+4\.000\s+46\.000\s+pod team-vision/")
        r = run("sim", "truth", "--scenario", SCENARIO, "--policy", "pods")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--policy must be process or scheduler, got 'pods'", r.stderr)

    def test_scenarios_without_allocations_agree_under_both_policies(self):
        path = os.path.join(DEPLOY_SCENARIOS, "h100-8x-three-teams.yaml")
        p = json.loads(run("sim", "truth", "--scenario", path, "--format", "json").stdout)
        s = json.loads(run("sim", "truth", "--scenario", path, "--format", "json", "--policy", "scheduler").stdout)
        self.assertEqual([(j["name"], j["gpu"], j["allocated_seconds"]) for j in p["jobs"]],
                         [(o["name"], o["gpu"], o["allocated_seconds"]) for o in s["owners"]])

    def test_procfs_writes_the_slurm_job_mapping_over_the_allocation(self):
        with tempfile.TemporaryDirectory() as d:
            mapping = os.path.join(d, "run", "gpumeter-hpc-jobs")

            def at(t):
                r = run("sim", "procfs", "--scenario", SCENARIO, "--out", d, "--at", t)
                self.assertEqual(r.returncode, 0, r.stderr)
                files = {}
                for name in sorted(os.listdir(mapping)):
                    with open(os.path.join(mapping, name)) as f:
                        files[name] = f.read()
                return r.stdout, files, sorted(os.listdir(os.path.join(d, "proc")))

            out, files, procs = at("3")  # before the job's allocation
            self.assertEqual(files, {})
            self.assertIn("run/gpumeter-hpc-jobs: 0 GPUs allocated to Slurm jobs", out)
            out, files, procs = at("24")  # between the job's steps (no process runs): GPUs still held
            self.assertEqual(files, {"1": "51300\n", "2": "51300\n"})
            self.assertIn("run/gpumeter-hpc-jobs: 2 GPUs allocated to Slurm jobs", out)
            out, files, procs = at("35")  # step 1 runs on GPU 1
            self.assertEqual(files, {"1": "51300\n", "2": "51300\n"})
            self.assertIn("52101", procs)
            out, files, procs = at("52")  # the allocation ended: the epilog's removal
            self.assertEqual(files, {})

    def test_procfs_writes_the_slurm_jobs_cgroups_over_the_allocation(self):
        scope = os.path.join("sys", "fs", "cgroup", "system.slice", "slurmstepd.scope")
        for layout in ("v1", "v1-whitelist", "v2", "v2-sluid"):
            with self.subTest(layout=layout), tempfile.TemporaryDirectory() as d:
                def at(t):
                    r = run("sim", "procfs", "--scenario", SCENARIO, "--out", d, "--at", t, "--slurm-cgroup", layout)
                    self.assertEqual(r.returncode, 0, r.stderr)
                    return r.stdout

                def tree():
                    files = {}
                    root = os.path.join(d, "sys", "fs", "cgroup")
                    for dirpath, _, names in os.walk(root):
                        for name in names:
                            path = os.path.join(dirpath, name)
                            with open(path) as f:
                                files[os.path.relpath(path, root)] = f.read()
                    return files

                def batch_script():
                    pids = [p for p in os.listdir(os.path.join(d, "proc")) if p.isdigit() and int(p) >= 4000000]
                    self.assertEqual(len(pids), 1)
                    with open(os.path.join(d, "proc", pids[0], "environ"), "rb") as f:
                        env = dict(e.split("=", 1) for e in f.read().decode().split("\0") if e)
                    with open(os.path.join(d, "proc", pids[0], "cgroup")) as f:
                        return pids[0], env, f.read()

                out = at("3")  # before the job's allocation
                self.assertEqual(tree(), {})
                self.assertIn("sys/fs/cgroup: 0 Slurm job cgroups (%s)" % layout, out)
                out = at("24")  # between the job's steps: the cgroup and the batch script remain
                self.assertIn("sys/fs/cgroup: 1 Slurm job cgroups (%s)" % layout, out)
                pid, env, cgroup = batch_script()
                self.assertEqual({k: env[k] for k in ("SLURM_JOB_ID", "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES")},
                                 {"SLURM_JOB_ID": "51300", "SLURM_JOB_GPUS": "1,2", "CUDA_VISIBLE_DEVICES": "0,1"})
                if layout == "v1-whitelist":
                    self.assertEqual(tree(), {
                        "devices/slurm/uid_2051/job_51300/devices.list":
                            "c 195:1 rwm\nc 195:2 rwm\nc 195:254 rwm\nc 195:255 rwm\n",
                        "devices/slurm/uid_2051/job_51300/cgroup.procs": ""})
                    self.assertIn("12:devices:/slurm/uid_2051/job_51300/step_batch/task_0\n", cgroup)
                    continue
                if layout == "v1":
                    # Slurm 22.05 as run (docs/simulator.md): slurm_<node>, `a *:* rwm` at every
                    # level, the batch script in step_batch/task_0.
                    job = "devices/slurm_node0/uid_2051/job_51300"
                    self.assertEqual(tree(), {job + "/devices.list": "a *:* rwm\n", job + "/cgroup.procs": "",
                                              job + "/step_batch/devices.list": "a *:* rwm\n",
                                              job + "/step_batch/cgroup.procs": "",
                                              job + "/step_batch/task_0/devices.list": "a *:* rwm\n",
                                              job + "/step_batch/task_0/cgroup.procs": pid + "\n"})
                    self.assertIn("12:devices:/slurm_node0/uid_2051/job_51300/step_batch/task_0\n", cgroup)
                    at("35")  # step 1 runs on GPU 1
                    self.assertEqual(tree()[job + "/step_1/task_0/cgroup.procs"], "52101\n")
                    self.assertEqual(tree()[job + "/step_1/devices.list"], "a *:* rwm\n")
                    at("52")  # the allocation ended
                    self.assertEqual(tree(), {})
                    continue
                jobs = os.listdir(os.path.join(d, scope))
                self.assertEqual(len(jobs), 1)
                job = jobs[0]
                if layout == "v2":
                    self.assertEqual(job, "job_51300")
                else:
                    self.assertRegex(job, r"^s[0-9A-HJKMNP-TV-Z]{13}$")  # a SLUID names the job
                prefix = os.path.join("system.slice", "slurmstepd.scope", job)
                self.assertEqual(tree(), {prefix + "/step_batch/user/task_0/cgroup.procs": pid + "\n",
                                          prefix + "/step_batch/slurm/cgroup.procs": ""})
                self.assertEqual(cgroup, "0::/%s/step_batch/user/task_0\n" % prefix)
                at("35")  # step 1 runs on GPU 1
                self.assertEqual(tree()[prefix + "/step_1/user/task_0/cgroup.procs"], "52101\n")
                self.assertNotIn(prefix + "/step_0/user/task_0/cgroup.procs", tree())
                at("52")  # the allocation ended
                self.assertEqual(tree(), {})
                self.assertEqual(os.listdir(os.path.join(d, scope)), [])

    def test_procfs_rejects_an_unknown_slurm_cgroup_layout(self):
        with tempfile.TemporaryDirectory() as d:
            r = run("sim", "procfs", "--scenario", SCENARIO, "--out", d, "--at", "3", "--slurm-cgroup", "v3")
            self.assertEqual(r.returncode, 2)
            self.assertIn("--slurm-cgroup must be none, v1, v1-whitelist, v2 or v2-sluid, got 'v3'", r.stderr)
            self.assertEqual(os.listdir(d), [])


if __name__ == "__main__":
    unittest.main()
