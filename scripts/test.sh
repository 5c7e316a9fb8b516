#!/usr/bin/env bash
# Runs every test. On a fresh Debian 12 machine: installs what is missing, then builds and runs
# the whole suite twice: a normal build, and the same suite under AddressSanitizer and
# UndefinedBehaviorSanitizer. Exits non-zero if anything fails.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh test
jobs=$(nproc)
status=0
for preset in default asan; do
  echo "== [$preset] configure and build"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j "$jobs"
  echo "== [$preset] test"
  if ! ctest --preset "$preset" -j "$jobs" --timeout 600; then
    status=1
  fi
done
exit $status
