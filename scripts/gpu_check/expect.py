"""What the ledger should bill for a set of known loads: pure arithmetic over time segments.

Every load is an interval [start, end) of unix seconds with a rate (busy seconds per second).
Between consecutive edges (starts and ends of any load) the set of loads present is constant:

- allocated seconds: each second split evenly among the loads present (the process policy);
- busy seconds: a load alone on the GPU gets its rate. Where loads share the GPU, their busy
  periods may collide, and the driver splits a collision among them in a way no public source
  fixes, so each load may get anything from its rate less all the others ask, to its rate. The
  bounds hold either way; the midpoint reported is its rate where the rates add up to at most
  the whole GPU, and the split in proportion to the rates where they ask for more. The GPU's
  total is at least the largest rate present and at most min(1, their sum).
- The tolerance at an edge is one collection interval times how much the owner's expected rate
  changes there (a lone load: two edges of its full rate).
"""


def segments(intervals):
    """(start, end, [keys present]) for every stretch between consecutive edges."""
    edges = sorted({t for s, e in intervals.values() for t in (s, e)})
    for a, b in zip(edges, edges[1:]):
        yield a, b, [k for k, (s, e) in intervals.items() if s <= a and b <= e]


def allocated(intervals):
    """{key: expected allocated seconds, total variation of its share}."""
    out = {k: 0.0 for k in intervals}
    shares = {k: [] for k in intervals}
    for a, b, present in segments(intervals):
        for k in intervals:
            share = 1.0 / len(present) if k in present else 0.0
            out[k] += share * (b - a)
            shares[k].append(share)
    return {k: (out[k], variation(shares[k])) for k in intervals}


def variation(rates):
    """How much a piecewise constant rate moves in all, starting from and ending at 0."""
    steps = [0.0] + list(rates) + [0.0]
    return sum(abs(y - x) for x, y in zip(steps, steps[1:]))


def busy(loads):
    """loads: {key: (start, end, rate)}. {key: (low, mid, high, variation of its high rate)} and
    the total over all keys under "__total__"."""
    intervals = {k: (s, e) for k, (s, e, _) in loads.items()}
    rate = {k: r for k, (_, _, r) in loads.items()}
    acc = {k: [0.0, 0.0, 0.0, []] for k in list(loads) + ["__total__"]}
    for a, b, present in segments(intervals):
        asked = sum(rate[k] for k in present)
        for k in loads:
            lo, mid, hi = _one(k, present, rate, asked)
            _add(acc[k], lo, mid, hi, b - a)
        top = max([rate[k] for k in present] or [0.0])
        _add(acc["__total__"], top, min(1.0, asked), min(1.0, asked), b - a)
    return {k: (lo, mid, hi, variation(his)) for k, (lo, mid, hi, his) in acc.items()}


def _one(k, present, rate, asked):
    if k not in present:
        return 0.0, 0.0, 0.0
    r, others = min(rate[k], 1.0), asked - rate[k]
    if asked <= 1.0 and not others:
        return r, r, r
    return max(0.0, r - others), (r if asked <= 1.0 else r / asked), r


def _add(acc, lo, mid, hi, d):
    acc[0] += lo * d
    acc[1] += mid * d
    acc[2] += hi * d
    acc[3].append(hi)
