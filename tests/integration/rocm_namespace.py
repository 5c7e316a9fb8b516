"""The private mount namespace in which Debian's real ROCm SMI reads a simulated amdgpu tree.

ROCm SMI reads fixed paths under /sys, so a process that should see the tree of `gpumeter sim
sysfs` runs under `unshare -m` (as root) with the tree bind-mounted over /sys/class and
/sys/module and a private /dev/shm (docs/rocm-behaviour.md). The integration tests and
bench/rocm_bench.py start their processes through these helpers."""
import os

SCRIPT = ('mount --bind "$0/class" /sys/class && mount --bind "$0/module" /sys/module && '
          'mount -t tmpfs tmpfs /dev/shm && exec "$@"')


def argv(tree, command):
    """The command line that runs `command` with `tree` over /sys/class and /sys/module. The
    command replaces the shell (exec), so the process started is the command itself."""
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", SCRIPT, tree] + list(command)


def follow_argv(gpumeter, tree, scenario):
    """`gpumeter sim sysfs` keeping `tree` in step with the scenario clock."""
    return [gpumeter, "sim", "sysfs", tree, "--scenario", scenario, "--follow"]


def tree_ready(tree):
    """Whether the writer has written the whole tree once (initstate comes last)."""
    return os.path.exists(os.path.join(tree, "module", "amdgpu", "initstate"))
