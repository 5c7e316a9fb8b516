"""A real single-host Slurm cluster for integration tests: Debian 12's slurm-wlm 22.05, munge and,
optionally, slurmdbd on MariaDB, with GRES GPUs and cgroup v1 (ConstrainDevices=yes), in a private
directory with its own SLURM_CONF and free ports. The recipe and what real Slurm 22.05 writes are
in ../shared/reference/slurm-real-cluster.md (docs/attribution.md, "Verified against real Slurm").

    cluster = SlurmCluster(gpus=4)
    cluster.start()          # raises AssertionError naming what is missing or which daemon failed
    try:
        job = cluster.sbatch("#!/bin/sh\\nsleep 1\\n", "--gres=gpu:1", "-A", "chem")
        cluster.wait_state(job, ("COMPLETED",))
    finally:
        cluster.stop()       # every daemon by its pid, the job cgroups, the directory

The node has its own name (slurmd -N), unique to the run, so its cgroup root
/sys/fs/cgroup/<hierarchy>/slurm_<node> is this cluster's alone and can be removed whole. Its GPUs
are character devices made with `mknod c 195 N` (the minor is the index, as /dev/nvidiaN): slurmd
rejects plain files, and with them sets no CUDA_VISIBLE_DEVICES or SLURM_*_GPUS.

Slurm has no option to bind its daemons to one address: slurmctld, slurmd and slurmdbd listen on
all addresses of their free ports; every client, and the daemons among themselves, connect to
127.0.0.1. MariaDB has networking off (a unix socket only)."""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import harness

# What the cluster needs on the machine (scripts/install-deps.sh test installs it).
DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "srun", "scontrol", "squeue", "scancel", "sinfo")
ACCOUNTING = ("mariadbd", "mariadb-install-db", "mariadb", "slurmdbd", "sacct", "sacctmgr")
CGROUP_ROOT = "/sys/fs/cgroup"
NVIDIA_MAJOR = 195
START_TIMEOUT = 30   # seconds for each daemon to be up
STOP_TIMEOUT = 15    # seconds each daemon has after SIGTERM before SIGKILL
JOB_TIMEOUT = 60     # seconds a client command may take


class SlurmError(AssertionError):
    """A Slurm command or daemon failed; the message has the tails of the daemons' logs."""


def _tail(path, size=2000):
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - size))
            return f.read().decode("utf-8", "replace")
    except OSError as e:
        return "(%s)" % e


def missing_requirements(accounting=True):
    """What this machine lacks to run the cluster: a list of sentences, empty when nothing."""
    out = []
    tools = DAEMONS + CLIENTS + (ACCOUNTING if accounting else ())
    absent = [t for t in tools if shutil.which(t) is None]
    if absent:
        out.append("commands not found: %s (scripts/install-deps.sh test installs slurmctld slurmd "
                   "slurm-client munge slurmdbd mariadb-server)" % " ".join(absent))
    if os.geteuid() != 0:
        out.append("not root: slurmd runs jobs as root here and makes device nodes and cgroups")
    devices = os.path.join(CGROUP_ROOT, "devices")
    if not os.path.isdir(devices) or not os.access(devices, os.W_OK):
        out.append("%s is not a writable cgroup v1 devices hierarchy (Slurm 22.05's cgroup/v1 plugin "
                   "needs it; cgroup v2 cannot be run on a hybrid host)" % devices)
    return out


