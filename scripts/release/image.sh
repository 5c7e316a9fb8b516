#!/usr/bin/env bash
# Builds gpumeter's container image from a release bundle (scripts/release.sh), with no container
# engine and no registry: the base is made by mmdebstrap from Debian's mirror, the image is
# assembled by umoci, and the result is written as an OCI archive (a tar of an OCI image layout).
#
# The image, one layer:
#   - a Debian 12 (bookworm) root with only glibc (libc6, libgcc-s1), base-files, netbase and
#     busybox (for the health check: the image has no curl), made with mmdebstrap's "extract"
#     variant, so no maintainer script runs and a foreign architecture needs no emulation. Its
#     /var/lib/dpkg/status lists those packages (written here from their control files), so
#     vulnerability scanners (trivy, grype, syft) see them. Docs, manuals, locales and glibc's
#     iconv modules (gconv) are left out; every package's copyright file stays.
#   - the agent, /usr/bin/gpumeter (the bundle's libexec/gpumeter: no launcher, the image's glibc
#     2.36 is above the floor), the simulator /usr/lib/gpumeter/libnvidia-ml.so.1 (found beside
#     the binary as ../lib/gpumeter/; the simulator's tools, gpumeter-sim, are left out: the image
#     runs the agent), /etc/gpumeter/{gpumeter,pricing}.yaml and
#     /usr/share/gpumeter/{scenarios,pricing,prometheus,grafana,alertmanager}.
#   - the user and group gpumeter, 9400:9400, and its state directory /var/lib/gpumeter (the
#     ledger's state file), owned by it.
# Its config: user 9400:9400, entrypoint /usr/bin/gpumeter, cmd serve
# --config.file=/etc/gpumeter/gpumeter.yaml, port 9400/tcp, NVIDIA_VISIBLE_DEVICES=all and
# NVIDIA_DRIVER_CAPABILITIES=utility (the NVIDIA container toolkit then mounts the host's
# libnvidia-ml.so.1), the org.opencontainers.image.* labels, and Docker's Healthcheck (below).
#
# The archive names the image gpumeter:VERSION: index.json's manifest carries
# org.opencontainers.image.ref.name=gpumeter:VERSION (podman load: localhost/gpumeter:VERSION;
# skopeo copy oci-archive:FILE:gpumeter:VERSION ...) and io.containerd.image.name=
# docker.io/library/gpumeter:VERSION (ctr import, docker load >= 25), and a Docker manifest.json
# beside it lets older docker load take it too (the layout of `docker save` since Docker 25).
#
# The Debian root is cached outside the sources, in ${GPUMETER_CACHE_DIR:-~/.cache/gpumeter}/image/,
# keyed by suite, architecture, mirrors and package list; GPUMETER_IMAGE_REFRESH=1 makes it
# again (for Debian's security updates; the root is what the mirror had when it was made). With
# SOURCE_DATE_EPOCH set (scripts/release.sh sets it) the image is reproducible from the same
# bundle and root: every time in it, files' and config's, is that one.
# Needs mmdebstrap, umoci, dpkg-deb and python3; runs as root or not (the layer is written as a
# tar with its owners set, nothing is unpacked). Prints the archive's path on stdout, progress on
# stderr. tests/release/image_run.sh checks the result.
#
# Usage: scripts/release/image.sh BUNDLE_DIR amd64|arm64 OUT_DIR VERSION
set -euo pipefail
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")

