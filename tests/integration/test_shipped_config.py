"""The shipped agent config, deploy/config/gpumeter.yaml (the package's /etc/gpumeter/gpumeter.yaml),
run by the real agent on a node with no scheduler source (no kubelet socket, no HPC job mapping,
no Slurm cgroups): `ledger.allocation: auto` bills by the process policy, and the agent starts
without a warning. Each scheduler source the file shows commented out turns the scheduler
policy on once uncommented, as its comment says."""
import os
import re
import shutil
import tempfile

from harness import DEPLOY_SCENARIOS, SOURCE_DIR, Agent, AgentTestCase

SHIPPED = os.path.join(SOURCE_DIR, "deploy", "config", "gpumeter.yaml")
SCENARIO = os.path.join(DEPLOY_SCENARIOS, "h100-8x-three-teams.yaml")


class ShippedConfig(AgentTestCase):
    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp(prefix="gpumeter-shipped-config-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        # A bare node: nothing under the root the agent reads owners from.
        self.empty = os.path.join(self.dir, "empty")
        os.makedirs(self.empty)

    def start(self, config):
        agent = self.track(Agent(SCENARIO, extra_args=["--config.file", config, "--path.procfs", self.empty,
                                                       "--path.rootfs", self.empty]))
        agent.wait_ready()
        return agent

    def policy(self, log):
        m = re.search(r'msg="ledger allocation policy" allocation=(\w+) configured=(\w+)', log)
        self.assertIsNotNone(m, log)
        return m.groups()

    def test_packaged_config_bills_by_process_and_warns_of_nothing(self):
        agent = self.start(SHIPPED)
        _headers, metrics = agent.metrics()
        log = agent.process.log()
        self.assertEqual(self.policy(log), ("process", "auto"))
        self.assertEqual([line for line in log.splitlines() if re.match(r"level=(warn|error)\b", line)], [], log)
        # The scheduler policy's own family, which the packaged config used to turn on.
        self.assertNotIn("gpumeter_ledger_foreign_seconds_total", metrics)

    def test_each_commented_scheduler_source_turns_the_scheduler_policy_on(self):
        with open(SHIPPED) as f:
            shipped = f.read()
        jobs = os.path.join(self.dir, "dcgm-job-mapping")
        os.makedirs(jobs)
        sources = {
            "hpc_job_mapping_dir": (r"(?m)^  # (hpc_job_mapping_dir): \S+", r"  \1: " + jobs),
            "slurm_cgroups": (r"(?m)^  # (slurm_cgroups): auto", r"  \1: auto"),
        }
        for name, (commented, uncommented) in sources.items():
            with self.subTest(source=name):
                text, n = re.subn(commented, uncommented, shipped)
                self.assertEqual(n, 1, "%s is not shown commented out in %s" % (name, SHIPPED))
                config = os.path.join(self.dir, name + ".yaml")
                with open(config, "w") as f:
                    f.write(text)
                agent = self.start(config)
                self.assertEqual(self.policy(agent.process.log()), ("scheduler", "auto"))
                agent.stop()
