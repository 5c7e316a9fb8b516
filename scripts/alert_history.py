#!/usr/bin/python3
"""The alerts a history would have fired, as OpenMetrics series of `ALERTS` for
`promtool tsdb create-blocks-from openmetrics`: each alerting rule of the given rule files is
evaluated over [start, end] by one range query against a Prometheus that holds the history.

An alert with `for: D` fires where its expression held at every evaluation of the D before
(as Prometheus fires it: pending for D, then firing), at the evaluation step:

    count_over_time((EXPR)[D:STEP]) >= D / STEP + 1

The samples are ALERTS{alertname, alertstate="firing", the rule's labels, the expression's
labels} = 1, as Prometheus writes them. An alert whose expression reads recorded series (a name
with a colon) is left out: the history has none. (`promtool tsdb create-blocks-from rules`
evaluates recording rules only, and queries one block at a time: 25 rules over 30 days took
over ten minutes.)

Usage: alert_history.py --url URL --start UNIX --end UNIX --step 600 --out FILE RULE_FILE...
"""
import argparse
import json
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import yaml

UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def seconds(text):
    parts = re.findall(r"(\d+)(ms|s|m|h|d|w|y)", str(text))
    return sum(int(n) * UNITS[u] for n, u in parts)


def recorded_inputs(expr):
    # Metric names with a colon are recording rules' outputs; labels inside {} are not names.
    return re.search(r"[a-zA-Z_][a-zA-Z0-9_]*:[a-zA-Z0-9_:]*(?=\s*[\[{(\s)]|$)", re.sub(r"\{[^}]*\}", "", expr))


def query_range(url, expr, start, end, step):
    q = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": step})
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/api/v1/query_range?" + q, timeout=120) as r:
            return json.load(r)["data"]["result"]
    except urllib.error.HTTPError as e:
        raise SystemExit("alert history: %s: %s" % (expr, e.read().decode(errors="replace")[:500]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True, help="the Prometheus that holds the history")
    ap.add_argument("--start", type=int, required=True)
    ap.add_argument("--end", type=int, required=True)
    ap.add_argument("--step", type=int, required=True, help="evaluation step in seconds")
    ap.add_argument("--out", required=True)
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    t0 = time.monotonic()
    alerts, skipped = [], []
    for path in a.files:
        with open(path) as f:
            doc = yaml.safe_load(f) or {}
        for g in doc.get("groups", []):
            for r in g.get("rules", []):
                if "alert" not in r:
                    continue
                expr = r["expr"].strip()
                if recorded_inputs(expr):
                    skipped.append(r["alert"])
                    continue
                hold = seconds(r.get("for", "0s"))
                if hold >= a.step:
                    expr = "count_over_time((%s)[%ds:%ds]) >= %d" % (expr, hold, a.step, hold // a.step + 1)
                labels = {"alertname": r["alert"], "alertstate": "firing"}
                labels.update({k: str(v) for k, v in (r.get("labels") or {}).items()})
                alerts.append((r["alert"], expr, labels))
    fired = {}
    samples = 0
    with open(a.out, "w") as out:
        out.write("# HELP ALERTS Alerts the history fired.\n# TYPE ALERTS gauge\n")
        for name, expr, rule_labels in alerts:
            for series in query_range(a.url, expr, a.start, a.end, a.step):
                labels = {k: v for k, v in series["metric"].items() if k != "__name__"}
                labels.update(rule_labels)
                text = ",".join('%s="%s"' % (k, v.replace("\\", "\\\\").replace('"', '\\"'))
                                for k, v in sorted(labels.items()) if v != "")
                for t, _ in series["values"]:
                    out.write("ALERTS{%s} 1 %d\n" % (text, int(float(t))))
                samples += len(series["values"])
                fired[name] = fired.get(name, 0) + len(series["values"])
        out.write("# EOF\n")
    print("alert history: %d alerts evaluated in %.1f s; fired: %s; left out (they read recorded series): %s" %
          (len(alerts), time.monotonic() - t0,
           ", ".join("%s (%d evaluations)" % kv for kv in sorted(fired.items())) or "none",
           ", ".join(skipped) or "none"), file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
