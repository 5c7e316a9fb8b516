#!/usr/bin/env bash
# Builds gpumeter's release for each architecture (docs/packaging.md, docs/install.md):
#   gpumeter-<version>-linux-<arch>.tar.gz  the portable bundle: runs on any Linux of its
#                                           architecture with glibc 2.34 or newer
#   gpumeter_<version>-1_<arch>.deb         Debian 12/13, Ubuntu 22.04/24.04
#   gpumeter-<version>-1.<rpm arch>.rpm     RHEL, Rocky and Alma 9, Amazon Linux 2023
#   gpumeter-<version>-<arch>.oci.tar       the container image, an OCI archive
# Each architecture is built in build-release-<arch>/ with GPUMETER_PORTABLE=ON
# (cmake/Portable.cmake); arm64 is cross-compiled with Debian's cross toolchain. The artifacts
# go to the output directory (default: release/), whose sizes table (SIZES.md) is printed at the
# end. Progress goes to stderr.
#
# Usage: scripts/release.sh [--arch amd64|arm64|all] [--out DIR] [--skip deb,rpm,image]
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n 's/^# \{0,1\}//; /^Usage:/,$p' "$0" | sed -n 1p; }
arches=(amd64 arm64)
out=release
skip=","
while (($#)); do
  case "$1" in
    --arch) shift; case "${1:-}" in
        all) arches=(amd64 arm64) ;;
        amd64 | arm64) arches=("$1") ;;
        *) echo "release.sh: --arch takes amd64, arm64 or all, not '${1:-}'" >&2; exit 2 ;;
      esac ;;
    --out) shift; out=${1:?--out needs a directory} ;;
    --skip) shift; skip=",${1:?--skip needs a list},"
      for s in ${skip//,/ }; do
        case "$s" in deb | rpm | image) ;; *) echo "release.sh: --skip takes deb, rpm and image, not '$s'" >&2; exit 2 ;; esac
      done ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "release.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

scripts/install-deps.sh release >&2
version=$(sed -n 's/^project(gpumeter VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
mkdir -p "$out"
out=$(cd "$out" && pwd)
jobs=$(nproc)
# Reproducible archives: every file's time is the last commit's.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1 CCACHE_DEPEND=1
export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime

# The ELF files may need glibc and nothing else, and no glibc symbol newer than the floor.
check_portable() {
  local file=$1 lib bad
  bad=$(readelf -d "$file" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' |
    grep -Ev '^(libc\.so\.6|libm\.so\.6|ld-linux-(x86-64|aarch64)\.so\.[12])$' || true)
  if [[ -n "$bad" ]]; then
    echo "release.sh: $file needs libraries besides glibc: $bad" >&2
    return 1
  fi
  lib=$(objdump -T "$file" | grep -o 'GLIBC_2\.[0-9]*' | sort -t. -k2 -n -u | tail -1)
  if [[ -z "$lib" ]]; then
    echo "release.sh: $file: objdump -T shows no glibc symbol version" >&2
    return 1
  fi
  if [[ "${lib#GLIBC_2.}" -gt 34 ]]; then
    echo "release.sh: $file needs $lib, above the floor GLIBC_2.34: $(objdump -T "$file" | grep "$lib" | awk '{print $NF}' | tr '\n' ' ')" >&2
    return 1
  fi
}

sizes=()
size_of() { du -k --apparent-size "$1" | awk '{printf "%.1f MiB", $1 / 1024}'; }

for arch in "${arches[@]}"; do
  build=build-release-$arch
  echo "== [$arch] configure and build $build" >&2
  toolchain=()
  if [[ "$arch" != "$(dpkg --print-architecture)" ]]; then
    toolchain=(-DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/toolchain-$arch.cmake")
  fi
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUMETER_PORTABLE=ON "${toolchain[@]}" \
    -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >&2
  cmake --build "$build" -j "$jobs" --target gpumeter gpumeter-sim nvml_sim cuda_sim gpumeter_man gpumeter_sim_man gpumeter_changelog >&2
  check_portable "$build/bin/gpumeter"
  check_portable "$build/bin/gpumeter-sim"
  check_portable "$build/lib/gpumeter/libnvidia-ml.so.1"
  check_portable "$build/lib/gpumeter/libcuda.so.1"

  # The installed tree, as the packages lay it out under /usr (the install rules of
  # cmake/Packaging.cmake), stripped.
  stage=$out/stage-$arch
  rm -rf "$stage"
  DESTDIR=$stage cmake --install "$build" --component gpumeter --prefix /usr --strip >/dev/null

  # The bundle: the same files under one directory, the agent (and gpumeter-sim, which it runs)
  # in libexec/ behind the launcher.
  name=gpumeter-$version-linux-$arch
  bundle=$out/$name
  echo "== [$arch] bundle $name" >&2
  rm -rf "$bundle"
  mkdir -p "$bundle/bin" "$bundle/libexec" "$bundle/lib" "$bundle/share/gpumeter/systemd"
  install -m 0755 "$stage/usr/bin/gpumeter" "$bundle/libexec/gpumeter"
  install -m 0755 "$stage/usr/bin/gpumeter-sim" "$bundle/libexec/gpumeter-sim"  # run by `gpumeter sim`
  install -m 0755 deploy/release/gpumeter-launcher.sh "$bundle/bin/gpumeter"
  cp -a "$stage/usr/lib/gpumeter" "$bundle/lib/gpumeter"
  cp -a "$stage/usr/share/man" "$stage/usr/share/doc" "$bundle/share/"
  cp -a "$stage/usr/share/gpumeter/." "$bundle/share/gpumeter/"
  cp -a "$stage/etc" "$bundle/etc"
  # The unit, for a bundle unpacked as /opt/gpumeter (docs/install.md).
  sed 's|^ExecStart=/usr/bin/gpumeter |ExecStart=/opt/gpumeter/bin/gpumeter |' \
    "$stage/lib/systemd/system/gpumeter.service" >"$bundle/share/gpumeter/systemd/gpumeter.service"
  install -m 0644 deploy/release/README.bundle "$bundle/README"
  tarball=$out/$name.tar.gz
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
    -C "$out" -cf - "$name" | gzip -9n >"$tarball"
  sizes+=("| $arch | bundle | $(basename "$tarball") | $(size_of "$tarball") |")

  if [[ "$skip" != *,deb,* ]]; then
    echo "== [$arch] Debian package" >&2
    rm -f "$build"/gpumeter_*.deb
    (cd "$build" && cpack -G DEB -D CPACK_DEBIAN_PACKAGE_ARCHITECTURE="$arch") >&2
    deb=$(ls "$build"/gpumeter_*_"$arch".deb)
    mv "$deb" "$out/"
    sizes+=("| $arch | deb | $(basename "$deb") | $(size_of "$out/$(basename "$deb")") |")
  fi
  if [[ "$skip" != *,rpm,* ]]; then
    echo "== [$arch] RPM" >&2
    rpm=$(scripts/release/rpm.sh "$stage" "$arch" "$out" "$version")
    sizes+=("| $arch | rpm | $(basename "$rpm") | $(size_of "$rpm") |")
  fi
  if [[ "$skip" != *,image,* ]]; then
    echo "== [$arch] OCI image" >&2
    image=$(scripts/release/image.sh "$bundle" "$arch" "$out" "$version")
    sizes+=("| $arch | image | $(basename "$image") | $(size_of "$image") |")
  fi
done

{
  echo "| arch | what | file | size |"
  echo "|---|---|---|---|"
  printf '%s\n' "${sizes[@]}"
} | tee "$out/SIZES.md"