# mmdebstrap's extract hook (run by the build below as `image.sh --base-hook ROOT`): the
# dpkg status of the extracted packages, then what the image does not need.
if [[ "${1:-}" == --base-hook ]]; then
  root=$2
  shopt -s nullglob
  debs=("$root"/var/cache/apt/archives/*.deb)
  if ((${#debs[@]} == 0)); then
    echo "image.sh: no packages in $root/var/cache/apt/archives for the dpkg status" >&2
    exit 1
  fi
  mkdir -p "$root/var/lib/dpkg/info"
  touch "$root/var/lib/dpkg/status"
  for deb in "${debs[@]}"; do
    pkg=$(dpkg-deb -f "$deb" Package)
    # (usr-is-merged, from the merged-usr hook, is there already)
    ! grep -qx "Package: $pkg" "$root/var/lib/dpkg/status" || continue
    march=$(dpkg-deb -f "$deb" Architecture)
    # The status of an installed package: its control fields with Status after Package.
    dpkg-deb -f "$deb" | sed '1a Status: install ok installed' >>"$root/var/lib/dpkg/status"
    echo >>"$root/var/lib/dpkg/status"
    list=$root/var/lib/dpkg/info/$pkg.list
    [[ "$march" == all ]] || list=$root/var/lib/dpkg/info/$pkg:$march.list
    dpkg-deb --fsys-tarfile "$deb" | tar -t | sed 's|^\./|/|; s|/$||; s|^$|/.|' >"$list"
  done
  # Docs but the copyright files, manuals, locales, iconv modules, apt's lists and archives.
  find "$root/usr/share/doc" -mindepth 1 \( -type f -o -type l \) ! -name copyright -delete
  find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
  rm -rf "$root"/usr/share/{man,info,locale,lintian,linda} "$root"/usr/lib/*-linux-gnu/gconv \
    "$root"/var/cache/apt/*.bin "$root"/var/lib/apt/lists/*
  rm -f "$root/var/lib/dpkg/status-old"
  # The host's, copied in by mmdebstrap: the container runtime mounts its own.
  for f in etc/resolv.conf etc/hostname; do
    rm -f "${root:?}/$f" && : >"$root/$f" && chmod 0644 "$root/$f"
  done
  exit 0
fi

# shellcheck source=scripts/release/args.sh
. "$(dirname "$self")/args.sh"
release_args "$@"
bundle=$input
case "$arch" in
  amd64) triplet=x86_64-linux-gnu ;;
  arm64) triplet=aarch64-linux-gnu ;;
esac
for f in libexec/gpumeter lib/gpumeter/libnvidia-ml.so.1 etc/gpumeter/gpumeter.yaml share/gpumeter/scenarios; do
  [[ -e "$bundle/$f" ]] || { echo "image.sh: $bundle has no $f: not a gpumeter bundle" >&2; exit 2; }
done
for tool in mmdebstrap umoci dpkg-deb python3; do
  command -v "$tool" >/dev/null || { echo "image.sh: $tool is missing (scripts/install-deps.sh release)" >&2; exit 2; }
done
epoch=${SOURCE_DATE_EPOCH:-$(git -C "$(dirname "$self")" log -1 --format=%ct 2>/dev/null || date +%s)}
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)

# ---- the Debian root, from the cache or made by mmdebstrap ---------------------------------------
suite=bookworm
mirror=${GPUMETER_DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${GPUMETER_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
sources=("deb $mirror $suite main" "deb $mirror $suite-updates main" "deb $security $suite-security main")
# glibc (libc6 brings libgcc-s1), /etc/os-release and the licenses, /etc/services and
# /etc/protocols, and busybox for the health check's wget.
packages=libc6,base-files,netbase,busybox
cache=${GPUMETER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpumeter}/image
# The key changes with anything that changes the root, this script's hook included.
key=$(printf '%s\n' "$suite" "$arch" "$packages" "${sources[@]}" \
  "$(sed -n '/^if \[\[ "${1:-}" == --base-hook/,/^fi$/p' "$self")" | sha256sum | cut -c1-16)
base=$cache/debian-$suite-$arch-$key.tar
if [[ ! -s "$base" || "${GPUMETER_IMAGE_REFRESH:-0}" == 1 ]]; then
  echo "image.sh: making the Debian $suite $arch root ($packages) with mmdebstrap" >&2
  mkdir -p "$cache"
  # extract: the packages (and what they depend on) are unpacked, no maintainer script runs;
  # merged-usr: /bin, /sbin and /lib are links into /usr, as in every Debian 12 system.
  SOURCE_DATE_EPOCH=$epoch mmdebstrap --variant=extract --architectures="$arch" \
    --include="$packages" --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --extract-hook="\"$self\" --base-hook \"\$1\"" \
    --format=tar "$suite" "$base.part" "${sources[@]}" >&2 || { rm -f "$base.part"; exit 1; }
  mv "$base.part" "$base"
else
  echo "image.sh: Debian $suite $arch root from the cache: $base" >&2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# ---- the layer: the Debian root plus gpumeter, one tar with owners and times set ---------------
echo "image.sh: layer" >&2
python3 - "$base" "$bundle" "$work/layer.tar" "$epoch" "$triplet" <<'EOF'
import io, os, sys, tarfile

base, bundle, out, epoch, triplet = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
entries = {}  # name -> (TarInfo, bytes or None)


def norm(name):
    name = name[2:] if name.startswith("./") else name
    return name.rstrip("/")


with tarfile.open(base) as t:
    for m in t.getmembers():
        name = norm(m.name)
        if not name or name == ".":
            continue
        if m.islnk():  # hard links become copies: the entries are re-sorted below
            src = t.getmember(m.linkname)
            data = t.extractfile(src).read()
            m = tarfile.TarInfo(name); m.size = len(data); m.mode = src.mode
            entries[name] = (m, data)
            continue
        m.name = name
        entries[name] = (m, t.extractfile(m).read() if m.isreg() else None)


def add_dir(name, mode=0o755, uid=0, gid=0):
    parts = name.split("/")
    for i in range(1, len(parts)):  # parents first, as root-owned 0755 if missing
        parent = "/".join(parts[:i])
        if parent not in entries:
            add_dir(parent)
    info = tarfile.TarInfo(name); info.type = tarfile.DIRTYPE; info.mode = mode; info.uid = uid; info.gid = gid
    entries[name] = (info, None)


def add_file(name, data, mode=0o644):
    if os.path.dirname(name) not in entries:
        add_dir(os.path.dirname(name))
    info = tarfile.TarInfo(name); info.size = len(data); info.mode = mode
    entries[name] = (info, data)


def add_tree(src, dest):
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames.sort()
        rel = os.path.relpath(dirpath, src)
        d = dest if rel == "." else dest + "/" + rel
        add_dir(d)
        for f in sorted(filenames):
            with open(os.path.join(dirpath, f), "rb") as fh:
                add_file(d + "/" + f, fh.read(), 0o755 if os.stat(os.path.join(dirpath, f)).st_mode & 0o111 else 0o644)


def read(rel):
    with open(os.path.join(bundle, rel), "rb") as f:
        return f.read()


add_file("usr/bin/gpumeter", read("libexec/gpumeter"), 0o755)
add_file("usr/lib/gpumeter/libnvidia-ml.so.1", read("lib/gpumeter/libnvidia-ml.so.1"), 0o644)
add_tree(os.path.join(bundle, "etc/gpumeter"), "etc/gpumeter")
for d in sorted(os.listdir(os.path.join(bundle, "share/gpumeter"))):
    if d != "systemd":  # the unit is for hosts
        add_tree(os.path.join(bundle, "share/gpumeter", d), "usr/share/gpumeter/" + d)
add_file("usr/share/doc/gpumeter/copyright", read("share/doc/gpumeter/copyright"))
# The accounts (the base has no base-passwd: these are all of them) and the name service.
add_file("etc/passwd", b"root:x:0:0:root:/root:/usr/sbin/nologin\n"
         b"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
         b"gpumeter:x:9400:9400:gpumeter agent:/var/lib/gpumeter:/usr/sbin/nologin\n")
add_file("etc/group", b"root:x:0:\nnogroup:x:65534:\ngpumeter:x:9400:\n")
add_file("etc/nsswitch.conf", b"passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n"
         b"networks: files\nprotocols: files\nservices: files\nethers: files\nrpc: files\n")
add_dir("root", 0o700)
add_dir("tmp", 0o1777)
add_dir("var/lib/gpumeter", 0o755, 9400, 9400)
# The dynamic loader's search path, for libraries mounted in by the NVIDIA container toolkit
# (which runs ldconfig itself) or by hand.
if not any(n.startswith("etc/ld.so.conf.d/") for n in entries):
    add_file("etc/ld.so.conf.d/%s.conf" % triplet, b"/usr/local/lib/%s\n/lib/%s\n/usr/lib/%s\n" % ((triplet.encode(),) * 3))
if "etc/ld.so.conf" not in entries:
    add_file("etc/ld.so.conf", b"include /etc/ld.so.conf.d/*.conf\n")

with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as t:
    for name in sorted(entries, key=lambda n: n.split("/")):
        info, data = entries[name]
        info.mtime = epoch  # one time for all: the cached root's own times do not matter
        info.uname = info.gname = ""
        info.pax_headers = {}
        t.addfile(info, io.BytesIO(data) if data is not None else None)
EOF

# ---- the image, with umoci ----------------------------------------------------------------------
echo "image.sh: image" >&2
layout=$work/layout
ref=$version
umoci init --layout "$layout"
umoci new --image "$layout:$ref"
umoci raw add-layer --image "$layout:$ref" --history.created="$created" \
  --history.created_by="scripts/release/image.sh: Debian $suite ($packages) and gpumeter $version" \
  "$work/layer.tar"
# The labels; licenses is an SPDX expression (a license the copyright file names that is not an
# SPDX identifier becomes LicenseRef-<name>); source only when GPUMETER_IMAGE_SOURCE names it.
license=$(sed -n 's/^License: *//p' "$bundle/share/doc/gpumeter/copyright" | head -1)
case "$license" in
  "" | Apache-2.0 | MIT | ISC | MPL-2.0 | BSD-[23]-Clause | GPL-* | LGPL-* | AGPL-*) ;;
  *) license=LicenseRef-$license ;;
