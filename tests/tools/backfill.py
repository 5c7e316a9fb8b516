#!/usr/bin/python3
"""A synthetic gpumeter fleet history to backfill into Prometheus or VictoriaMetrics, and its
exact ground truth.

The fleet: NODES nodes (instance "node-N:9400", job "gpumeter") of GPUS_PER_NODE GPUs each. Jobs
(Kubernetes pods, Slurm jobs with hpc_job, plain-server users) start and stop at random whole
seconds, on one or several GPUs, each with a known SM share, memory and so power; some GPUs are
time-sliced by a second stream of small pods, and some have a little busy time no process
accounts for. The agent's ledger counters are computed analytically from those loads, as
`gpumeter serve` would have exported them at each scrape (see docs/ledger.md for the rules):

  allocated   1/|M| per second to each process present; 1 to __idle__ when none
  busy        each process's SM share; the GPU's rest to __unattributed__
  memory      each process's memory
  energy      I/|M| + (TDP - I) x share to each process (P = I + (TDP - I) x U); P to __idle__

Events (all configurable with --events FILE.json; defaults depend on --days):
  * an agent restarted WITHOUT its state file: every ledger counter of the node restarts from 0;
    the seconds from the old agent's last scrape to the new agent's start are counted nowhere;
  * an agent down WITH its state for hours: no scrapes from the node; on restart the counters
    continue, the last BUFFER_SECONDS (the driver's sample buffer) before the restart are
    integrated, the rest of the outage goes to gpumeter_ledger_gap_seconds_total;
  * Prometheus itself down for hours: no scrapes from any node; the counters keep counting;
  * an owner idle for over 24 h leaves the exposition (as every owner does) and comes back later
    with its counters restarted from 0: one after 42 h, one 10 minutes after leaving, growing past
    its old total before the next 3 h step. The idle owner of a GPU busy for over 24 h does too.

The simulation starts WARMUP days before the first sample, so counters are non-zero at the start.
Samples: one per scrape interval, from END - DAYS to END inclusive (END defaults to now - 4 h
rounded down to the hour: the last 3 h must not be backfilled). Output files hold whole
ALIGN-second windows aligned to the epoch (18 h: the largest block promtool cuts), so
`promtool tsdb create-blocks-from openmetrics` makes one block from each file in one pass.

Truth (--truth FILE): for each requested period [a, b] (--period, --daily-periods), the usage
per owner and per GPU, computed from the construction by integrating the piecewise-constant loads
over the period, never from the samples:
  * "counted": what the agent's ledger counted (usage in a lost interval is excluded), which is
    what an exact report over Prometheus must find when a and b are scrape times outside gaps;
  * "actual": what the GPUs really did, lost intervals included (for judging other formulas).
Reserved owners carry their project ("__idle__", "__unattributed__") in every owner dimension
of the grouped sums, as `gpumeter report` does.

Usage:
  backfill.py --nodes 2 --gpus-per-node 4 --days 30 --interval 60 --seed 1 --out DIR \
      [--format openmetrics|prometheus] [--truth FILE] [--period FROM:TO ...] [--daily-periods]
      [--end UNIX] [--events FILE] [--no-gauges] [--workers N] [--describe]
"""
import argparse
import bisect
import json
import math
import os
import random
import subprocess
import sys
import time

DAY = 86400
RETENTION = 24 * 3600      # ledger.owner_retention: owners not charged for this long leave the output
BUFFER_SECONDS = 20        # the driver's sample buffer: integrated after an outage with state
ALIGN = 18 * 3600          # promtool's largest block (getCompatibleBlockDuration of 24h+ = 18h)
GIB = 1 << 30
OWNER_DIMS = ("project", "user", "namespace", "pod", "container", "hpc_job")
IDLE = ("__idle__", "", "", "", "", "")
UNATTRIBUTED = ("__unattributed__", "", "", "", "", "")
RESERVED = {IDLE[0], UNATTRIBUTED[0]}

# name, idle power (ledger.idle_power_watts), power at full utilization, memory
MODELS = [
    ("NVIDIA H100 80GB HBM3", 70.0, 700.0, 80 * GIB),
    ("NVIDIA A100-SXM4-80GB", 55.0, 400.0, 80 * GIB),
    ("NVIDIA L40S", 35.0, 350.0, 48 * GIB),
]
USERS = [("alice", "vision"), ("bob", "nlp"), ("carol", "speech"), ("dave", "recsys"),
         ("erin", "genai"), ("frank", "vision"), ("grace", "nlp"), ("heidi", "genai")]
PROJECTS = ["vision", "nlp", "speech", "recsys", "genai"]
COUNTERS = [  # family, help
    ("gpu_allocated_seconds", "Seconds of the GPU allocated to the owner."),
    ("gpu_busy_seconds", "Integral of GPU utilization in seconds (on a MIG device: of its SM activity), by owner."),
    ("gpu_memory_byte_seconds", "Integral of the owner's device memory in byte-seconds."),
    ("gpu_attributed_energy_joules", "GPU energy in joules charged to the owner."),
]


# ---------------------------------------------------------------------------------------------
# Construction


class Proc:
    """One process of a job on one GPU: present on [start, end) with a constant load."""
    __slots__ = ("owner", "start", "end", "share", "memory")

    def __init__(self, owner, start, end, share, memory):
        self.owner, self.start, self.end, self.share, self.memory = owner, start, end, share, memory


