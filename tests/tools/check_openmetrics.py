#!/usr/bin/python3
"""Strict OpenMetrics 1.0 check with the Debian python3-prometheus-client parser.

Usage: check_openmetrics.py FILE   (reads stdin when FILE is "-")
Exits 1 on any parse error, or when the input has no metric families at all.
"""
import sys

try:
    from prometheus_client.openmetrics.parser import text_string_to_metric_families
except ImportError as e:  # a missing peer is a failure, not a skip
    print(f"cannot import prometheus_client ({e}); install python3-prometheus-client", file=sys.stderr)
    sys.exit(1)


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    path = sys.argv[1]
    with (sys.stdin if path == "-" else open(path, encoding="utf-8")) as f:
        text = f.read()
    try:
        families = list(text_string_to_metric_families(text))
    except Exception as e:  # the parser raises ValueError and friends for every violation
        print(f"INVALID OpenMetrics in {path}: {e}", file=sys.stderr)
        return 1
    if not families:
        print(f"{path}: no metric families", file=sys.stderr)
        return 1
    samples = sum(len(fam.samples) for fam in families)
    print(f"{path}: valid OpenMetrics, {len(families)} families, {samples} samples")
    return 0


if __name__ == "__main__":
    sys.exit(main())
