#!/usr/bin/env bash
# The soak: plays a day of scenario at an accelerated clock (24 h at 48x, 30 min of wall time by
# default) on a simulated node of 8 GPUs with every owner resolvable, scrapes /metrics 20 times a
# second, prints the agent's RSS, open fds and threads over time with a summary after the
# warm-up, and compares the ledger with `gpumeter sim truth` per owner at the end. Exits non-zero
# if the ledger is off by more than 0.1% (plus one driver sample period per job edge) or RSS, fds
# or threads grew after the warm-up. `scripts/soak.sh --help` lists the options; bench/soak.py
# does the work. Builds the default preset first unless GPUMETER_BIN names a binary.
set -euo pipefail
cd "$(dirname "$0")/.."
for arg in "$@"; do
  if [ "$arg" = -h ] || [ "$arg" = --help ]; then exec /usr/bin/python3 bench/soak.py --help; fi
done
if [ -z "${GPUMETER_BIN:-}" ]; then
  cmake --preset default >/dev/null
  cmake --build --preset default
fi
exec /usr/bin/python3 bench/soak.py "$@"
