# The arguments of scripts/release.sh's artifact scripts (rpm.sh, image.sh), sourced by them:
#   INPUT_DIR amd64|arm64 OUT_DIR VERSION
# release_args "$@" checks them and sets input, arch, out (made, absolute) and version; on bad
# ones it says why with the script's Usage line and exits 2.
release_args() {
  local name
  name=$(basename "$0")
  if (($# != 4)); then
    echo "$name: expected 4 arguments, got $#" >&2
    sed -n 's/^# \(Usage:.*\)/\1/p' "$0" >&2
    exit 2
  fi
  input=$1 arch=$2 out=$3 version=$4
  case "$arch" in
    amd64 | arm64) ;;
    *) echo "$name: ARCH must be amd64 or arm64, not '$arch'" >&2; exit 2 ;;
  esac
  [[ "$version" =~ ^[0-9]+(\.[0-9]+)*$ ]] || { echo "$name: bad VERSION '$version'" >&2; exit 2; }
  [[ -d "$input" ]] || { echo "$name: $input is not a directory" >&2; exit 2; }
  mkdir -p "$out"
  input=$(cd "$input" && pwd) out=$(cd "$out" && pwd)
}