esac
labels=(
  --config.label="org.opencontainers.image.title=gpumeter"
  --config.label="org.opencontainers.image.description=GPU monitoring and chargeback agent: Prometheus metrics, per-process owners and an exact usage ledger"
  --config.label="org.opencontainers.image.version=$version"
  --config.label="org.opencontainers.image.created=$created"
  --config.label="org.opencontainers.image.base.name=debian:$suite"
)
[[ -z "$license" ]] || labels+=(--config.label="org.opencontainers.image.licenses=$license")
[[ -z "${GPUMETER_IMAGE_SOURCE:-}" ]] || labels+=(--config.label="org.opencontainers.image.source=$GPUMETER_IMAGE_SOURCE")
umoci config --image "$layout:$ref" --no-history --created="$created" --author="gpumeter" \
  --os=linux --architecture="$arch" \
  --config.user=9400:9400 --config.workingdir=/ \
  --clear=config.entrypoint --config.entrypoint=/usr/bin/gpumeter \
  --clear=config.cmd --config.cmd=serve --config.cmd=--config.file=/etc/gpumeter/gpumeter.yaml \
  --config.exposedports=9400/tcp --config.stopsignal=SIGTERM \
  --clear=config.env --config.env=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --config.env=NVIDIA_VISIBLE_DEVICES=all --config.env=NVIDIA_DRIVER_CAPABILITIES=utility \
  --clear=config.labels "${labels[@]}"