class SlurmCluster:
    """munged, [mariadbd, slurmdbd,] slurmctld and one slurmd with `gpus` GPUs and `cpus` CPUs,
    each started in the foreground (-D/-F) with its pid recorded, and stopped by it."""

    def __init__(self, gpus=4, cpus=8, accounting=True, cluster_name="gpumetertest", epilog=None):
        self.gpus = gpus
        # Text of the node Epilog script, which slurmd runs as root at each job's end; @SLURM_CONF@
        # in it becomes this cluster's slurm.conf.
        self.epilog = epilog
        self.cpus = cpus
        self.accounting = accounting
        self.cluster_name = cluster_name
        self.host = socket.gethostname().split(".")[0]
        # Unique to this test process (one cluster each): the cgroup root slurm_<node> is this
        # cluster's alone, whatever another run left or runs beside it.
        self.node = "gm%d" % os.getpid()
        self.dir = None
        self.spool = None  # slurmd's spool, at a short path (start())
        self.procs = {}  # daemon name -> harness.Process, in start order
        self.env = {}
        self.timings = {}  # step -> seconds since start() began

    # ---- paths -------------------------------------------------------------------------------
    def path(self, *parts):
        if not self.dir:
            raise SlurmError("the cluster has no directory (start() not called)")
        return os.path.join(self.dir, *parts)

    @property
    def conf(self):
        return self.path("etc", "slurm.conf")

    @property
    def munge_socket(self):
        return self.path("munge", "munge.socket.2")

    @property
    def mysql_socket(self):
        return self.path("run", "mysql.sock")

    def cgroup_roots(self):
        """The node's cgroup roots that exist now, one per v1 hierarchy."""
        out = []
        for h in sorted(os.listdir(CGROUP_ROOT)):
            p = os.path.join(CGROUP_ROOT, h, "slurm_" + self.node)
            if os.path.isdir(p) and not os.path.islink(os.path.join(CGROUP_ROOT, h)):
                out.append(p)
        return out

    # ---- start -------------------------------------------------------------------------------
    def start(self):
        missing = missing_requirements(self.accounting)
        if missing:
            raise SlurmError("cannot run a real Slurm cluster here: " + "; ".join(missing))
        t0 = time.monotonic()

        def mark(step):
            self.timings[step] = round(time.monotonic() - t0, 2)
        self.dir = tempfile.mkdtemp(prefix="gpumeter-slurm-")
        # slurmstepd's sockets (<spool>/slurmd_<node>/<node>_<job>.<step>) must fit a unix socket
        # path (108 bytes): under the test run's TMPDIR they did not, and no job could start.
        self.spool = tempfile.mkdtemp(prefix="gms-", dir="/tmp")
        try:
            for d in ("munge", "etc", "log", "state", "run", "dev"):
                os.makedirs(self.path(d))
            # munged wants every directory above its socket searchable by all.
            self._open_up(self.path("munge"))
            self.env = {"SLURM_CONF": self.conf, "MYSQL_UNIX_PORT": self.mysql_socket}
            self._start_munge()
            mark("munged up")
            for i in range(self.gpus):
                os.mknod(self.path("dev", "nvidia%d" % i), 0o666 | 0o020000, os.makedev(NVIDIA_MAJOR, i))
            self.ports = {"ctld": harness.free_port(), "slurmd": harness.free_port()}
            if self.accounting:
                self.ports["dbd"] = harness.free_port()
            self._write_config()
            if self.accounting:
                self._start_accounting()
                mark("slurmdbd up")
            self._spawn("slurmctld", ["slurmctld", "-D", "-f", self.conf], self.path("log", "slurmctld.log"))
            self._spawn("slurmd", ["slurmd", "-D", "-N", self.node, "-f", self.conf],
                        self.path("log", "slurmd_%s.log" % self.node))
            self._wait(lambda: "State=IDLE" in self.scontrol("show", "node", self.node, check=False).stdout,
                       "node %s IDLE" % self.node, ("slurmctld", "slurmd"))
            mark("node idle")
        except BaseException:
            self.stop()
            raise
        self.timings["start"] = round(time.monotonic() - t0, 2)

    def _open_up(self, path):
        # From the directory up to the test's own temporary directory (the harness makes it 0700).
        top = os.path.dirname(tempfile.gettempdir())
        p = path
        while p and p != top and p != "/":
            os.chmod(p, os.stat(p).st_mode | 0o755)
            p = os.path.dirname(p)

    def _spawn(self, name, args, log_file, env=None):
        proc = harness.Process(args, env=dict(self.env, **(env or {})), workdir=self.path("run"), name=name)
        self.procs[name] = proc
        proc.daemon_log = log_file
        return proc

    def _wait(self, pred, what, daemons, timeout=START_TIMEOUT):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for d in daemons:
                p = self.procs.get(d)
                if p is not None and not p.alive():
                    raise SlurmError("%s exited (%s) while waiting for %s\n%s" % (d, p.proc.returncode, what,
                                                                                  self.log_tails(daemons)))
            try:
                if pred():
                    return
            except (OSError, subprocess.SubprocessError):
                pass
            time.sleep(0.05)
        raise SlurmError("timed out after %ss waiting for %s\n%s" % (timeout, what, self.log_tails(daemons)))

    def log_tails(self, daemons=None):
        out = []
        for name, p in self.procs.items():
            if daemons and name not in daemons:
                continue
            out.append("---- %s (stdout/stderr: %s) ----\n%s" % (name, p.log_path, _tail(p.log_path)))
            if os.path.exists(p.daemon_log):
                out.append("---- %s ----\n%s" % (p.daemon_log, _tail(p.daemon_log)))
        return "\n".join(out)

    def _start_munge(self):
        r = subprocess.run(["mungekey", "-c", "-k", self.path("munge", "munge.key")], capture_output=True, text=True,
                           timeout=JOB_TIMEOUT)
        if r.returncode != 0:
            raise SlurmError("mungekey: " + r.stderr)
        self._spawn("munged", ["munged", "-F", "--key-file=" + self.path("munge", "munge.key"),
                               "--socket=" + self.munge_socket, "--pid-file=" + self.path("munge", "munged.pid"),
                               "--log-file=" + self.path("log", "munged.log"),
                               "--seed-file=" + self.path("munge", "munged.seed")],
                    self.path("log", "munged.log"))
        self._wait(lambda: os.path.exists(self.munge_socket), "the munge socket", ("munged",))

    def _write_config(self):
        d = self.path
        lines = [
            "ClusterName=" + self.cluster_name,
            "SlurmctldHost=%s(127.0.0.1)" % self.host,
            "SlurmUser=root", "SlurmdUser=root",
            "SlurmctldPort=%d" % self.ports["ctld"], "SlurmdPort=%d" % self.ports["slurmd"],
            "AuthType=auth/munge", "CredType=cred/munge", "AuthInfo=socket=" + self.munge_socket,
            "StateSaveLocation=" + d("state"),  # fresh each run: no IDLE or DRAIN state survives
            "SlurmdSpoolDir=" + os.path.join(self.spool, "slurmd_%n"),
            "SlurmctldPidFile=" + d("run", "slurmctld.pid"), "SlurmdPidFile=" + d("run", "slurmd_%n.pid"),
            "SlurmctldLogFile=" + d("log", "slurmctld.log"), "SlurmdLogFile=" + d("log", "slurmd_%n.log"),
            "ProctrackType=proctrack/cgroup", "TaskPlugin=task/cgroup",
            # The extern step (a `sleep` placeholder in step_extern) exists only with Contain.
            "PrologFlags=Contain",
            "JobAcctGatherType=jobacct_gather/none", "JobCompType=jobcomp/none",
            "MpiDefault=none", "SwitchType=switch/none",
            "SchedulerType=sched/builtin", "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
            # More CPUs than the machine has, so that jobs of the tests do not queue for cores:
            # config_overrides keeps the node usable, and ConstrainCores=no binds nothing.
            "SlurmdParameters=config_overrides",
            "ReturnToService=2", "MinJobAge=300", "KillWait=5",
            "MailProg=/bin/true",
            "GresTypes=gpu",
            "NodeName=%s NodeHostname=%s NodeAddr=127.0.0.1 CPUs=%d Gres=gpu:%d State=UNKNOWN"
            % (self.node, self.host, self.cpus, self.gpus),
            "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
        ]
        if self.epilog:
            script = d("etc", "epilog.sh")
            with open(script, "w") as f:
                f.write(self.epilog.replace("@SLURM_CONF@", self.conf))
            os.chmod(script, 0o755)
            lines.append("Epilog=" + script)
        if self.accounting:
            lines += ["AccountingStorageType=accounting_storage/slurmdbd",
                      "AccountingStorageHost=127.0.0.1",
                      "AccountingStoragePort=%d" % self.ports["dbd"],
                      # The ctld -> dbd connection ignores AuthInfo and takes the socket from here.
                      "AccountingStoragePass=" + self.munge_socket,
                      "AccountingStorageTRES=gres/gpu",
                      "AccountingStorageEnforce=associations"]
        else:
            lines.append("AccountingStorageType=accounting_storage/none")
        with open(d("etc", "slurm.conf"), "w") as f:
            f.write("\n".join(lines) + "\n")
        with open(d("etc", "gres.conf"), "w") as f:
            last = self.gpus - 1
            f.write("AutoDetect=off\nName=gpu File=%s\n"
                    % d("dev", "nvidia[0-%d]" % last if last > 0 else "nvidia0"))
        with open(d("etc", "cgroup.conf"), "w") as f:
            f.write("CgroupPlugin=cgroup/v1\nCgroupMountpoint=%s\nConstrainDevices=yes\nConstrainCores=no\n"
                    "ConstrainRAMSpace=no\n" % CGROUP_ROOT)

    def _start_accounting(self):
        d = self.path
        r = subprocess.run(["mariadb-install-db", "--no-defaults", "--datadir=" + d("mysql"), "--user=root",
                            "--auth-root-authentication-method=socket", "--skip-test-db"],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise SlurmError("mariadb-install-db exited %d:\n%s" % (r.returncode, (r.stdout + r.stderr)[-3000:]))
        self._spawn("mariadbd", ["mariadbd", "--no-defaults", "--datadir=" + d("mysql"),
                                 "--socket=" + self.mysql_socket, "--skip-networking", "--user=root",
                                 "--pid-file=" + d("run", "mariadb.pid"), "--log-error=" + d("log", "mariadb.err"),
                                 "--innodb-buffer-pool-size=128M", "--innodb-lock-wait-timeout=900"],
                    d("log", "mariadb.err"))
        def sql(query):
            return subprocess.run(["mariadb", "--no-defaults", "-S", self.mysql_socket, "-u", "root", "-e", query],
                                  capture_output=True, text=True, timeout=JOB_TIMEOUT)
        self._wait(lambda: sql("select 1").returncode == 0, "mariadbd", ("mariadbd",))
        r = sql("create database slurm_acct_db; create user 'slurm'@'localhost' identified by 'slurmpw'; "
                "grant all on slurm_acct_db.* to 'slurm'@'localhost';")
        if r.returncode != 0:
            raise SlurmError("mariadb: " + r.stderr)
        with open(d("etc", "slurmdbd.conf"), "w") as f:
            f.write("\n".join([
                "AuthType=auth/munge", "AuthInfo=socket=" + self.munge_socket,
                "DbdHost=%s" % self.host, "DbdAddr=127.0.0.1", "DbdPort=%d" % self.ports["dbd"],
                "SlurmUser=root", "LogFile=" + d("log", "slurmdbd.log"), "PidFile=" + d("run", "slurmdbd.pid"),
                "StorageType=accounting_storage/mysql", "StorageHost=localhost", "StorageUser=slurm",
                "StoragePass=slurmpw", "StorageLoc=slurm_acct_db"]) + "\n")
        os.chmod(d("etc", "slurmdbd.conf"), 0o600)
        # slurmdbd reads slurmdbd.conf beside SLURM_CONF, and finds MariaDB through MYSQL_UNIX_PORT.
        self._spawn("slurmdbd", ["slurmdbd", "-D"], d("log", "slurmdbd.log"))
        self._wait(lambda: self.run("sacctmgr", "-n", "show", "cluster", check=False).returncode == 0,
                   "slurmdbd", ("mariadbd", "slurmdbd"))

    # ---- clients -----------------------------------------------------------------------------
    def run(self, *args, check=True, env=None, timeout=JOB_TIMEOUT, input=None):
        """A Slurm command with this cluster's SLURM_CONF; returns the CompletedProcess."""
        full = dict(os.environ, **self.env)
        full.update(env or {})
        try:
            r = subprocess.run(list(args), env=full, capture_output=True, text=True, timeout=timeout, input=input)
        except subprocess.TimeoutExpired as e:
            raise SlurmError("%s timed out after %ss\n%s" % (" ".join(args), timeout, self.log_tails())) from e
        if check and r.returncode != 0:
            raise SlurmError("%s exited %d: %s%s\n%s" % (" ".join(args), r.returncode, r.stdout[-2000:],
                                                         r.stderr[-2000:], self.log_tails(("slurmctld", "slurmd"))))
        return r

    def scontrol(self, *args, check=True):
        return self.run("scontrol", *args, check=check)

    def sbatch(self, script, *args, env=None, workdir=None):
        """Submits `script` (its text) with sbatch's `args`; returns the job id (a string). The
        job's output goes to <dir>/jobs/slurm-<id>.out unless args say otherwise."""
        jobs = self.path("jobs")
        os.makedirs(jobs, exist_ok=True)
        fd, path = tempfile.mkstemp(prefix="job-", suffix=".sh", dir=jobs)
        with os.fdopen(fd, "w") as f:
            f.write(script)
        os.chmod(path, 0o755)
        r = self.run("sbatch", "--parsable", "--chdir=" + (workdir or jobs),
                     "--output=" + os.path.join(jobs, "slurm-%j.out"), *args, path, env=env)
        job = r.stdout.strip().split(";")[0]
        if not job.isdigit():
            raise SlurmError("sbatch printed %r" % r.stdout)
        return job

    def output(self, job):
        """The batch job's output file as it is now."""
        with open(self.path("jobs", "slurm-%s.out" % job)) as f:
            return f.read()

    def srun(self, *args, env=None, timeout=JOB_TIMEOUT, check=True):
        """A blocking srun (job-allocating outside a job); returns the CompletedProcess."""
        return self.run("srun", *args, env=env, timeout=timeout, check=check)

    def srun_background(self, *args, env=None):
        """srun started and left running: returns the Popen (stdout and stderr piped)."""
        full = dict(os.environ, **self.env)
        full.update(env or {})
        return subprocess.Popen(["srun"] + list(args), env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)

    def job_state(self, job):
        r = self.scontrol("show", "job", "-o", str(job), check=False)
        for field in r.stdout.split():
            if field.startswith("JobState="):
                return field.split("=", 1)[1]
        return None

    def wait_state(self, job, states, timeout=JOB_TIMEOUT):
        """Waits until the job's state is one of `states`; returns it."""
        deadline = time.monotonic() + timeout
        state = None
        while time.monotonic() < deadline:
            state = self.job_state(job)
            if state in states:
                return state
            time.sleep(0.1)
        raise SlurmError("job %s: state %s after %ss, waiting for %s\n%s"
                         % (job, state, timeout, "/".join(states), self.log_tails(("slurmctld", "slurmd"))))

    def wait_until(self, pred, what, timeout=JOB_TIMEOUT):
        """Polls `pred` until it returns a true value (returned); fails with the daemons' logs."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = pred()
            if last:
                return last
            time.sleep(0.05)
        raise SlurmError("timed out after %ss waiting for %s (last: %r)\n%s"
                         % (timeout, what, last, self.log_tails(("slurmctld", "slurmd"))))

    def scancel(self, *args):
        return self.run("scancel", *args)

    def sacct(self, job, fields=("JobID", "JobName", "Account", "State", "AllocTRES")):
        """sacct's rows for the job and its steps, as dicts of `fields`."""
        r = self.run("sacct", "-j", str(job), "-n", "-P", "-o", ",".join(fields))
        return [dict(zip(fields, line.split("|"))) for line in r.stdout.splitlines() if line]

    def sacctmgr(self, *args):
        """sacctmgr -i (no confirmation) with `args`; returns its stdout."""
        return self.run("sacctmgr", "-i", *args).stdout

    def add_account(self, account, user="root"):
        self.sacctmgr("add", "account", account)
        self.sacctmgr("add", "user", user, "account=" + account)

    # ---- stop --------------------------------------------------------------------------------
    def stop(self):
        """Cancels the jobs, stops every daemon by its pid (SIGTERM, then SIGKILL after a bound),
        ends what is left in the node's cgroups, removes them and the directory. Idempotent;
        returns the seconds it took."""
        t0 = time.monotonic()
        errors = []
        ctld = self.procs.get("slurmctld")
        if ctld is not None and ctld.alive():
            try:
                self.run("scancel", "--full", "--partition=debug", check=False, timeout=15)
                self.wait_until(lambda: self.run("squeue", "-h", check=False, timeout=15).stdout.strip() == "",
                                "no job left", timeout=STOP_TIMEOUT)
            except AssertionError as e:  # stopped anyway; the cgroup sweep below ends the rest
                errors.append(str(e)[:500])
        for name in ("slurmd", "slurmctld", "slurmdbd", "mariadbd", "munged"):
            p = self.procs.pop(name, None)
            if p is not None:
                p.stop(timeout=STOP_TIMEOUT)
        self._sweep_cgroups(errors)
        spool, self.spool = self.spool, None
        if spool and spool.startswith("/tmp/gms-") and os.environ.get("GPUMETER_KEEP_TEST_DIRS") != "1":
            shutil.rmtree(spool, ignore_errors=True)
        if self.dir:
            d, self.dir = self.dir, None
            if d.startswith(tempfile.gettempdir() + os.sep) and os.path.basename(d).startswith("gpumeter-slurm-"):
                if os.environ.get("GPUMETER_KEEP_TEST_DIRS") != "1":
                    shutil.rmtree(d, ignore_errors=True)
        self.timings["stop"] = round(time.monotonic() - t0, 2)
        if errors:
            raise SlurmError("stopping the cluster: " + "; ".join(errors))
        return self.timings["stop"]

    def _sweep_cgroups(self, errors):
        # slurmstepd outlives slurmd (it is reparented to init); jobs were cancelled above, so
        # anything still in the node's cgroups is a leftover of a failure: ended by its pid.
        if not self.node:
            return
        roots = self.cgroup_roots()
        for attempt in range(50):
            pids = set()
            for root in roots:
                for dirpath, _, files in os.walk(root):
                    if "cgroup.procs" in files:
                        try:
                            with open(os.path.join(dirpath, "cgroup.procs")) as f:
                                pids.update(int(x) for x in f.read().split())
                        except OSError:
                            pass
            if not pids:
                break
            if attempt == 0:
                errors.append("processes left in the node's cgroups: %s" % sorted(pids))
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)
        # Slurm leaves the empty slurm_<node> directories behind; deepest first.
        for root in roots:
            for dirpath, _, _ in sorted(os.walk(root), key=lambda w: -w[0].count(os.sep)):
                try:
                    os.rmdir(dirpath)
                except FileNotFoundError:
                    pass
                except OSError as e:
                    errors.append("rmdir %s: %s" % (dirpath, e))
