#!/usr/bin/env bash
# Runs every test. On a fresh Debian 12 machine: installs what is missing, then builds and tests
# three trees (README, "Tests"): the default build with the whole suite; an AddressSanitizer and
# UndefinedBehaviorSanitizer build with the unit tests and the integration tests labelled
# sanitize; and the fuzz targets (clang, only the libraries they need), each run briefly over its
# corpus (docs/fuzzing.md). Then it makes the release (scripts/release.sh, both architectures)
# and runs its acceptance checks in foreign root file systems (tests/release, docs/packaging.md).
# After the default tree's build, scripts/lint.sh checks include arrows, format and clang-tidy.
# Compilers run through ccache, so a run on a machine that has built
# the project before, from any clone, reuses its objects. Each tree's run writes its temporary
# files under a TMPDIR of its own, and fails if the tests leave anything there. At the end, the
# ten slowest tests of each tree and the run's time are printed. Exits non-zero if anything fails.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh test
jobs=$(nproc)
status=0
started=$SECONDS
summary=$(mktemp /tmp/gpumeter-slowest.XXXXXX)
trap 'rm -f "$summary"' EXIT

# The ten slowest tests in CTest's output (standard input), slowest first. Every stage reads all
# of its input: under pipefail, a stage that stopped early would fail the run by SIGPIPE.
slowest() {
  sed -nE 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+) [. ]*[^0-9]*([0-9.]+) sec$/\2 \1/p' |
    sort -rn | awk 'NR <= 10 { printf "  %8.1f s  %s\n", $1, $2 }'  # reads it all: no SIGPIPE
}

for preset in default asan fuzz; do
  echo "== [$preset] configure and build"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j "$jobs"
  if [ "$preset" = default ]; then
    # Include arrows, format and clang-tidy, over the default tree's compile commands.
    scripts/lint.sh --build build || status=1
  fi
  echo "== [$preset] test"
  # The tests and everything they start write their temporary files under a TMPDIR of this run
  # (kept short: unix socket paths are limited to 107 bytes), which must be empty afterwards.
  # Mode 1777 as /tmp has: some tests read their fixtures as another user.
  tmp=$(mktemp -d /tmp/gpumeter-ctest.XXXXXX)
  chmod 1777 "$tmp"
  log=$(mktemp /tmp/gpumeter-ctest-log.XXXXXX)
  if [ "$preset" = fuzz ]; then
    TMPDIR="$tmp" ctest --preset "$preset" -j "$jobs" --timeout 600 2>&1 | tee "$log" || status=1
  else
    # The tests labelled wallclock mostly wait on real time, not the CPU: they run all at once
    # beside the others (tests/integration/CMakeLists.txt), and their output follows.
    wallclock_log=$(mktemp /tmp/gpumeter-wallclock.XXXXXX)
    TMPDIR="$tmp" ctest --preset "$preset" -L wallclock -j 16 --timeout 600 >"$wallclock_log" 2>&1 &
    wallclock=$!
    TMPDIR="$tmp" ctest --preset "$preset" -LE 'wallclock|alone' -j "$jobs" --timeout 600 2>&1 | tee "$log" || status=1
    wait "$wallclock" || status=1
    echo "== [$preset] the wallclock tests"
    cat "$wallclock_log"
    cat "$wallclock_log" >>"$log"
    rm -f "$wallclock_log"
    # Then the tests that need the machine to themselves, one at a time (none is sanitized).
    if [ "$preset" = default ]; then
      echo "== [$preset] the tests that run alone"
      TMPDIR="$tmp" ctest --preset "$preset" -L alone -j 1 --timeout 600 2>&1 | tee -a "$log" || status=1
    fi
  fi
  {
    echo "== [$preset] the ten slowest tests"
    slowest <"$log"
  } >>"$summary"
  rm -f "$log"
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
# The release: its build, then its checks, under a TMPDIR of their own as the trees' tests.
release_started=$SECONDS
echo "== [release] scripts/release.sh"
if scripts/release.sh; then
  echo "== [release] test"
  tmp=$(mktemp -d /tmp/gpumeter-release.XXXXXX)
  TMPDIR="$tmp" /usr/bin/python3 tests/release/test_release.py -v || status=1  # Debian's, with its modules
  rm -rf "$tmp"
else
  status=1
fi
echo "== [release] $((SECONDS - release_started)) s" >>"$summary"
cat "$summary"
echo "== scripts/test.sh: $((SECONDS - started)) s, $([ $status = 0 ] && echo passed || echo FAILED)"
exit $status
