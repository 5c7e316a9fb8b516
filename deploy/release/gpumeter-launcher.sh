#!/bin/sh
# bin/gpumeter of the portable bundle (docs/install.md): checks the glibc floor, then runs the
# agent, libexec/gpumeter beside this directory. On a glibc older than the floor the dynamic
# loader would refuse the agent with "version `GLIBC_2.34' not found", which names neither the
# floor nor what to use instead; this says both in one line and exits 1. The .deb and the RPM
# install the agent itself as /usr/bin/gpumeter: their package managers enforce the floor.
floor_major=2
floor_minor=34
self=$(readlink -f -- "$0" 2>/dev/null) || self=$0
prefix=$(dirname -- "$(dirname -- "$self")")
version=$(getconf GNU_LIBC_VERSION 2>/dev/null)  # "glibc 2.36"; empty on a libc that is not glibc
version=${version#glibc }
case $version in
  [0-9]*.[0-9]*)
    major=${version%%.*}
    minor=${version#*.}
    minor=${minor%%[!0-9]*}
    if [ "$major" -lt "$floor_major" ] || { [ "$major" -eq "$floor_major" ] && [ "$minor" -lt "$floor_minor" ]; }; then
      echo "gpumeter: needs glibc $floor_major.$floor_minor or newer, and this system has glibc $version; use the container image (docs/install.md) or a newer system" >&2
      exit 1
    fi
    ;;
esac
exec "$prefix/libexec/gpumeter" "$@"
