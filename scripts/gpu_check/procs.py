"""Every process the check starts goes through one ProcessSet, which stops them all on every
exit path: a normal end, an exception, Ctrl-C, SIGTERM or SIGHUP (turned into SystemExit so
that `finally` runs). Each process has its own session, so a stop reaches its children too,
and its output goes to a log file in the output folder."""
import os
import signal
import subprocess
import time


class Proc:
    def __init__(self, name, args, env, log_path):
        self.name, self.args, self.log_path = name, args, log_path
        self._log = open(log_path, "ab")
        self._log.write(("$ %s\n" % " ".join(args)).encode())
        self._log.flush()
        self.started = time.time()
        self.popen = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
                                      env=env, start_new_session=True)
        self.pid = self.popen.pid

    def alive(self):
        return self.popen.poll() is None

    def wait(self, timeout):
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, grace=10):
        if self.popen.poll() is None:
            self._signal(signal.SIGTERM)
            if self.wait(grace) is None:
                self._signal(signal.SIGKILL)
                self.popen.wait()
        if not self._log.closed:
            self._log.close()
        return self.popen.returncode

    def _signal(self, sig):
        try:
            os.killpg(self.popen.pid, sig)
        except ProcessLookupError:
            pass

    def log_tail(self, n=2000):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")[-n:]


class ProcessSet:
    def __init__(self, log_dir, env):
        self.log_dir, self.env, self.procs = log_dir, env, []
        os.makedirs(log_dir, exist_ok=True)

    def start(self, name, args, env=None):
        full = dict(self.env)
        full.update(env or {})
        p = Proc(name, [str(a) for a in args], full, os.path.join(self.log_dir, name + ".log"))
        self.procs.append(p)
        return p

    def stop_all(self):
        for p in reversed(self.procs):
            p.stop()


def exit_on_signals():
    """SIGTERM and SIGHUP end the check as Ctrl-C does, through `finally`."""
    def handler(signum, frame):
        raise SystemExit(128 + signum)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)


def cpu_seconds(pid):
    """(utime + stime in seconds from /proc/<pid>/stat, the threads' run time from schedstat)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    stat = (int(fields[11]) + int(fields[12])) / ticks
    sched = 0
    task_dir = "/proc/%d/task" % pid
    for tid in os.listdir(task_dir):
        try:
            with open(os.path.join(task_dir, tid, "schedstat")) as f:
                sched += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return stat, sched / 1e9
