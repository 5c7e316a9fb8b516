#!/usr/bin/env bash
# Builds the Debian package in one command: installs the build dependencies, configures a
# Release build in build-package/, builds what the package holds, runs `cpack -G DEB` and prints
# the path of the .deb on stdout (everything else goes to stderr). See docs/packaging.md.
# Usage: scripts/package.sh [extra cmake -D options, e.g. -DCPACK_PACKAGE_CONTACT="Name <mail>"]
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh build >&2
cmake -S . -B build-package -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >&2
# Only the packaged targets: the binary, the simulator library and the compressed man page.
cmake --build build-package -j "$(nproc)" --target gpumeter nvml_sim gpumeter_man gpumeter_changelog >&2
rm -f build-package/gpumeter_*.deb
out=$(cd build-package && cpack -G DEB)
printf '%s\n' "$out" >&2
deb=$(printf '%s\n' "$out" | sed -n 's/^CPack: - package: \(.*\) generated\.$/\1/p')
if [[ -z "$deb" || ! -f "$deb" ]]; then
  echo "package.sh: cpack made no .deb" >&2
  exit 1
fi
printf '%s\n' "$deb"
