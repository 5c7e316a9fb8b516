#!/usr/bin/env bash
# Installs the Debian 12 packages gpumeter needs, skipping those already present.
# Usage: scripts/install-deps.sh [build|run|test|bench|release]...   (default: build)
set -euo pipefail

build_pkgs=(cmake ninja-build g++ git pkg-config ccache
  libcpp-httplib-dev libboost-dev libssl-dev zlib1g-dev libbrotli-dev
  libyaml-cpp-dev nlohmann-json3-dev libfmt-dev libcli11-dev libre2-dev
  libgtest-dev libgmock-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  dpkg-dev file)  # the Debian package: cpack -G DEB computes Depends with dpkg-shlibdeps, which needs file
run_pkgs=(prometheus prometheus-alertmanager victoria-metrics util-linux
  python3 python3-yaml librocm-smi64-1)  # scripts/history.py, alert_history.py; the simulated AMD node
test_pkgs=(prometheus prometheus-alertmanager victoria-metrics python3-pil python3 python3-yaml python3-prometheus-client curl chromium procps
  python3-aiosmtpd  # test_alert_receivers: the SMTP relay Alertmanager mails to
  systemd man-db lintian  # test_package: systemd-analyze verify, man --warnings, Debian's package checker
  clang-14 libclang-rt-14-dev  # the fuzz preset: libFuzzer and the sanitizers' runtimes
  clang-format-14 clang-tidy-14  # scripts/lint.sh: the format and the function-size limit
  faketime  # test_clock: libfaketime steps the agent's wall clock
  librocm-smi64-1 rocm-smi util-linux  # test_rocm: the real ROCm SMI library and CLI read the simulated amdgpu tree (unshare)
  slurmctld slurmd slurm-client munge slurmdbd mariadb-server)  # test_slurm_real: a single-host Slurm 22.05 with accounting
release_pkgs=(binutils  # scripts/release.sh: readelf and objdump check the portable binaries
  crossbuild-essential-arm64  # the arm64 cross compiler; the arm64 libraries are arm64_pkgs below
  rpm  # rpmbuild makes the RPM
  umoci  # assembles the OCI image on a root file system that
  mmdebstrap  # makes from Debian's mirror (also the test's foreign roots)
  skopeo  # inspects the image
  rpmlint lintian qemu-user-static binfmt-support  # tests/release: the package checkers; arm64 binaries run under qemu
  arch-test)  # mmdebstrap: an arm64 root file system
# The arm64 libraries the cross build links, from Debian's arm64 archive (dpkg --add-architecture).
arm64_pkgs=(libboost-dev:arm64 libssl-dev:arm64 zlib1g-dev:arm64 libbrotli-dev:arm64
  libfmt-dev:arm64 libre2-dev:arm64 libgrpc++-dev:arm64 libprotobuf-dev:arm64 libcrypt-dev:arm64
  libgtest-dev:arm64 libgmock-dev:arm64 libcpp-httplib-dev:arm64)
bench_pkgs=(wrk nginx-light libbenchmark-dev procps curl linux-perf  # linux-perf: bench/cpu_profile.py --perf
  librocm-smi64-1 util-linux)  # bench/rocm_bench.py: the real ROCm SMI library reads the simulated amdgpu tree (unshare)

want=()
for group in "${@:-build}"; do
  case "$group" in
    build) want+=("${build_pkgs[@]}") ;;
    run) want+=("${build_pkgs[@]}" "${run_pkgs[@]}") ;;
    test) want+=("${build_pkgs[@]}" "${test_pkgs[@]}") ;;
    bench) want+=("${build_pkgs[@]}" "${bench_pkgs[@]}") ;;
    release) want+=("${build_pkgs[@]}" "${release_pkgs[@]}" "${arm64_pkgs[@]}") ;;
    *) echo "install-deps: unknown group '$group' (expected build, run, test, bench or release)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# De-duplicate while keeping order.
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | awk 'NF && !seen[$0]++')
if ((${#missing[@]} == 0)); then
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
if printf '%s\n' "${missing[@]}" | grep -q ':arm64$' && ! dpkg --print-foreign-architectures | grep -qx arm64; then
  $SUDO dpkg --add-architecture arm64
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
