"""`gpumeter snapshot` on the simulated node of scenarios/ledger-mixed.yaml: its processes, owners
and per-process utilization against the simulator's ground truth, with the host side played by
`gpumeter sim procfs` and `gpumeter sim kubelet`; the ledger totals of a prepared state file; a
corrupt state file reported and left untouched; and the exit codes for no NVML and bad input."""
import json
import os
import re
import subprocess
import tempfile
import time
import unittest

from harness import BIN, SCENARIOS, Process, sim_truth, wait_until

SCENARIO = os.path.join(SCENARIOS, "ledger-mixed.yaml")
AT = 20  # the scenario time the snapshot is taken at, or the nearest steady one (see steady_time)

TOP_KEYS = {"format", "version", "taken_unix", "interval_seconds", "build", "backends", "attribution",
            "ledger_state", "gpus"}
GPU_KEYS = {"gpu", "uuid", "model", "pci_bus_id", "up", "down_reason", "utilization_ratio",
            "memory_utilization_ratio", "memory_used_bytes", "memory_total_bytes", "power_watts",
            "power_limit_watts", "temperature_celsius", "processes", "ledger"}
OWNER_KEYS = {"project", "user", "namespace", "pod", "container", "hpc_job"}


def snapshot(*args, env=None, timeout=60):
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([BIN, "snapshot", *args], capture_output=True, text=True, env=full_env, timeout=timeout)


def owner(project, user="", namespace="", pod="", container="", hpc_job=""):
    return {"project": project, "user": user, "namespace": namespace, "pod": pod, "container": container,
            "hpc_job": hpc_job}


def state_document(gpus):
    """A ledger state file as UsageTracker::checkpoint() writes it."""
    doc = {"format": "gpumeter-ledger-state", "version": 1, "saved_unix": 1718000000.0, "gpus": {}}
    for uuid, index, owners in gpus:
        covered = sum(o[1] for o in owners)
        doc["gpus"][uuid] = {"index": index, "model": "NVIDIA H100 80GB HBM3", "ledger": {
            "mode": "samples", "cursor_us": 1718000000000000, "covered_seconds": covered,
            "busy_seconds": sum(o[2] for o in owners), "energy_joules": sum(o[3] for o in owners),
            "gap_seconds": 12.5, "gaps": 1, "processes": [],
            "owners": [{"owner": o[0], "allocated_seconds": o[1], "busy_seconds": o[2], "energy_joules": o[3],
                        "memory_byte_seconds": o[4], "last_active_us": 1718000000000000} for o in owners]}}
    return doc


def steady_time(scenario, near, half=2):
    """The whole second nearest `near` around which (± `half` s) no job starts or ends and every
    job's load is constant, so that the snapshot's window sees each job's steady share whatever
    its exact timing. Found from the ground truth, so edits to the scenario do not break the test."""
    slices = {}

    def jobs(t):
        if t not in slices:
            slices[t] = sorted((j["name"], j["gpu"], j["pid"], round(j["busy_seconds"], 9))
                               for j in sim_truth(scenario, t, t + 1)["jobs"])
        return slices[t]

    for t in sorted(range(max(half, near - 10), near + 11), key=lambda t: (abs(t - near), t)):
        if jobs(t - half) and all(jobs(u) == jobs(t - half) for u in range(t - half + 1, t + half)):
            return t
    raise AssertionError("no steady stretch of %d s near scenario time %d s" % (2 * half, near))


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


