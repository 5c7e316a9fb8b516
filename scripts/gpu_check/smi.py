"""nvidia-smi as the witness: the invocations the check makes, and parsers for the formats the
real tool prints (`--query-gpu ... --format=csv,noheader,nounits`, `--query-compute-apps`,
`pmon`, `dmon --gpm-metrics`, `-q -d POWER`). The same code reads sim-nvidia-smi under --sim.

A value nvidia-smi cannot give is printed as "[N/A]", "[Not Supported]", "[Unknown Error]" or
similar, or "N/A" in older drivers: `value()` turns those into Absent, which the comparisons
record as "not compared"."""
import re
import subprocess
import threading
import time

# (what the check calls the field, the names nvidia-smi has used for it, newest first)
QUERY_FIELDS = [
    ("index", ["index"]), ("uuid", ["uuid"]),
    ("utilization.gpu", ["utilization.gpu"]), ("utilization.memory", ["utilization.memory"]),
    ("memory.total", ["memory.total"]), ("memory.reserved", ["memory.reserved"]),
    ("memory.used", ["memory.used"]), ("memory.free", ["memory.free"]),
    ("power.draw", ["power.draw"]), ("power.draw.average", ["power.draw.average"]),
    ("power.draw.instant", ["power.draw.instant"]),
    ("temperature.gpu", ["temperature.gpu"]), ("temperature.memory", ["temperature.memory"]),
    ("clocks.sm", ["clocks.sm"]), ("clocks.mem", ["clocks.mem"]), ("clocks.gr", ["clocks.gr"]),
    ("pstate", ["pstate"]),
    ("pcie.link.gen.current", ["pcie.link.gen.gpucurrent", "pcie.link.gen.current"]),
    ("pcie.link.width.current", ["pcie.link.width.current"]),
    ("ecc.errors.corrected.volatile.total", ["ecc.errors.corrected.volatile.total"]),
    ("ecc.errors.uncorrected.volatile.total", ["ecc.errors.uncorrected.volatile.total"]),
    ("clocks_event_reasons.active", ["clocks_event_reasons.active", "clocks_throttle_reasons.active"]),
]


class Absent:
    """A value nvidia-smi printed as not available; `text` is what it printed."""

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return "Absent(%r)" % self.text


def value(text):
    """A field of the CSV output as a number: P-states as their number, hex masks as integers."""
    t = text.strip()
    if not t or t.startswith("[") or t.upper() in ("N/A", "NOT SUPPORTED", "-"):
        return Absent(t)
    if re.fullmatch(r"P\d+", t):
        return int(t[1:])
    if t.lower().startswith("0x"):
        return int(t, 16)
    try:
        return float(t)
    except ValueError:
        return t


class Smi:
    """Runs nvidia-smi (`command` is its argv prefix) and logs every invocation and its output."""

    def __init__(self, command, env, log_path):
        self.command, self.env, self.log_path = list(command), env, log_path
        self.fields = None  # {our name: nvidia-smi's name} of the fields this nvidia-smi knows

    def run(self, args, timeout=30):
        argv = self.command + [str(a) for a in args]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=self.env)
        with open(self.log_path, "a") as f:
            f.write("$ %s  (exit %d, %s)\n%s%s\n" % (" ".join(argv), r.returncode, time.strftime("%H:%M:%S"),
                                                    r.stdout, r.stderr))
        return r

    def gpu_count(self):
        """GPUs `nvidia-smi -L` lists; 0 when it fails."""
        try:
            r = self.run(["-L"])
        except (OSError, subprocess.TimeoutExpired):
            return 0
        return sum(1 for l in r.stdout.splitlines() if l.startswith("GPU ")) if r.returncode == 0 else 0

    def known_fields(self):
        if self.fields is None:
            text = self.run(["--help-query-gpu"]).stdout
            known = set(re.findall(r'"([A-Za-z0-9_.]+)"', text))
            self.fields = {}
            for ours, names in QUERY_FIELDS:
                for n in names:
                    if n in known:
                        self.fields[ours] = n
                        break
        return self.fields

    def query(self, index):
        """One `--query-gpu` of GPU `index`: a Reading with {our field name: value}."""
        fields = self.known_fields()
        ours = list(fields)
        t0 = time.time()
        r = self.run(["--query-gpu=" + ",".join(fields[o] for o in ours), "--format=csv,noheader,nounits",
                      "-i", index])
        t1 = time.time()
        if r.returncode != 0:
            raise RuntimeError("nvidia-smi --query-gpu exited %d: %s" % (r.returncode, r.stderr.strip()[:300]))
        cells = next(csv_rows(r.stdout))
        return Reading(t0, t1, {o: value(c) for o, c in zip(ours, cells)})

    def compute_apps(self, uuid):
        """{pid: used MiB or Absent} of the compute processes on the GPU with this UUID."""
        r = self.run(["--query-compute-apps=pid,used_memory,gpu_uuid", "--format=csv,noheader,nounits"])
        if r.returncode != 0:
            raise RuntimeError("nvidia-smi --query-compute-apps exited %d: %s" % (r.returncode, r.stderr.strip()[:300]))
        apps = {}
        for cells in csv_rows(r.stdout):
            if len(cells) == 3 and cells[2].strip() == uuid and cells[0].strip().isdigit():
                apps[int(cells[0])] = value(cells[1])
        return apps

    def power_samples(self, index):
        """The "Power Samples" section of `-q -d POWER`: {duration_s, samples, avg_w}, or None."""
        r = self.run(["-q", "-d", "POWER", "-i", index])
        return parse_power_samples(r.stdout) if r.returncode == 0 else None

    def dmon_gpm(self, index, ids, count=2):
        """`dmon --gpm-metrics`: the last line's GPM columns, {metric id: value or Absent}, and the
        column names, or (None, None) when dmon failed."""
        r = self.run(["dmon", "-i", index, "--gpm-metrics", ",".join(str(i) for i in ids), "-d", 1, "-c", count],
                     timeout=30 + 2 * count)
        if r.returncode != 0:
            return None, r.stderr.strip()[:300] or r.stdout.strip()[:300]
        return parse_dmon_gpm(r.stdout, ids)

    def pmon(self, index, env=None):
        return Pmon(self.command + ["pmon", "-i", str(index), "-s", "u", "-d", "1"], env or self.env, self.log_path)


