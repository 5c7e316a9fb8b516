#!/usr/bin/env bash
# Builds gpumeter's RPM for the RHEL 9 family (RHEL, Rocky, Alma 9, Amazon Linux 2023) from a
# staged installed tree (scripts/release.sh), with deploy/rpm/gpumeter.spec and rpmbuild -bb:
# nothing is compiled. Checks that the package requires nothing but glibc, systemd and
# shadow-utils and provides nothing but itself, then prints the path of
# OUT_DIR/gpumeter-VERSION-1.<x86_64|aarch64>.rpm on stdout; progress goes to stderr.
#
# Usage: scripts/release/rpm.sh STAGE_DIR amd64|arm64 OUT_DIR VERSION
set -euo pipefail
spec=$(cd "$(dirname "$0")/../../deploy/rpm" && pwd)/gpumeter.spec

# shellcheck source=scripts/release/args.sh
. "$(dirname "$0")/args.sh"
release_args "$@"
stage=$input
case "$arch" in
  amd64) rpmarch=x86_64 ;;
  arm64) rpmarch=aarch64 ;;
esac
[[ -x "$stage/usr/bin/gpumeter" ]] || { echo "rpm.sh: $stage has no usr/bin/gpumeter" >&2; exit 2; }

top=$(mktemp -d)
trap 'rm -rf "$top"' EXIT
# The spec plus %changelog, converted from the staged Debian changelog: "  * x" -> "- x".
{
  cat "$spec"
  echo "%changelog"
  zcat "$stage/usr/share/doc/gpumeter/changelog.Debian.gz" | sed 's/%/%%/g' | awk '
    /^[a-z]/ { ver = $2; gsub(/[()]/, "", ver); body = ""; next }
    /^  \* / { body = body "- " substr($0, 5) "\n"; next }
    /^    /  { body = body "  " substr($0, 5) "\n"; next }
    /^ -- /  { split(substr($0, 5), p, "  "); split(p[2], d, /[ ,]+/)
               printf "* %s %s %s %s %s - %s\n%s\n", d[1], d[3], d[2], d[4], p[1], ver, body }'
} >"$top/gpumeter.spec"

reproducible=()
if [[ -n "${SOURCE_DATE_EPOCH:-}" ]]; then
  reproducible=(--define "use_source_date_epoch_as_buildtime 1" --define "clamp_mtime_to_source_date_epoch 1"
    --define "_buildhost reproducible")
fi
rpmbuild -bb --target "$rpmarch-linux" --define "_topdir $top" --define "stage $stage" \
  --define "gm_version $version" "${reproducible[@]}" "$top/gpumeter.spec" >&2
rpm=$out/gpumeter-$version-1.$rpmarch.rpm
mv "$top/RPMS/$rpmarch/gpumeter-$version-1.$rpmarch.rpm" "$rpm"

# Every EL9 system has glibc, systemd and shadow-utils; the package may need nothing else
# (config(gpumeter), which rpm adds for the %config files, is its own).
bad=$(rpm -qp --requires "$rpm" | grep -Ev '^(rpmlib\(|libc\.so\.6|libm\.so\.6|ld-linux-(x86-64|aarch64)\.so\.[12]|rtld\(GNU_HASH\)|systemd$|shadow-utils$|config\(gpumeter\) = )' || true)
bad+=$(rpm -qp --provides "$rpm" | grep -Ev '^(gpumeter|gpumeter\((x86-64|aarch-64)\)|config\(gpumeter\)) = ' | sed '1s/^/\n/' || true)
if [[ -n "$bad" ]]; then
  rm -f "$rpm"
  echo "rpm.sh: unexpected requirements or provides in the RPM:" >&2
  echo "$bad" >&2
  exit 1
fi
echo "$rpm"