class Gpu:
    __slots__ = ("node", "index", "uuid", "model", "idle_w", "tdp_w", "procs", "unattributed",
                 "segments", "lives", "device_lives")

    def __init__(self, node, index, uuid, model):
        self.node, self.index, self.uuid = node, index, uuid
        self.model, self.idle_w, self.tdp_w, _ = model
        self.procs = []
        self.unattributed = 0.0  # SM share no process accounts for, while a process is present


class Node:
    __slots__ = ("number", "instance", "gpus", "lost", "restarts", "outages", "missing")

    def __init__(self, number):
        self.number = number
        self.instance = "node-%d:9400" % number
        self.gpus = []
        self.lost = []      # [from, to): time the ledger did not count
        self.restarts = []  # (r1, r2): old agent's last scrape, new agent's start (no state)
        self.outages = []   # (o1, o2, gap): down with state; gap seconds noted at o2
        self.missing = []   # (from, to): scrapes strictly inside are missing


def default_events(days, nodes, gpus_per_node):
    """Event times in hours after the first sample, chosen so that no event crosses a day."""
    h = days * 24.0
    last = nodes
    quick = 3 * round(0.3 * h / 3)  # a multiple of 3 h after the first sample
    return {
        "agent_restarts_without_state": [{"node": min(2, nodes), "at_hours": round(0.4 * h + 0.53, 2),
                                          "down_seconds": 25}],
        "agent_outages_with_state": [{"node": 1, "at_hours": round(0.55 * h + 0.37, 2), "hours": 5.5}],
        "prometheus_gaps": [{"at_hours": round(0.7 * h + 0.41, 2), "hours": 2.5}],
        "returning_owners": [
            {"node": last, "gpu": min(1, gpus_per_node - 1), "owner": {"project": "research", "user": "zoe"},
             "at_hours": round(0.2 * h + 0.23, 2), "hours": 6.0, "away_hours": 42.0, "again_hours": 8.0},
            # Back 10 minutes after leaving the exposition (24 h after its last second), just across
            # a multiple of 3 h from the start (the grid of a 30-day report's steps): by the next
            # step the new series has grown past the old one's total, so only the raw samples show
            # the reset.
            {"node": 1, "gpu": min(2, gpus_per_node - 1), "owner": {"project": "research", "user": "yuki"},
             "at_hours": quick - 25 - 5 / 60.0, "hours": 1.0, "away_hours": 24 + 10 / 60.0, "again_hours": 4.0},
        ],
        # time-sliced GPUs (a second stream of small pods) and GPUs with unattributed busy time
        "shared_gpus": [[n, gpus_per_node - 1] for n in range(1, nodes + 1, 2)],
        "unattributed_gpus": [[n, 0] for n in range(1, nodes + 1)],
        "unattributed_ratio": 0.02,
        "jobs": {"mean_idle_hours": 2.5, "short_hours": [1, 12], "long_hours": [12, 72], "long_fraction": 0.4,
                 "sizes": [1, 1, 1, 1, 2, 2, 4, 8], "kinds": {"k8s": 0.5, "slurm": 0.35, "plain": 0.15}},
    }