class Snapshot(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="gpumeter-snapshot-")

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_processes_owners_and_state_totals_on_the_simulated_node(self):
        at = steady_time(SCENARIO, AT)
        root = os.path.join(self.dir, "root")
        subprocess.run([BIN, "sim", "procfs", "--scenario", SCENARIO, "--out", root, "--at", str(at)],
                       check=True, capture_output=True, timeout=60)
        socket = os.path.join(self.dir, "kubelet.sock")
        config = self.write("gpumeter.yaml",
                            "attribution:\n  environment: [GPUMETER_PROJECT]\n  kubelet: {socket: %s}\n"
                            "project:\n  rules: [{source: env.GPUMETER_PROJECT}]\n" % socket)
        truth_from, truth_to = at - 1, at + 1
        truth = sim_truth(SCENARIO, truth_from, truth_to)
        uuids = [g["uuid"] for g in truth["gpus"]]
        gone = "GPU-00000000-0000-0000-0000-00000000dead"
        nlp = owner("nlp", "dana", "team-nlp", "llm-train-worker-0", "trainer")
        state_path = self.write("ledger.json", json.dumps(state_document([
            (uuids[0], 0, [(owner("__idle__"), 1800.0, 0.0, 126000.0, 0.0),
                           (nlp, 7200.0, 3600.0, 1.8e6, 60 * 2**30 * 7200.0)]),
            (gone, 9, [(owner("climate", "alice", hpc_job="51234"), 3600.0, 900.0, 3.6e5, 0.0)]),
        ])))
        state_before = read_bytes(state_path)

        args = ["--sim.scenario", SCENARIO, "--path.procfs", os.path.join(root, "proc"), "--path.rootfs", root,
                "--config.file", config, "--ledger.state-file", state_path]

        def take(*extra):
            # Scenario time is at - 1 when the kubelet starts, about `at` during the snapshot. Each
            # snapshot has a kubelet and an epoch of its own, so that a slow first one (a loaded
            # machine, the sanitizers) cannot push the second out of the steady window.
            epoch = time.time() - (at - 1)
            env = {"GPUMETER_SIM_EPOCH": repr(epoch)}
            kubelet = Process([BIN, "sim", "kubelet", "--scenario", SCENARIO, "--socket", socket], env=env,
                              workdir=self.dir, name="sim-kubelet")
            try:
                wait_until(lambda: os.path.exists(socket), 30, what="sim kubelet socket")
                r = snapshot(*args, *extra, env=env)
            finally:
                kubelet_rc = kubelet.stop()
            self.assertEqual(kubelet_rc, 0, kubelet.log())
            return r, epoch

        r, epoch = take("--format", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        table, _ = take()
        scenario_time = doc["taken_unix"] - epoch
        self.assertTrue(at - 2 < scenario_time < at + 2, "snapshot taken at scenario time %.1f s" % scenario_time)

        self.assertEqual(set(doc), TOP_KEYS)
        self.assertEqual((doc["format"], doc["version"], doc["interval_seconds"]), ("gpumeter-snapshot", 1, 1.0))
        self.assertTrue(doc["backends"][0]["up"])
        self.assertEqual(doc["backends"][0]["driver_version"], "550.90.07")
        self.assertEqual(doc["attribution"]["kubelet_socket"], socket)
        self.assertTrue(doc["attribution"]["kubelet_up"])
        self.assertEqual(doc["attribution"]["owner_lookup_errors"], 0)

        users = {uid: name for name, uid in truth["users"].items()}
        window = truth_to - truth_from
        self.assertEqual([g["gpu"] for g in doc["gpus"]], list(range(8)))
        for g, tg in zip(doc["gpus"], truth["gpus"]):
            with self.subTest(gpu=g["gpu"]):
                self.assertEqual(set(g), GPU_KEYS)
                self.assertEqual(g["uuid"], tg["uuid"])
                self.assertEqual(g["model"], tg["model"])
                self.assertTrue(g["up"])
                self.assertIsNone(g["down_reason"])
                self.assertAlmostEqual(g["utilization_ratio"], tg["busy_seconds"] / window, places=6)
                self.assertAlmostEqual(g["memory_used_bytes"], tg["memory_byte_seconds"] / window, delta=1)
                self.assertEqual(g["memory_total_bytes"], 81559 * 2**20)
                self.assertIn("gpu", g["temperature_celsius"])
                self.assertGreater(g["power_watts"], 0)
                jobs = [j for j in truth["jobs"] if j["gpu"] == g["gpu"]]
                self.assertEqual(sorted(p["pid"] for p in g["processes"]), sorted(j["pid"] for j in jobs))
                for p in g["processes"]:
                    j = next(j for j in jobs if j["pid"] == p["pid"])
                    k8s = j.get("kubernetes", {})
                    self.assertEqual(p["owner"], {
                        "project": j["env"]["GPUMETER_PROJECT"], "user": users[j["uid"]],
                        "namespace": k8s.get("namespace", ""), "pod": k8s.get("pod", ""),
                        "container": k8s.get("container", ""), "hpc_job": j["env"].get("SLURM_JOB_ID", "")}, j["name"])
                    self.assertTrue(p["running"])
                    self.assertEqual(p["types"], ["compute"])
                    self.assertAlmostEqual(p["sm_utilization_ratio"], j["busy_seconds"] / window, places=6, msg=j["name"])
                    self.assertAlmostEqual(p["memory_bytes"], j["memory_byte_seconds"] / window, delta=1)
        # Kubernetes pods, Slurm jobs, and a time-sliced GPU whose two pods are told apart.
        self.assertTrue(any(j.get("kubernetes") for j in truth["jobs"]))
        self.assertTrue(any("SLURM_JOB_ID" in j["env"] for j in truth["jobs"]))
        self.assertEqual(len({j["kubernetes"]["pod"] for j in truth["jobs"] if j["gpu"] == 3}), 2)

        # Totals from the state file, most allocated first; the file is read, never written.
        state = doc["ledger_state"]
        self.assertEqual((state["path"], state["status"], state["problem"]), (state_path, "ok", None))
        self.assertEqual(state["saved_unix"], 1718000000.0)
        ledger0 = doc["gpus"][0]["ledger"]
        self.assertEqual((ledger0["covered_seconds"], ledger0["gap_seconds"], ledger0["problem"]), (9000.0, 12.5, None))
        self.assertEqual([o["owner"] for o in ledger0["owners"]], [nlp, owner("__idle__")])
        self.assertEqual(ledger0["owners"][0], {"owner": nlp, "allocated_seconds": 7200.0, "busy_seconds": 3600.0,
                                                "energy_joules": 1.8e6, "memory_byte_seconds": 60 * 2**30 * 7200.0})
        for g in doc["gpus"][1:]:
            self.assertIsNone(g["ledger"])
        self.assertEqual(len(state["other_gpus"]), 1)
        self.assertEqual((state["other_gpus"][0]["uuid"], state["other_gpus"][0]["gpu"]), (gone, 9))
        self.assertEqual(state["other_gpus"][0]["ledger"]["owners"][0]["owner"]["hpc_job"], "51234")
        self.assertEqual(read_bytes(state_path), state_before)
        self.assertEqual(sorted(os.listdir(self.dir)), ["gpumeter.yaml", "ledger.json", "root", "sim-kubelet.log"])

        # The table: every pod by name, the state file's totals in hours, no colour off a terminal.
        self.assertEqual(table.returncode, 0, table.stderr)
        out = table.stdout
        for pod in {j["kubernetes"]["pod"] for j in truth["jobs"] if j.get("kubernetes")}:
            self.assertIn(pod, out)
        self.assertNotIn("\033[", out)
        self.assertRegex(out, r"nlp\s+dana\s+team-nlp\s+llm-train-worker-0\s+trainer\s+2\.000\s+1\.000\s+50%")
        self.assertIn("not on this node now: " + gone, out)
        gpu0 = out[out.index("GPU 0"):out.index("GPU 1")]
        self.assertRegex(gpu0, r"PID\s+TYPE\s+MEMORY\s+SM\s+PROJECT\s+USER\s+NAMESPACE\s+POD\s+CONTAINER\n")
        job0 = next(j for j in truth["jobs"] if j["gpu"] == 0)
        self.assertRegex(gpu0, r"%d\s+C\s+[0-9.]+ GiB\s+%d%%\s+%s\s+%s\s+%s\s+%s" % (
            job0["pid"], round(100 * job0["busy_seconds"] / window), job0["env"]["GPUMETER_PROJECT"],
            users[job0["uid"]], job0["kubernetes"]["namespace"], job0["kubernetes"]["pod"]))
        self.assertEqual(read_bytes(state_path), state_before)

    def test_corrupt_state_file_is_reported_and_left_untouched(self):
        corrupt = self.write("ledger.json", '{"format": "gpumeter-ledger-state", "version": 1, "gpus": {"GPU-')
        before = read_bytes(corrupt)
        mtime = os.stat(corrupt).st_mtime_ns
        env = {"GPUMETER_SIM_EPOCH": repr(time.time() - AT)}
        r = snapshot("--sim.scenario", SCENARIO, "--ledger.state-file", corrupt, "--format", "json",
                     "--interval", "200ms", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        state = json.loads(r.stdout)["ledger_state"]
        self.assertEqual(state["status"], "unusable")
        self.assertIn("not valid JSON", state["problem"])
        r = snapshot("--sim.scenario", SCENARIO, "--ledger.state-file", corrupt, "--interval", "200ms", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, re.escape(corrupt) + r": unusable: not valid JSON \(file left as it is\)")
        self.assertEqual(read_bytes(corrupt), before)
        self.assertEqual(os.stat(corrupt).st_mtime_ns, mtime)
        self.assertEqual(os.listdir(self.dir), ["ledger.json"])  # nothing set aside or written beside it

    def test_missing_state_file_means_no_totals(self):
        missing = os.path.join(self.dir, "none", "ledger.json")
        env = {"GPUMETER_SIM_EPOCH": repr(time.time() - AT)}
        r = snapshot("--sim.scenario", SCENARIO, "--ledger.state-file", missing, "--format", "json",
                     "--interval", "200ms", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        self.assertEqual((doc["ledger_state"]["status"], doc["ledger_state"]["problem"]), ("missing", None))
        self.assertTrue(all(g["ledger"] is None for g in doc["gpus"]))
        r = snapshot("--sim.scenario", SCENARIO, "--ledger.state-file", missing, "--interval", "200ms", env=env)
        self.assertIn(missing + ": no state file, so no ledger totals", r.stdout)
        self.assertFalse(os.path.exists(os.path.dirname(missing)))

    def test_hostile_owner_values_cannot_break_the_output(self):
        # A process's environment is anything its owner wrote: bytes that are not UTF-8 and escape sequences.
        root = os.path.join(self.dir, "root")
        subprocess.run([BIN, "sim", "procfs", "--scenario", SCENARIO, "--out", root, "--at", str(AT)],
                       check=True, capture_output=True, timeout=60)
        job = next(j for j in sim_truth(SCENARIO, AT, AT + 1)["jobs"] if j["gpu"] == 0)
        environ = os.path.join(root, "proc", str(job["pid"]), "environ")
        with open(environ, "rb") as f:
            text = f.read()
        project = job["env"]["GPUMETER_PROJECT"].encode()
        self.assertIn(b"GPUMETER_PROJECT=" + project + b"\0", text)
        with open(environ, "wb") as f:
            f.write(text.replace(b"GPUMETER_PROJECT=" + project, b"GPUMETER_PROJECT=" + project + b"\xff\x1b[2J\xc2\x9b"))
        config = self.write("gpumeter.yaml", "attribution:\n  environment: [GPUMETER_PROJECT]\n"
                                             "project:\n  rules: [{source: env.GPUMETER_PROJECT}]\n")
        args = ["--sim.scenario", SCENARIO, "--path.procfs", os.path.join(root, "proc"), "--path.rootfs", root,
                "--config.file", config, "--interval", "200ms", "--ledger.state-file", ""]
        env = {"GPUMETER_SIM_EPOCH": repr(time.time() - AT)}
        r = snapshot(*args, "--format", "json", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        owners = [p["owner"] for p in json.loads(r.stdout)["gpus"][0]["processes"]]
        self.assertEqual([o["project"] for o in owners], [project.decode() + "\ufffd\x1b[2J\x9b"])
        r = subprocess.run([BIN, "snapshot", *args], capture_output=True, env=dict(os.environ, **env), timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn(b"\x1b", r.stdout)
        self.assertNotIn(b"\xc2\x9b", r.stdout)
        # The byte that is not UTF-8 became U+FFFD where the owner was made, as on /metrics; each
        # control character prints as one "?".
        self.assertIn(b" " + project + "\ufffd".encode() + b"?[2J? ", r.stdout)

    def test_a_hung_gpu_is_reported_down_without_holding_up_the_others(self):
        # scenarios/faults.yaml, with GPU 1's first call from 6 s hanging longer than the snapshot waits.
        with open(os.path.join(SCENARIOS, "faults.yaml")) as f:
            text = f.read()
        self.assertIn("{kind: hang, gpu: 1, at: 6s, seconds: 8,", text)
        scenario = self.write("faults-long-hang.yaml", text.replace("seconds: 8,", "seconds: 60,"))
        env = {"GPUMETER_SIM_EPOCH": repr(time.time() - 7)}
        began = time.time()
        r = snapshot("--sim.scenario", scenario, "--ledger.state-file", "", "--format", "json", "--interval", "200ms",
                     env=env)
        self.assertLess(time.time() - began, 20)
        self.assertEqual(r.returncode, 0, r.stderr)
        gpus = json.loads(r.stdout)["gpus"]
        self.assertEqual(len(gpus), 5)
        self.assertFalse(gpus[1]["up"])
        self.assertIn("did not finish within", gpus[1]["down_reason"])
        self.assertFalse(gpus[2]["up"])
        self.assertIn("GPU is lost", gpus[2]["down_reason"])
        for g in (gpus[0], gpus[3]):
            self.assertTrue(g["up"])
            self.assertGreater(g["power_watts"], 0)

    def test_no_nvml_exits_1_with_the_reason(self):
        r = snapshot("--nvml.library", "/nonexistent/libnvidia-ml.so.1", "--ledger.state-file", "")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("NVML backend down: NVML library not found", r.stderr)
        self.assertIn("/nonexistent/libnvidia-ml.so.1", r.stderr)
        self.assertEqual(r.stdout, "")

    def test_bad_config_exits_2_naming_file_and_line(self):
        bad = self.write("bad.yaml", "attribution:\n  environment: [GPUMETER_PROJECT]\n  no_such_key: 1\n")
        r = snapshot("--sim.scenario", SCENARIO, "--config.file", bad)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn(bad + ":3", r.stderr)
        self.assertIn("--config.file", r.stderr)
        r = snapshot("--config.file", os.path.join(self.dir, "absent.yaml"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("absent.yaml", r.stderr)

    def test_bad_flags_exit_2(self):
        for args, needle in [(["--format", "xml"], "--format"), (["--interval", "soon"], "--interval"),
                             (["--interval", "10ms"], "between 100ms and 10m"),
                             (["--no-such-flag"], "--no-such-flag"),
                             (["--sim.scenario", "/nonexistent.yaml"], "/nonexistent.yaml")]:
            r = snapshot(*args)
            self.assertEqual(r.returncode, 2, args)
            self.assertIn(needle, r.stdout + r.stderr, args)

    def test_colours_only_on_a_terminal_without_no_color_or_a_dumb_term(self):
        # What --no-color's help, the man page and docs/snapshot.md say turns the colours off.
        import pty

        def escapes(env, *args):
            leader, follower = pty.openpty()
            try:
                p = subprocess.Popen([BIN, "snapshot", "--sim.scenario", SCENARIO, "--ledger.state-file", "",
                                      "--interval", "200ms", *args], stdout=follower, stderr=subprocess.DEVNULL,
                                     env=dict(os.environ, **env))
                os.close(follower)
                out = b""
                while True:  # read as it writes, so a full terminal buffer cannot block it
                    try:
                        chunk = os.read(leader, 65536)
                    except OSError:  # EIO: it exited and the terminal is drained
                        break
                    if not chunk:
                        break
                    out += chunk
            finally:
                os.close(leader)
            self.assertEqual(p.wait(timeout=60), 0, out)
            self.assertIn(b"GPU", out)
            return out.count(b"\x1b[")

        plain = {"TERM": "xterm", "NO_COLOR": ""}
        self.assertGreater(escapes(plain), 0)
        self.assertEqual(escapes(dict(plain, TERM="dumb")), 0)
        self.assertEqual(escapes(dict(plain, NO_COLOR="1")), 0)
        self.assertEqual(escapes(plain, "--no-color"), 0)

    def test_help_explains_every_flag(self):
        r = snapshot("--help")
        self.assertEqual(r.returncode, 0)
        for flag in ["--nvml.library", "--sim.scenario", "--path.procfs", "--path.rootfs", "--config.file",
                     "--ledger.state-file", "--format", "--interval", "--no-color"]:
            self.assertIn(flag, r.stdout)
        self.assertIn("/var/lib/gpumeter/ledger.json", r.stdout)
        r = subprocess.run([BIN, "--help"], capture_output=True, text=True, timeout=30)
        self.assertIn("snapshot", r.stdout)


if __name__ == "__main__":
    unittest.main()
