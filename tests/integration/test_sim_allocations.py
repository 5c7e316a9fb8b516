"""Scheduler allocations in the simulator (tests/integration/scenarios/allocations.yaml): the
scenario loads, `sim truth` gives the hand-computed truth under both policies, and `sim procfs`
writes the Slurm job mapping over each job's allocation."""
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


if __name__ == "__main__":
    unittest.main()
