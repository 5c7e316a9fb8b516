#!/bin/sh
# Lints a text-format exposition with the real Prometheus tool. Clean means exit 0 AND no output:
# promtool prints lint findings while still exiting 0 in some cases.
set -u
file="$1"
promtool="${PROMTOOL:-promtool}"
if ! command -v "$promtool" >/dev/null 2>&1; then
  echo "promtool not found (install Debian's prometheus package); this check cannot pass without it" >&2
  exit 1
fi
out=$("$promtool" check metrics < "$file" 2>&1)
rc=$?
if [ "$rc" -ne 0 ] || [ -n "$out" ]; then
  echo "promtool check metrics $file: exit $rc" >&2
  printf '%s\n' "$out" >&2
  exit 1
fi
echo "promtool check metrics $file: clean"