umoci gc --layout "$layout"

# ---- Docker's health check, the names, docker's manifest.json --------------------------------------
# OCI's image config has no health check; Docker's has config.Healthcheck, and docker run keeps it
# from an OCI image too (Docker reads the config as its own type). podman honours it only in
# docker-format images, and Kubernetes never reads it: the DaemonSet's probes
# (deploy/kubernetes/daemonset.yaml) check /-/healthy and /-/ready instead. So it is written into
# the config blob here, after umoci, which would drop a key it does not know; the manifest and
# the index then point at the new blob.
python3 - "$layout" "$version" "$arch" <<'EOF'
import hashlib, json, os, sys

layout, version, arch = sys.argv[1:]
blobs = os.path.join(layout, "blobs", "sha256")


def read_blob(desc):
    with open(os.path.join(blobs, desc["digest"].split(":", 1)[1]), "rb") as f:
        return f.read()


def write_blob(obj, old_desc):
    data = json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()
    digest = hashlib.sha256(data).hexdigest()
    with open(os.path.join(blobs, digest), "wb") as f:
        f.write(data)
    old = old_desc["digest"].split(":", 1)[1]
    if old != digest:
        os.remove(os.path.join(blobs, old))
    return dict(old_desc, digest="sha256:" + digest, size=len(data))


