"""MIG without CAP_SYS_ADMIN: the node of test_mig_ledger (one H100 split 3g + 2g + 1g + 1g and
re-partitioned at 45 s, a whole H100 beside it) with the simulator's `no_capability` quirk on. The
driver then answers NO_PERMISSION to the GPU instance queries (nvml.h: "Requires privileged user")
and to the MIG parent's memory and process lists (docs/nvml-behaviour.md, "MIG without
CAP_SYS_ADMIN").

The whole test of test_mig_ledger runs unchanged against `gpumeter sim truth` (every instance and
owner within 0.1 % plus edges, the profile labels, the owners adding up to the covered seconds, the
report's prices by profile): the agent reads each MIG device's profile from its name when the GPU
instance's profile is refused. Beside it, per agent: `gpumeter_backend_not_permitted` names each
refused call on the MIG GPU and none on the other, none of them is counted as a call error, and the
log says so once. Of three Xids, one inside the train instance, one on the whole MIG GPU and one on
the other GPU, the event wait reports the last two only (nvml.h: without privileges, "only the
events which affect all the instances"), and the agent names `nvmlEventSetWait_v2` as not
permitted."""
import os
import tempfile

import yaml

import test_mig_ledger as mig

REFUSED = {"nvmlDeviceGetGpuInstanceById", "nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetMemoryInfo",
           "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses_v3",
           "nvmlEventSetWait_v2"}
XIDS = [{"kind": "xid", "gpu": 0, "at": 20, "code": 31, "mig": "train"},
        {"kind": "xid", "gpu": 0, "at": 25, "code": 48},
        {"kind": "xid", "gpu": 1, "at": 30, "code": 31}]


class MigWithoutCapability(mig.MigLedger):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        scenario = mig.load_scenario()
        scenario["quirks"] = [{"kind": "no_capability"}]
        scenario["faults"] = XIDS
        cls.scenario = os.path.join(tempfile.mkdtemp(prefix="gpumeter-mig-nocap-"), "mig-h100-no-capability.yaml")
        with open(cls.scenario, "w") as f:
            yaml.safe_dump(scenario, f)

    def check_agent(self, agent, prom, instance, at):
        refused = prom.query('gpumeter_backend_not_permitted{instance="%s"}' % instance, at=at)
        calls = {r["metric"]["call"] for r in refused}
        self.assertLessEqual(REFUSED, calls)
        self.assertEqual({r["metric"]["gpu"] for r in refused}, {"0"}, "only the MIG GPU")
        self.assertEqual({r["value"][1] for r in refused}, {"1"})
        errors = prom.query('gpumeter_backend_call_errors_total{instance="%s",error="no_permission"}' % instance, at=at)
        self.assertEqual(errors, [], "a refused call is not a call error")
        lines = [line for line in agent.process.log().splitlines() if "CAP_SYS_ADMIN" in line]
        self.assertEqual(len(lines), 1, lines)
        self.assertIn("gpu=0", lines[0])
        self.assertIn("nvmlDeviceGetGpuInstanceById", lines[0])
        xids = prom.query('gpu_xid_errors_total{instance="%s"}' % instance, at=at)
        self.assertEqual({(r["metric"]["gpu"], r["metric"]["xid"], r["value"][1]) for r in xids},
                         {("0", "48", "1"), ("1", "31", "1")}, "the Xid inside the instance is withheld")