class Fleet:
    def __init__(self, nodes, gpus_per_node, days, interval, end, seed, events, warmup_days=3.0):
        if DAY % interval:
            raise SystemExit("backfill: the scrape interval must divide a day")
        self.interval = interval
        self.end = end
        self.start = end - days * DAY            # first sample
        self.sim_start = self.start - int(warmup_days * DAY)  # the agents start; counters from 0
        self.days = days
        self.seed = seed
        self.events = events
        self.rng = random.Random(seed)
        self._make_nodes(nodes, gpus_per_node)
        self._schedule()
        self._apply_events()
        for g in self.gpus:
            self._segments(g)
            self._lives(g)
        self.ambiguous = self._check_resets()

    # -- helpers --------------------------------------------------------------------------------

    def _make_nodes(self, nodes, gpus_per_node):
        """The nodes, their models in turn, and GPUs with UUIDs from the seed."""
        self.nodes = []
        for n in range(1, nodes + 1):
            node = Node(n)
            model = MODELS[(n - 1) % len(MODELS)]
            for g in range(gpus_per_node):
                uuid = "GPU-%08x-%04x-%04x-%04x-%012x" % (
                    self.rng.getrandbits(32), self.rng.getrandbits(16), self.rng.getrandbits(16),
                    self.rng.getrandbits(16), self.rng.getrandbits(48))
                node.gpus.append(Gpu(node, g, uuid, model))
            self.nodes.append(node)
        self.gpus = [g for node in self.nodes for g in node.gpus]
        self.prom_gaps = []
        self.event_log = []
        self._pod_counter = 0
        self._slurm_counter = 400000

    def at(self, hours):
        return self.start + int(round(hours * 3600))

    def node(self, number):
        if not 1 <= number <= len(self.nodes):
            raise SystemExit("backfill: events name node %d of %d" % (number, len(self.nodes)))
        return self.nodes[number - 1]

    def _owner(self, rng, kind):
        if kind == "k8s":
            project = rng.choice(PROJECTS)
            self._pod_counter += 1
            pod = "%s-%s-%05x" % (project, rng.choice(["train", "finetune", "eval", "infer"]),
                                  (self._pod_counter * 7919 + rng.getrandbits(12)) & 0xfffff)
            return (project, "", "team-" + project, pod, "trainer", "")
        user, project = rng.choice(USERS)
        if kind == "slurm":
            self._slurm_counter += 1 + rng.randrange(3)
            return (project, user, "", "", "", str(self._slurm_counter))
        return (project, user, "", "", "", "")

    def _kind(self, rng, kinds):
        x = rng.random() * sum(kinds.values())
        for k, w in sorted(kinds.items()):
            x -= w
            if x < 0:
                return k
        return "k8s"

    def _duration(self, rng, spec):
        lo, hi = spec["long_hours"] if rng.random() < spec["long_fraction"] else spec["short_hours"]
        return int(3600 * math.exp(rng.uniform(math.log(lo), math.log(hi))))

    def _idle_gap(self, rng, spec):
        if rng.random() < 0.2:
            return 1 + rng.randrange(600)
        return 1 + int(rng.expovariate(1.0 / (spec["mean_idle_hours"] * 3600)))

    # -- jobs -------------------------------------------------------------------------------------

    def _schedule(self):
        ev = self.events
        spec = ev["jobs"]
        shared = {(n, g) for n, g in ev.get("shared_gpus", [])}
        for n, g in ev.get("unattributed_gpus", []):
            self.node(n).gpus[g].unattributed = float(ev.get("unattributed_ratio", 0.02))
        # Reserved lane-A intervals: the returning owners' jobs, placed first.
        reserved = {}
        for r in ev.get("returning_owners", []):
            gpu = self.node(r["node"]).gpus[r["gpu"]]
            o = r["owner"]
            owner = tuple(o.get(d, "") for d in OWNER_DIMS)
            if any(u == owner[1] for u, _ in USERS):
                raise SystemExit("backfill: a returning owner's user must not be one random jobs use")
            s1 = self.at(r["at_hours"])
            e1 = s1 + int(r["hours"] * 3600)
            s2 = e1 + int(r["away_hours"] * 3600)
            e2 = s2 + int(r["again_hours"] * 3600)
            if r["away_hours"] * 3600 <= RETENTION:
                raise SystemExit("backfill: a returning owner must be away for more than 24 h")
            for s, e in ((s1, e1), (s2, e2)):
                gpu.procs.append(Proc(owner, s, e, 0.55, 30 * GIB))
                reserved.setdefault(gpu, []).append((s, e))
            self.event_log.append({"kind": "returning-owner", "node": gpu.node.instance, "gpu": gpu.uuid,
                                   "owner": dict(zip(OWNER_DIMS, owner)), "first": [s1, e1],
                                   "series_ends_at": e1 + RETENTION, "returns_at": s2, "second": [s2, e2]})
        for node in self.nodes:
            rng = random.Random("%s/node/%d" % (self.seed, node.number))
            G = len(node.gpus)
            free = [self.sim_start] * G
            sizes = [k for k in spec["sizes"] if k <= G] or [1]
            while min(free) < self.end:
                k = rng.choice(sizes)
                chosen = sorted(range(G), key=lambda i: (free[i], i))[:k]
                start = max(free[i] for i in chosen) + self._idle_gap(rng, spec)
                duration = max(600, self._duration(rng, spec))
                kind = self._kind(rng, spec["kinds"])
                if kind == "plain":
                    duration = max(duration, 3600)  # a returning plain owner's old total stays large
                end = start + duration
                clash = False
                for i in chosen:
                    for s, e in reserved.get(node.gpus[i], []):
                        if start < e + 1 and s < end + 1:
                            free[i] = max(free[i], e)
                            clash = True
                if clash:
                    continue
                if start >= self.end:
                    for i in chosen:
                        free[i] = self.end
                    continue
                owner = self._owner(rng, kind)
                for i in chosen:
                    gpu = node.gpus[i]
                    share = rng.randint(20, 95) / 100.0
                    memory = rng.randint(8, 70) * GIB
                    if (node.number, i) in shared:
                        share, memory = min(share, 0.65), min(memory, 40 * GIB)
                    gpu.procs.append(Proc(owner, start, end, share, memory))
                    free[i] = end
            # the time-sliced GPUs' second stream: small single-GPU pods
            for i, gpu in enumerate(node.gpus):
                if (node.number, i) not in shared:
                    continue
                t = self.sim_start
                while True:
                    t += self._idle_gap(rng, spec)
                    if t >= self.end:
                        break
                    d = max(600, int(3600 * math.exp(rng.uniform(math.log(0.5), math.log(20)))))
                    gpu.procs.append(Proc(self._owner(rng, "k8s"), t, t + d, rng.randint(5, 30) / 100.0,
                                          rng.randint(2, 8) * GIB))
                    t += d

    # -- events -------------------------------------------------------------------------------------

    def _apply_events(self):
        ev = self.events
        S = self.interval
        for r in ev.get("agent_restarts_without_state", []):
            node = self.node(r["node"])
            t = self.at(r["at_hours"])
            r1 = self.start + -(-(t - self.start) // S) * S  # a scrape time: the old agent's last scrape
            r2 = r1 + int(r["down_seconds"])
            node.restarts.append((r1, r2))
            node.lost.append((r1, r2))
            node.missing.append((r1, r2))
            self.event_log.append({"kind": "agent-restart-without-state", "node": node.instance,
                                   "from": r1, "to": r2, "lost_seconds": r2 - r1,
                                   "note": "every ledger counter of the node restarts from 0 at 'to'; "
                                           "[from, to) is counted nowhere"})
        for o in ev.get("agent_outages_with_state", []):
            node = self.node(o["node"])
            o1 = self.at(o["at_hours"])
            o2 = o1 + int(o["hours"] * 3600)
            gap = (o2 - BUFFER_SECONDS) - o1
            node.outages.append((o1, o2, gap))
            node.lost.append((o1, o2 - BUFFER_SECONDS))
            node.missing.append((o1, o2))
            self.event_log.append({"kind": "agent-outage-with-state", "node": node.instance, "from": o1, "to": o2,
                                   "gap_seconds": gap, "integrated_from": o2 - BUFFER_SECONDS,
                                   "last_sample_before": self.last_scrape_before(o1, inclusive=True),
                                   "first_sample_after": self.first_scrape_after(o2)})
        for p in ev.get("prometheus_gaps", []):
            p1 = self.at(p["at_hours"])
            p2 = p1 + int(p["hours"] * 3600)
            self.prom_gaps.append((p1, p2))
            self.event_log.append({"kind": "prometheus-gap", "node": "", "from": p1, "to": p2,
                                   "last_sample_before": self.last_scrape_before(p1, inclusive=True),
                                   "first_sample_after": self.first_scrape_after(p2)})
        for node in self.nodes:
            node.lost.sort()
            node.missing.sort()
            node.restarts.sort()
            node.outages.sort()

    def last_scrape_before(self, t, inclusive=False):
        k = (t - self.start) // self.interval
        s = self.start + k * self.interval
        if s == t and not inclusive:
            s -= self.interval
        return s

    def first_scrape_after(self, t):
        return self.start + -(-(t - self.start) // self.interval) * self.interval

    def scrape_missing(self, node, t):
        for a, b in node.missing:
            if a < t < b:
                return True
        for a, b in self.prom_gaps:
            if a < t < b:
                return True
        return False

    def scrape_times(self, node, lo, hi):
        """Scrape times in [lo, hi) that reached Prometheus from this node."""
        S = self.interval
        first = max(self.start, self.first_scrape_after(lo))
        return [t for t in range(first, min(hi, self.end + 1), S) if not self.scrape_missing(node, t)]

    # -- segments: piecewise-constant state of one GPU ----------------------------------------------

    def _segments(self, gpu):
        """[(start, end, counted, epoch, procs)] covering [sim_start, end)."""
        node = gpu.node
        cuts = {self.sim_start, self.end}
        for p in gpu.procs:
            cuts.add(min(max(p.start, self.sim_start), self.end))
            cuts.add(min(max(p.end, self.sim_start), self.end))
        for a, b in node.lost:
            cuts.update((a, b))
        cuts = sorted(c for c in cuts if self.sim_start <= c <= self.end)
        starts = sorted(gpu.procs, key=lambda p: p.start)
        active = []
        j = 0
        segs = []
        restarts = [r2 for _, r2 in node.restarts]
        for a, b in zip(cuts, cuts[1:]):
            while j < len(starts) and starts[j].start <= a:
                active.append(starts[j])
                j += 1
            active = [p for p in active if p.end > a]
            counted = not any(x <= a and b <= y for x, y in node.lost)
            epoch = bisect.bisect_right(restarts, a)
            segs.append((a, b, counted, epoch, tuple(active)))
        gpu.segments = segs

    def rates(self, gpu, procs):
        """{owner: (allocated, busy, memory, energy) per second} for a state; see the module doc."""
        out = {}
        if not procs:
            out[IDLE] = (1.0, 0.0, 0.0, gpu.idle_w)
            return out
        n = float(len(procs))
        dyn = gpu.tdp_w - gpu.idle_w
        for p in procs:
            a, b, m, e = out.get(p.owner, (0.0, 0.0, 0.0, 0.0))
            out[p.owner] = (a + 1.0 / n, b + p.share, m + p.memory, e + gpu.idle_w / n + dyn * p.share)
        if gpu.unattributed > 0:
            out[UNATTRIBUTED] = (0.0, gpu.unattributed, 0.0, dyn * gpu.unattributed)
        return out

    def utilization(self, gpu, procs):
        if not procs:
            return 0.0
        return sum(p.share for p in procs) + gpu.unattributed

    # -- series lives -------------------------------------------------------------------------------

    def _lives(self, gpu):
        """Each owner's series as the agent exported it: a life starts at the owner's first charge
        (from 0), ends RETENTION after its last charge or when the agent restarts without state.
        A life is (owner, born, until, knots, values[4], slopes[4]); its value at a scrape t with
        born < t < until is values[j] + slopes[j] * (t - knots[j]) for the last knot <= t."""
        node = gpu.node
        epoch_end = [r1 for r1, _ in node.restarts] + [None]
        open_lives = {}
        lives = []

        def close(life):
            owner, born, last, epoch, pieces = life
            until = last + RETENTION
            if epoch_end[epoch] is not None:
                until = min(until, epoch_end[epoch] + 0.5)
            knots, values, slopes = [], [[], [], [], []], [[], [], [], []]
            cum = [0.0, 0.0, 0.0, 0.0]
            for a, b, r in pieces:
                if knots and knots[-1] == a:  # contiguous: replace the flat knot
                    knots.pop()
                    for c in range(4):
                        values[c].pop()
                        slopes[c].pop()
                knots.append(a)
                for c in range(4):
                    values[c].append(cum[c])
                    slopes[c].append(r[c])
                    cum[c] += r[c] * (b - a)
                knots.append(b)
                for c in range(4):
                    values[c].append(cum[c])
                    slopes[c].append(0.0)
            lives.append((owner, born, until, knots, values, slopes))

        for a, b, counted, epoch, procs in gpu.segments:
            if not counted:
                continue
            for owner, r in self.rates(gpu, procs).items():
                if owner == UNATTRIBUTED and r[1] <= 0:
                    continue
                life = open_lives.get(owner)
                if life is not None and (life[3] != epoch or a - life[2] >= RETENTION):
                    close(life)
                    life = None
                if life is None:
                    life = [owner, a, a, epoch, []]
                    open_lives[owner] = life
                life[4].append((a, b, r))
                life[2] = b
        for life in open_lives.values():
            close(life)
        lives.sort(key=lambda l: (l[0], l[1]))
        gpu.lives = lives

        # covered and gap seconds: one life per agent incarnation
        dev = []
        n_epochs = len(node.restarts) + 1
        for epoch in range(n_epochs):
            born = self.sim_start if epoch == 0 else node.restarts[epoch - 1][1]
            until = epoch_end[epoch] + 0.5 if epoch_end[epoch] is not None else self.end + 1
            knots, cv, cs = [born], [0.0], [0.0]
            cum = 0.0
            for a, b, counted, e, _ in gpu.segments:
                if e != epoch or not counted:
                    continue
                if knots[-1] == a:
                    knots.pop(), cv.pop(), cs.pop()
                knots.append(a), cv.append(cum), cs.append(1.0)
                cum += b - a
                knots.append(b), cv.append(cum), cs.append(0.0)
            gk, gv = [born], [0.0]
            g = 0.0
            for o1, o2, gap in node.outages:
                if born <= o2 < until:
                    g += gap
                    gk.append(o2), gv.append(g)
            dev.append((born - 0.5, until, (knots, cv, cs), (gk, gv, [0.0] * len(gk))))
        gpu.device_lives = dev

    def next_scrape(self, node, t):
        """The first scrape at or after t that reached Prometheus from the node, or None."""
        s = self.first_scrape_after(t)
        while s <= self.end:
            if not self.scrape_missing(node, s):
                return s
            s += self.interval
        return None

    def prev_scrape(self, node, t):
        """The last scrape at or before t that reached Prometheus from the node, or None."""
        s = self.last_scrape_before(t, inclusive=True)
        while s >= self.start:
            if not self.scrape_missing(node, s):
                return s
            s -= self.interval
        return None

    def _check_resets(self):
        """A series that restarts from 0 must show a drop at its first new sample in every counter,
        or no report can see the reset: list the cases where it does not."""
        bad = []
        for gpu in self.gpus:
            prev = {}
            for owner, born, until, knots, values, slopes in gpu.lives:
                first = self.next_scrape(gpu.node, math.floor(born) + 1)
                last = self.prev_scrape(gpu.node, math.ceil(until) - 1)
                if first is None or last is None or first >= until or last <= born:
                    continue  # never seen
                now = [value_at(knots, values[c], slopes[c], first) for c in range(4)]
                if owner in prev:
                    before = prev[owner]
                    for c in range(4):
                        if before[c] > 0 and now[c] >= before[c]:
                            bad.append({"gpu": gpu.uuid, "owner": dict(zip(OWNER_DIMS, owner)),
                                        "counter": COUNTERS[c][0], "at": first,
                                        "before": before[c], "after": now[c]})
                prev[owner] = [value_at(knots, values[c], slopes[c], last) for c in range(4)]
        return bad

    # -- truth ----------------------------------------------------------------------------------

    def truth(self, a, b):
        """Exact usage over [a, b] from the construction (see the module doc)."""
        owners = {}      # owner -> [counted 4, actual 4], summed over GPUs
        cells = {}       # (uuid, owner) -> counted 4
        per_gpu = []
        by = {"project": {}, "user": {}, "namespace": {}, "pod": {}, "hpc_job": {}, "model": {}, "node": {}}
        actual_by_project = {}
        tot = [0.0] * 4
        act_tot = [0.0] * 4
        for gpu in self.gpus:
            g = {"node": gpu.node.instance, "gpu": str(gpu.index), "uuid": gpu.uuid, "model": gpu.model,
                 "covered_seconds": 0.0, "idle_seconds": 0.0, "owners_seconds": 0.0, "busy_seconds": 0.0,
                 "unattributed_busy_seconds": 0.0, "energy_joules": 0.0, "lost_seconds": 0.0,
                 "actual_busy_seconds": 0.0, "actual_energy_joules": 0.0, "gap_seconds": 0.0}
            for s, e, counted, _, procs in gpu.segments:
                lo, hi = max(s, a), min(e, b)
                if hi <= lo:
                    continue
                d = hi - lo
                for owner, r in self.rates(gpu, procs).items():
                    v = [x * d for x in r]
                    slot = owners.setdefault(owner, [[0.0] * 4, [0.0] * 4])
                    for c in range(4):
                        slot[1][c] += v[c]
                        act_tot[c] += v[c]
                    ap = actual_by_project.setdefault(owner[0], [0.0] * 4)
                    for c in range(4):
                        ap[c] += v[c]
                    g["actual_busy_seconds"] += v[1]
                    g["actual_energy_joules"] += v[3]
                    if not counted:
                        continue
                    cell = cells.setdefault((gpu.uuid, owner), [0.0] * 4)
                    for c in range(4):
                        cell[c] += v[c]
                        slot[0][c] += v[c]
                        tot[c] += v[c]
                    for dim, key in (("project", owner[0]), ("user", owner[1]), ("namespace", owner[2]),
                                     ("pod", owner[3]), ("hpc_job", owner[5]), ("model", None), ("node", None)):
                        if dim == "model":
                            k = gpu.model
                        elif dim == "node":
                            k = gpu.node.instance
                        else:
                            k = owner[0] if owner[0] in RESERVED else key
                        acc = by[dim].setdefault(k, [0.0] * 4)
                        for c in range(4):
                            acc[c] += v[c]
                    g["busy_seconds"] += v[1]
                    g["energy_joules"] += v[3]
                    if owner == IDLE:
                        g["idle_seconds"] += v[0]
                    elif owner == UNATTRIBUTED:
                        g["unattributed_busy_seconds"] += v[1]
                    else:
                        g["owners_seconds"] += v[0]
                if counted:
                    g["covered_seconds"] += d
                else:
                    g["lost_seconds"] += d
            for o1, o2, gap in gpu.node.outages:
                if a < o2 <= b:
                    g["gap_seconds"] += gap
            per_gpu.append(g)

        def usage(v):
            return {"allocated_seconds": v[0], "busy_seconds": v[1], "memory_byte_seconds": v[2],
                    "energy_joules": v[3]}

        out = {
            "from": a, "to": b,
            "boundary_in_gap": self.in_gap(a) or self.in_gap(b),
            "owners": [dict(labels=dict(zip(OWNER_DIMS, o)), **usage(v[0])) for o, v in sorted(owners.items())
                       if any(v[0])],
            "by": {dim: {k: usage(v) for k, v in sorted(m.items())} for dim, m in by.items()},
            "total": usage(tot),
            "gpus": per_gpu,
            # per GPU and owner, to group any way: (uuid, owner labels, counted usage)
            "cells": [dict(uuid=u, labels=dict(zip(OWNER_DIMS, o)), **usage(v)) for (u, o), v in sorted(cells.items())],
            "covered_seconds": sum(g["covered_seconds"] for g in per_gpu),
            "idle_seconds": sum(g["idle_seconds"] for g in per_gpu),
            "owners_seconds": sum(g["owners_seconds"] for g in per_gpu),
            "gap_seconds": sum(g["gap_seconds"] for g in per_gpu),
            "lost_seconds": sum(g["lost_seconds"] for g in per_gpu),
            "actual": {"total": usage(act_tot),
                       "by_project": {k: usage(v) for k, v in sorted(actual_by_project.items())},
                       "owners": [dict(labels=dict(zip(OWNER_DIMS, o)), **usage(v[1]))
                                  for o, v in sorted(owners.items()) if any(v[1])]},
        }
        return out

    def in_gap(self, t):
        """True when t falls where some node has no scrape or its ledger was not counting."""
        if any(x < t < y for x, y in self.prom_gaps):
            return True
        for node in self.nodes:
            if any(x < t < y for x, y in node.missing) or any(x < t < y for x, y in node.lost):
                return True
        return False

    def describe(self):
        return {
            "format": "gpumeter-backfill-truth", "version": 1,
            "seed": self.seed, "interval": self.interval, "start": self.start, "end": self.end,
            "simulation_start": self.sim_start, "days": self.days,
            "buffer_seconds": BUFFER_SECONDS, "owner_retention_seconds": RETENTION,
            "fleet": [{"node": g.node.instance, "gpu": str(g.index), "uuid": g.uuid, "model": g.model,
                       "idle_watts": g.idle_w, "max_watts": g.tdp_w,
                       "shared": [g.node.number, g.index] in [list(x) for x in self.events.get("shared_gpus", [])],
                       "unattributed_ratio": g.unattributed} for g in self.gpus],
            "events": self.event_log,
            "ambiguous_resets": self.ambiguous,
            "series_lives": sum(len(g.lives) for g in self.gpus),
            "processes": sum(len(g.procs) for g in self.gpus),
        }


def value_at(knots, values, slopes, t):
    j = bisect.bisect_right(knots, t) - 1
    if j < 0:
        return 0.0
    return values[j] + slopes[j] * (t - knots[j])


# ---------------------------------------------------------------------------------------------
# Output


def escape(v):
    return v.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n")


def labelset(pairs):
    return "{" + ",".join('%s="%s"' % (k, escape(v)) for k, v in pairs) + "}"


class Writer:
    def __init__(self, fleet, fmt, gauges):
        self.fleet = fleet
        self.fmt = fmt
        self.gauges = gauges
        self.ms = fmt == "prometheus"

    def families(self):
        fams = []
        if self.gauges:
            fams += [("gpu_up", "gauge", "1 if the last collection of this GPU succeeded."),
                     ("gpu_utilization_ratio", "gauge", "GPU utilization as a ratio 0..1.")]
        fams.append(("gpu_info", "gauge", "Identity of the GPU, always 1."))
        fams += [(name, "counter", h) for name, h in COUNTERS]
        fams += [("gpumeter_ledger_covered_seconds", "counter", "Seconds of this GPU's time the ledger has integrated."),
                 ("gpumeter_ledger_gap_seconds", "counter", "Seconds of this GPU's time the ledger could not integrate.")]
        return fams

    def write_window(self, f, lo, hi):
        """Every sample with lo <= t < hi. Returns the number of samples."""
        fleet = self.fleet
        times = {node.number: fleet.scrape_times(node, lo, hi) for node in fleet.nodes}
        n = 0
        om = self.fmt == "openmetrics"
        mult = 1000 if self.ms else 1
        for name, kind, help_text in self.families():
            sample_name = name + "_total" if kind == "counter" else name
            if om:
                f.write("# TYPE %s %s\n# HELP %s %s\n" % (name, kind, name, help_text))
            else:
                f.write("# HELP %s %s\n# TYPE %s %s\n" % (sample_name, help_text, sample_name, kind))
            for gpu in fleet.gpus:
                node = gpu.node
                ts = times[node.number]
                if not ts:
                    continue
                tail = [("job", "gpumeter"), ("instance", node.instance)]
                dev = [("gpu", str(gpu.index)), ("uuid", gpu.uuid)]
                if name == "gpu_info":
                    prefix = sample_name + labelset(dev + [("vendor", "nvidia"), ("model", gpu.model),
                                                           ("pci_bus_id", "00000000:%02X:00.0" % (0x18 + gpu.index)),
                                                           ("driver_version", "550.54.15"),
                                                           ("vbios_version", "96.00.89.00.01")] + tail) + " 1 "
                    f.write("".join("%s%d\n" % (prefix, t * mult) for t in ts))
                    n += len(ts)
                elif name == "gpu_up":
                    prefix = sample_name + labelset(dev + tail) + " 1 "
                    f.write("".join("%s%d\n" % (prefix, t * mult) for t in ts))
                    n += len(ts)
                elif name == "gpu_utilization_ratio":
                    prefix = sample_name + labelset(dev + tail) + " "
                    segs = gpu.segments
                    starts = [s[0] for s in segs]
                    out = []
                    for t in ts:
                        # the agent's last collection: the load just before t
                        j = bisect.bisect_left(starts, t) - 1
                        out.append("%s%r %d\n" % (prefix, round(fleet.utilization(gpu, segs[max(j, 0)][4]), 6),
                                                  t * mult))
                    f.write("".join(out))
                    n += len(ts)
                elif name.startswith("gpumeter_ledger_"):
                    which = 2 if name == "gpumeter_ledger_covered_seconds" else 3
                    prefix = sample_name + labelset(dev + tail) + " "
                    for born, until, covered, gaps in gpu.device_lives:
                        knots, values, slopes = covered if which == 2 else gaps
                        n += self._series(f, prefix, ts, born, until, knots, values, slopes, mult)
                else:
                    c = [x[0] for x in COUNTERS].index(name)
                    for owner, born, until, knots, values, slopes in gpu.lives:
                        if until <= lo or born >= hi:
                            continue
                        prefix = sample_name + labelset(dev + list(zip(OWNER_DIMS, owner)) + tail) + " "
                        n += self._series(f, prefix, ts, born, until, knots, values[c], slopes[c], mult)
        if om:
            f.write("# EOF\n")
        return n

    @staticmethod
    def _series(f, prefix, ts, born, until, knots, values, slopes, mult):
        i = bisect.bisect_right(ts, born)
        k = bisect.bisect_left(ts, until)
        if i >= k:
            return 0
        j = bisect.bisect_right(knots, ts[i]) - 1
        last = len(knots) - 1
        out = []
        for t in ts[i:k]:
            while j < last and knots[j + 1] <= t:
                j += 1
            out.append("%s%r %d\n" % (prefix, values[j] + slopes[j] * (t - knots[j]), t * mult))
        f.write("".join(out))
        return k - i


def windows(fleet, align):
    lo = fleet.start - fleet.start % align
    while lo <= fleet.end:
        yield max(lo, fleet.start), min(lo + align, fleet.end + 1)
        lo += align


def write_files(fleet, out_dir, fmt, gauges, align, workers=1):
    """Writes one file per window; returns [(path, samples)] in time order."""
    os.makedirs(out_dir, exist_ok=True)
    ext = "om" if fmt == "openmetrics" else "prom"
    jobs = [(i, lo, hi, os.path.join(out_dir, "history-%03d.%s" % (i, ext)))
            for i, (lo, hi) in enumerate(windows(fleet, align))]
    writer = Writer(fleet, fmt, gauges)

    def one(job):
        _, lo, hi, path = job
        with open(path + ".tmp", "w", buffering=1 << 20) as f:
            n = writer.write_window(f, lo, hi)
        os.rename(path + ".tmp", path)
        return path, n

    if workers <= 1:
        return [one(j) for j in jobs]
    # fork-based workers share the fleet without pickling it
    results = {}
    pending = list(jobs)
    running = {}
    while pending or running:
        while pending and len(running) < workers:
            job = pending.pop(0)
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(r)
                try:
                    path, n = one(job)
                    os.write(w, str(n).encode())
                    os._exit(0)
                except BaseException as e:  # report and leave without running the parent's cleanup
                    sys.stderr.write("backfill worker: %r\n" % e)
                    os._exit(1)
            os.close(w)
            running[pid] = (job, r)
        pid, status = os.wait()
        job, r = running.pop(pid)
        data = os.read(r, 64)
        os.close(r)
        if status != 0:
            raise SystemExit("backfill: the worker for %s failed" % job[3])
        results[job[0]] = (job[3], int(data))
    return [results[i] for i in sorted(results)]


def iter_files(fleet, out_dir, fmt, gauges, align):
    """Like write_files, one window at a time, for a caller that consumes and deletes each file."""
    os.makedirs(out_dir, exist_ok=True)
    ext = "om" if fmt == "openmetrics" else "prom"
    writer = Writer(fleet, fmt, gauges)
    for i, (lo, hi) in enumerate(windows(fleet, align)):
        path = os.path.join(out_dir, "history-%03d.%s" % (i, ext))
        with open(path, "w", buffering=1 << 20) as f:
            n = writer.write_window(f, lo, hi)
        yield path, n


def promtool_blocks(files, blocks, on_file=None):
    """Converts each (path, samples) of `files` into TSDB blocks under `blocks` with
    `promtool tsdb create-blocks-from openmetrics` (one block per 18 h file), two promtool runs
    at a time, deleting each file once converted. Calls on_file(files, samples) as each starts;
    returns the samples converted. Raises RuntimeError naming the file promtool failed on."""
    running = []

    def reap(limit):
        while len(running) > limit:
            p, path = running.pop(0)
            _, err = p.communicate()
            if p.returncode != 0:
                raise RuntimeError("promtool failed on %s:\n%s" % (path, err[-2000:]))
            os.unlink(path)

    count = samples = 0
    try:
        for path, n in files:
            reap(1)
            running.append((subprocess.Popen(["promtool", "tsdb", "create-blocks-from", "openmetrics", "-q",
                                              "--max-block-duration=18h", path, blocks],
                                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), path))
            count += 1
            samples += n
            if on_file:
                on_file(count, samples)
        reap(0)
    finally:
        for p, _ in running:
            p.kill()
            p.wait()
    return samples


def default_end(now=None):
    now = time.time() if now is None else now
    return int(now - 4 * 3600) // 3600 * 3600


def parse_period(text):
    a, b = text.split(":")
    return int(a), int(b)


def build_fleet(args):
    end = args.end if args.end is not None else default_end()
    end -= end % math.lcm(args.interval, 3600)
    events = default_events(args.days, args.nodes, args.gpus_per_node)
    if args.events:
        with open(args.events) as f:
            events.update(json.load(f))
    return Fleet(args.nodes, args.gpus_per_node, args.days, args.interval, end, args.seed, events)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--gpus-per-node", type=int, default=4)
    p.add_argument("--days", type=int, default=30)
    p.add_argument("--interval", type=int, default=60, help="scrape interval in seconds (divides a day)")
    p.add_argument("--end", type=int, help="unix time of the last sample (default: now - 4 h, to the hour)")
    p.add_argument("--seed", default="1")
    p.add_argument("--events", help="JSON file overriding default events (keys as in default_events)")
    p.add_argument("--out", help="directory for the sample files")
    p.add_argument("--format", choices=["openmetrics", "prometheus"], default="openmetrics",
                   help="openmetrics: seconds, # EOF, for promtool; prometheus: text with ms timestamps, "
                        "for VictoriaMetrics /api/v1/import/prometheus")
    p.add_argument("--align", type=int, default=ALIGN, help="seconds per output file, aligned to the epoch")
    p.add_argument("--no-gauges", action="store_true", help="leave out gpu_up and gpu_utilization_ratio")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--truth", help="write the truth JSON here")
    p.add_argument("--period", action="append", default=[], help="FROM:TO in unix seconds (repeatable)")
    p.add_argument("--daily-periods", action="store_true", help="also every day of the history")
    p.add_argument("--describe", action="store_true", help="print the fleet and its events as JSON")
    args = p.parse_args(argv)

    t0 = time.time()
    fleet = build_fleet(args)
    built = time.time() - t0
    if args.describe:
        json.dump(fleet.describe(), sys.stdout, indent=1)
        print()
    if args.truth:
        doc = fleet.describe()
        periods = [(fleet.start, fleet.end)] + [parse_period(x) for x in args.period]
        if args.daily_periods:
            periods += [(fleet.start + d * DAY, fleet.start + (d + 1) * DAY) for d in range(args.days)]
        doc["periods"] = [fleet.truth(a, b) for a, b in periods]
        with open(args.truth, "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
    if args.out:
        files = write_files(fleet, args.out, args.format, not args.no_gauges, args.align, args.workers)
        n = sum(x[1] for x in files)
        sys.stderr.write("backfill: %d files, %d samples, %d series lives, model %.1fs, total %.1fs\n" % (
            len(files), n, sum(len(g.lives) for g in fleet.gpus), built, time.time() - t0))
    if fleet.ambiguous:
        sys.stderr.write("backfill: warning: %d resets invisible in the samples (see ambiguous_resets)\n"
                         % len(fleet.ambiguous))
    return 0


if __name__ == "__main__":
    sys.exit(main())
