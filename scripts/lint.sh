#!/usr/bin/env bash
# The house checks that need no test binary: include arrows against the module map
# (scripts/lint/check_arrows.py, docs/architecture.md), clang-format, and clang-tidy
# (.clang-format, .clang-tidy; Debian's clang-format-14 and clang-tidy-14). scripts/test.sh runs
# them all after building the default tree. Exits non-zero, naming each problem, if any fails.
#
# usage: scripts/lint.sh [--root DIR] [--build DIR] [arrows|format|tidy]...   (default: all three)
#   --root   the tree to check (default: this repository)
#   --build  a configured tree with compile_commands.json, for tidy (default: ROOT/build)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
root=$here
build=
checks=()
while [ $# -gt 0 ]; do
  case "$1" in
    --root) root=$(cd "$2" && pwd); shift 2 ;;
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    arrows | format | tidy) checks+=("$1"); shift ;;
    -h | --help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "lint.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ ${#checks[@]} -gt 0 ] || checks=(arrows format tidy)
build=${build:-$root/build}
jobs=$(nproc)
status=0

# The C and C++ sources of the project, generated and vendored files aside.
sources() {
  local dirs=()
  for d in src tests bench; do [ -d "$root/$d" ] && dirs+=("$d"); done
  (cd "$root" && find "${dirs[@]}" -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.c' \) \
    -not -path '*/proto/*' -not -path 'tests/fuzz/corpus/*' | sort)
}

for check in "${checks[@]}"; do
  case "$check" in
    arrows)
      echo "== lint: include arrows"
      /usr/bin/python3 "$here/scripts/lint/check_arrows.py" --root "$root" || status=1
      ;;
    format)
      echo "== lint: clang-format"
      # --dry-run -Werror prints each difference as an error and exits non-zero.
      (cd "$root" && sources | xargs -P "$jobs" -n 20 clang-format-14 --style=file --dry-run -Werror) || status=1
      ;;
    tidy)
      echo "== lint: clang-tidy"
      if [ ! -f "$build/compile_commands.json" ]; then
        echo "lint.sh: $build/compile_commands.json is missing: configure that tree first" >&2
        exit 2
      fi
      # Only the project's own sources under src/, each with the compile command of its own
      # library: a file that a test also compiles appears twice, and GCC's precompiled header of
      # the tests means nothing to clang.
      db=$(mktemp -d "${TMPDIR:-/tmp}/gpumeter-lint-db.XXXXXX")
      /usr/bin/python3 - "$build/compile_commands.json" "$db/compile_commands.json" <<'PY'
import json, sys
seen, kept = set(), []
for entry in json.load(open(sys.argv[1], encoding="utf-8")):
    if "cmake_pch" in entry.get("command", "") or entry["file"] in seen:
        continue
    seen.add(entry["file"])
    kept.append(entry)
json.dump(kept, open(sys.argv[2], "w", encoding="utf-8"))
PY
      files=$(cd "$root" && sources | grep -E '^src/.*\.(cpp|c)$' | sed "s|^|$root/|")
      # GCC's warning options that clang does not know are not findings.
      # shellcheck disable=SC2086
      printf '%s\n' $files | xargs -P "$jobs" -n 4 clang-tidy-14 --quiet -p "$db" \
        --extra-arg=-Wno-unknown-warning-option 2>/dev/null >"$db/tidy.log" || status=1
      cp "$db/tidy.log" "$build/lint-tidy.log"
      rm -rf "$db"
      grep -E 'warning:|error:' "$build/lint-tidy.log" || true
      ;;
  esac
done
[ $status = 0 ] && echo "== lint: passed" || echo "== lint: FAILED" >&2
exit $status
