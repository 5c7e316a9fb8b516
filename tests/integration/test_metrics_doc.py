"""docs/metrics.md and the binary cannot drift apart: every family a live agent exports (on a
simulated node with owners, the kubelet and a state file, with every compat set on and a counters
file listing every DCGM field it serves) is documented with its type, and every documented family
is exported, save the few that need a condition this node does not have."""
import os
import re
import tempfile
import time

from harness import AgentTestCase, Agent, SCENARIOS, SOURCE_DIR, SimNode, wait_until

SCENARIO = os.path.join(SCENARIOS, "ledger-mixed.yaml")
# Documented families that need what this node lacks, and why.
CONDITIONAL = {
    "gpu_fan_speed_ratio": "the simulated H100s are fanless",
    "gpu_xid_errors_total": "no Xid event in the scenario",
    "gpu_pcie_transmit_bytes_total": "the byte-count fields exist from R555; this node runs R550",
    "gpu_pcie_receive_bytes_total": "the byte-count fields exist from R555; this node runs R550",
    "gpu_performance_level": "AMD GPUs only (this node is NVIDIA's); test_rocm.py checks it against rocm-smi",
    "gpumeter_backend_call_errors_total": "no call fails on these GPUs",
    "gpumeter_backend_dropped_records_total": "no per-process record is insane",
    "gpumeter_backend_non_finite_values_total": "no call answers NaN here; test_non_finite.py checks it",
    "gpumeter_backend_dropped_samples_total": "every power sample is sound here; test_quirks.py checks it",
    "gpumeter_backend_not_permitted": "the agent is privileged here; test_mig_capability.py checks it",
    "gpumeter_ledger_state_dropped_values": "the state file is sound; test_non_finite.py and test_clock.py check it",
    # The simulator serves no GPM, NVLink or MIG instances yet (its GPUs answer MIG disabled).
    **{name: "no GPM, NVLink or MIG on this node" for name in (
        "gpu_graphics_engine_active_ratio", "gpu_sm_active_ratio", "gpu_sm_occupancy_ratio",
        "gpu_tensor_active_ratio", "gpu_dram_active_ratio", "gpu_pipe_active_ratio",
        "gpu_pcie_throughput_bytes_per_second", "gpu_nvlink_throughput_bytes_per_second", "gpu_nvlink_up",
        "gpu_nvlink_speed_bytes_per_second", "gpu_nvlink_transmit_bytes_total", "gpu_nvlink_receive_bytes_total",
        "gpu_nvlink_errors_total", "gpu_mig_slices", "gpu_mig_instance_slices",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_SM_OCCUPANCY",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_PIPE_FP64_ACTIVE",
        "DCGM_FI_PROF_PIPE_FP32_ACTIVE", "DCGM_FI_PROF_PIPE_FP16_ACTIVE", "DCGM_FI_PROF_PCIE_TX_BYTES",
        "DCGM_FI_PROF_PCIE_RX_BYTES", "DCGM_FI_PROF_NVLINK_TX_BYTES", "DCGM_FI_PROF_NVLINK_RX_BYTES",
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL")},
    "DCGM_FI_DEV_FAN_SPEED": "the simulated H100s are fanless",
    "nvidia_smi_fan_speed_ratio": "the simulated H100s are fanless",
}
ALL_SERVED = os.path.join(SOURCE_DIR, "tests", "fixtures", "dcgm-exporter", "all-served-counters.csv")


def documented_families():
    """{name: type} from the first column of every table in docs/metrics.md; a cell may list
    several names, and `_used_bytes` after `gpu_memory_total_bytes` is short for its full name."""
    out = {}
    with open(os.path.join(SOURCE_DIR, "docs", "metrics.md")) as f:
        for line in f:
            cells = [c.strip() for c in line.split("|")]
            if len(cells) < 4 or not cells[1].startswith("`"):
                continue
            kind = cells[2].split()[0] if cells[2] else ""
            if kind not in ("gauge", "counter", "histogram", "summary", "info"):
                continue
            names = re.findall(r"`([A-Za-z_:][A-Za-z0-9_:]*)`", cells[1])
            first = names[0] if names else ""
            for n in names:
                if n.startswith("_") and first:
                    n = first[:first.rindex("_", 0, first.rindex("_"))] + n  # gpu_memory_total_bytes -> gpu_memory
                out[n] = kind
    return out


def exported_families(body):
    """{name: type} from the # TYPE lines of a text exposition; counters by their sample name."""
    out = {}
    for m in re.finditer(r"^# TYPE (\S+) (\S+)$", body, re.M):
        out[m.group(1)] = m.group(2)
    return out


class MetricsDoc(AgentTestCase):
    def test_every_family_is_documented_and_every_documented_family_exported(self):
        epoch = time.time() + 1.0
        node = self.track(SimNode(SCENARIO, epoch))
        state = os.path.join(tempfile.mkdtemp(prefix="gpumeter-doc-"), "ledger.json")
        agent = self.track(Agent(scenario=SCENARIO, env={"GPUMETER_SIM_EPOCH": repr(epoch)},
                                 extra_args=node.agent_args(node.config("ledger:\n  checkpoint_interval: 1s\n"
                                                                        '  idle_power_watts: {"NVIDIA H100 80GB HBM3": 70}\n'
                                                                        "exposition:\n  max_series: 1000000\n"),
                                                            state)
                                 + ["--compat", "dcgm-exporter", "--compat", "dcgm-exporter-1.x",
                                    "--compat", "nvidia-smi", "--compat.collectors", ALL_SERVED,
                                    "--collector.profiling", "--collector.nvlink"]))
        agent.wait_ready()
        # Processes on every busy GPU, and a checkpoint written.
        wait_until(lambda: time.time() > epoch + 12 and "gpu_process_utilization_ratio{" in agent.metrics()[1]
                   and "gpumeter_ledger_checkpoint_success 1" in agent.metrics()[1], 40, what="a busy node")
        exported = exported_families(agent.metrics()[1])
        documented = documented_families()
        self.assertGreater(len(documented), 30)
        undocumented = sorted(set(exported) - set(documented))
        self.assertEqual(undocumented, [], "exported but not in docs/metrics.md")
        wrong_type = sorted("%s: exported %s, documented %s" % (n, t, documented[n])
                            for n, t in exported.items() if documented[n] != t)
        self.assertEqual(wrong_type, [])
        missing = sorted(set(documented) - set(exported) - set(CONDITIONAL))
        self.assertEqual(missing, [], "documented but not exported")
        for name in CONDITIONAL:
            self.assertIn(name, documented, "a conditional family that is not documented: drop it from the list")


if __name__ == "__main__":
    import unittest
    unittest.main()