class Reading:
    def __init__(self, t0, t1, values):
        self.t0, self.t1, self.values = t0, t1, values


def csv_rows(text):
    for line in text.splitlines():
        if line.strip():
            yield [c.strip() for c in line.split(",")]


def parse_power_samples(text):
    """Duration, number and average of the power samples nvidia-smi printed; None without the
    section or with N/A in it."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip() == "Power Samples":
            section = {}
            indent = len(line) - len(line.lstrip())
            for sub in lines[i + 1:]:
                if not sub.strip() or len(sub) - len(sub.lstrip()) <= indent or ":" not in sub:
                    break
                key, _, val = sub.partition(":")
                section[key.strip()] = val.strip()
            return _power_section(section)
    return None


def _power_section(section):
    try:
        duration = float(section["Duration"].split()[0])
        samples = int(section["Number of Samples"].split()[0])
    except (KeyError, ValueError, IndexError):
        return None
    avg = value(section.get("Avg", "N/A").split()[0]) if section.get("Avg") else None
    return {"duration_s": duration, "samples": samples, "avg_w": avg if isinstance(avg, float) else None}


def parse_dmon_gpm(text, ids):
    """The GPM columns are the last len(ids) columns, in the order asked; names vary by driver."""
    header, last = None, None
    for line in text.splitlines():
        s = line.strip()
        if not s:
            continue
        if s.startswith("#"):
            if header is None:
                header = s.lstrip("#").split()
            continue
        last = s.split()
    if header is None or last is None or len(last) < len(ids):
        return None, "no data line in dmon's output"
    names = header[-len(ids):] if len(header) >= len(ids) else [str(i) for i in ids]
    return {m: value(c) for m, c in zip(ids, last[-len(ids):])}, names


class Pmon:
    """`nvidia-smi pmon -s u -d 1` in the background: every line it prints, with the time read."""

    def __init__(self, argv, env, log_path):
        self.argv, self.log_path, self.lines = argv, log_path, []
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env=env, start_new_session=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append((time.time(), line.rstrip("\n")))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.thread.join(5)
        with open(self.log_path, "a") as f:
            f.write("$ %s  (stopped)\n%s\n" % (" ".join(self.argv), "\n".join(l for _, l in self.lines)))
        return parse_pmon(self.lines)


def parse_pmon(lines):
    """[(time read, pid, sm %)] for every data line with a pid and an sm figure."""
    cols, out = None, []
    for t, line in lines:
        s = line.strip()
        if s.startswith("#"):
            names = s.lstrip("#").split()
            if "pid" in names and "sm" in names:
                cols = names
            continue
        if not s or cols is None:
            continue
        cells = s.split(None, len(cols) - 1)
        row = dict(zip(cols, cells))
        pid, sm = row.get("pid", "-"), value(row.get("sm", "-"))
        if pid.isdigit() and isinstance(sm, float):
            out.append((t, int(pid), sm))
    return out