with open(os.path.join(layout, "index.json")) as f:
    index = json.load(f)
assert len(index["manifests"]) == 1, index
mdesc = index["manifests"][0]
manifest = json.loads(read_blob(mdesc))
config = json.loads(read_blob(manifest["config"]))
assert config["architecture"] == arch and config["os"] == "linux", (config["architecture"], config["os"])
platform = {"architecture": arch, "os": "linux"}
if arch == "arm64":  # as Docker's and Debian's own arm64 images say it
    config["variant"] = platform["variant"] = "v8"
second = 1000 * 1000 * 1000
config["config"]["Healthcheck"] = {
    "Test": ["CMD", "/bin/busybox", "wget", "-q", "-O", "/dev/null", "http://127.0.0.1:9400/-/healthy"],
    "Interval": 30 * second, "Timeout": 5 * second, "StartPeriod": 10 * second, "Retries": 3,
}
manifest["config"] = write_blob(config, manifest["config"])
name = "gpumeter:" + version
mdesc = write_blob(manifest, mdesc)
mdesc["annotations"] = {"org.opencontainers.image.ref.name": name,
                        "io.containerd.image.name": "docker.io/library/" + name}
mdesc["platform"] = platform
index["manifests"] = [mdesc]
with open(os.path.join(layout, "index.json"), "w") as f:
    json.dump(index, f, separators=(",", ":"), sort_keys=True)
# docker load before Docker 25 reads only this (the layers may be compressed).
with open(os.path.join(layout, "manifest.json"), "w") as f:
    json.dump([{"Config": "blobs/sha256/" + manifest["config"]["digest"].split(":", 1)[1],
                "RepoTags": [name],
                "Layers": ["blobs/sha256/" + l["digest"].split(":", 1)[1] for l in manifest["layers"]]}],
              f, separators=(",", ":"))
# Every blob is one the index reaches.
used = {mdesc["digest"], manifest["config"]["digest"]} | {l["digest"] for l in manifest["layers"]}
extra = {"sha256:" + b for b in os.listdir(blobs)} - used
assert not extra, "unreferenced blobs: %s" % extra
layer_bytes = sum(l["size"] for l in manifest["layers"])
print("image.sh: %d layer(s), %d bytes compressed (%.1f MiB), config %s" % (
    len(manifest["layers"]), layer_bytes, layer_bytes / 1048576, manifest["config"]["digest"]), file=sys.stderr)
EOF

archive=$out/gpumeter-$version-$arch.oci.tar
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" --mode=a+r,u+w,go-w \
  -C "$layout" -cf "$archive.part" oci-layout index.json manifest.json blobs
mv "$archive.part" "$archive"
echo "image.sh: $archive ($(du -k --apparent-size "$archive" | awk '{printf "%.1f MiB", $1 / 1024}'))" >&2
echo "$archive"
