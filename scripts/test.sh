#!/usr/bin/env bash
# Runs every test. On a fresh Debian 12 machine: installs what is missing, then builds and runs
# the whole suite twice: a normal build, and the same suite under AddressSanitizer and
# UndefinedBehaviorSanitizer; then builds the fuzz targets (clang, only the libraries they
# need) and runs each briefly over its corpus (docs/fuzzing.md). Each run writes its temporary
# files under a TMPDIR of its own, and fails if the tests leave anything there. Exits non-zero
# if anything fails.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh test
jobs=$(nproc)
status=0
for preset in default asan fuzz; do
  echo "== [$preset] configure and build"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j "$jobs"
  echo "== [$preset] test"
  # The tests and everything they start write their temporary files under a TMPDIR of this run
  # (kept short: unix socket paths are limited to 107 bytes), which must be empty afterwards.
  # Mode 1777 as /tmp has: some tests read their fixtures as another user.
  tmp=$(mktemp -d /tmp/gpumeter-ctest.XXXXXX)
  chmod 1777 "$tmp"
  if [ "$preset" = fuzz ]; then
    TMPDIR="$tmp" ctest --preset "$preset" -j "$jobs" --timeout 600 || status=1
  else
    # The tests labelled wallclock mostly wait on real time, not the CPU: they run all at once
    # beside the others (tests/integration/CMakeLists.txt), and their output follows.
    wallclock_log=$(mktemp /tmp/gpumeter-wallclock.XXXXXX)
    TMPDIR="$tmp" ctest --preset "$preset" -L wallclock -j 16 --timeout 600 >"$wallclock_log" 2>&1 &
    wallclock=$!
    TMPDIR="$tmp" ctest --preset "$preset" -LE wallclock -j "$jobs" --timeout 600 || status=1
    wait "$wallclock" || status=1
    echo "== [$preset] the wallclock tests"
    cat "$wallclock_log"
    rm -f "$wallclock_log"
  fi
  if [ "${GPUMETER_KEEP_TEST_DIRS:-}" = 1 ]; then
    echo "== [$preset] test directories kept in $tmp"
  elif [ -n "$(ls -A "$tmp")" ]; then
    echo "== [$preset] FAILED: the tests left these in their temporary directory $tmp:" >&2
    ls -A "$tmp" | head -40 >&2
    status=1
    rm -rf "$tmp"
  else
    rmdir "$tmp"
  fi
done
exit $status
