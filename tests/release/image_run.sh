#!/usr/bin/env bash
# Runs gpumeter's OCI image (scripts/release/image.sh) the way its config says, without a
# container runtime, and checks it: tests/release/test_release.py calls it on the amd64 image.
#
#   1. `skopeo inspect oci-archive:FILE` reads the archive (its architecture must be ARCH; the
#      labels are printed) and the raw image config gives Docker's Healthcheck.
#   2. skopeo copies it into an OCI layout and `umoci unpack` makes the runtime bundle: the
#      rootfs and config.json, the OCI runtime spec that runc or crun would be given (user, env,
#      args = entrypoint + cmd, cwd). The state directory must be owned by that user.
#   3. The agent runs as config.json says -- its args plus --sim.scenario (the simulator that is
#      in the image), its env and nothing else (env -i), as its uid:gid, chrooted into the rootfs
#      -- in new mount, PID, network (loopback only), UTS and IPC namespaces, with /proc mounted
#      and /dev a tmpfs holding null, zero, full, random, urandom and tty, as a runtime sets up.
#      It listens on the image's own address, :9400, in its network namespace.
#   4. From that network namespace: /-/healthy answers 200, /-/ready 200 and /metrics has gpu_*
#      series. The image's health check command (Docker's config.Healthcheck, "CMD" form) runs
#      the same way (chroot, the image's user and env) and exits 0.
#   5. SIGTERM stops the agent (PID 1 of its namespace, as in a container): it exits 0 within 15
#      s, leaves its ledger state file in /var/lib/gpumeter, and the health check now fails.
# For an ARCH other than the host's, the agent runs under qemu-user: through binfmt_misc when
# qemu-ARCH is registered, else by qemu-ARCH-static copied into the rootfs and named first.
#
# What this does not prove (no container runtime can start containers on the build machine:
# crun's setrlimit is refused and the cgroups are hybrid): no seccomp profile, no capability
# set or no_new_privs, no cgroup limits, no user namespace or read-only root, no network but
# loopback (no port publishing, no DNS), no runtime-level health check (Docker's scheduler of
# Interval/Timeout/Retries is not exercised, only the command), no NVIDIA container toolkit (its
# mounts of libnvidia-ml.so.1 and /dev/nvidia* and its ldconfig), and no `docker load` or
# `podman load` of the archive. Those need a host with a working runtime (docs/packaging.md).
#
# Run as root. Exits non-zero with a line saying what failed; cleans up (its namespaces end with
# the agent, the temporary directory is removed) on any exit. IMAGE_RUN_KEEP=1 keeps the
# temporary directory.
#
# Usage: tests/release/image_run.sh OCI_ARCHIVE amd64|arm64
set -euo pipefail

if (($# != 2)); then
  echo "image_run.sh: expected 2 arguments, got $#" >&2
  sed -n 's/^# \(Usage:.*\)/\1/p' "$0" >&2
  exit 2
fi
archive=$1 arch=$2
case "$arch" in
  amd64) qemu="qemu-x86_64" ;;
  arm64) qemu="qemu-aarch64" ;;
  *) echo "image_run.sh: ARCH must be amd64 or arm64, not '$arch'" >&2; exit 2 ;;
esac
[[ -f "$archive" ]] || { echo "image_run.sh: no archive $archive" >&2; exit 2; }
((EUID == 0)) || { echo "image_run.sh: run as root (chroot, namespaces, mounts)" >&2; exit 2; }
for tool in skopeo umoci unshare nsenter chroot python3; do
  command -v "$tool" >/dev/null || { echo "image_run.sh: $tool is missing" >&2; exit 2; }
done
archive=$(cd "$(dirname "$archive")" && pwd)/$(basename "$archive")

tmp=$(mktemp -d /tmp/image_run.XXXXXX)
runner_pid="" agent_pid=""
cleanup() {
  local rc=$?
  if [[ -n "$runner_pid" ]] && kill -0 "$runner_pid" 2>/dev/null; then
    [[ -z "$agent_pid" ]] || kill -TERM "$agent_pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$runner_pid" 2>/dev/null || break; sleep 0.1; done
    [[ -z "$agent_pid" ]] || kill -KILL "$agent_pid" 2>/dev/null || true
    kill -KILL "$runner_pid" 2>/dev/null || true
    wait "$runner_pid" 2>/dev/null || true
  fi
  if [[ "${IMAGE_RUN_KEEP:-0}" == 1 ]]; then
    echo "image_run.sh: kept $tmp" >&2
  else
    rm -rf "$tmp"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() {
  echo "image_run.sh: FAIL: $*" >&2
  if [[ -s "$tmp/agent.log" ]]; then
    echo "image_run.sh: the agent's log (last 40 lines):" >&2
    tail -n 40 "$tmp/agent.log" >&2
  fi
  exit 1
}
step() { echo "== $*" >&2; }

# ---- 1. the archive, as skopeo reads it ---------------------------------------------------------
step "skopeo inspect oci-archive:$archive"
skopeo inspect "oci-archive:$archive" >"$tmp/inspect.json" 2>"$tmp/skopeo.err" ||
  fail "skopeo inspect oci-archive:$archive: $(cat "$tmp/skopeo.err")"
skopeo inspect --config --raw "oci-archive:$archive" >"$tmp/config.json" 2>"$tmp/skopeo.err" ||
  fail "skopeo inspect --config: $(cat "$tmp/skopeo.err")"
python3 - "$tmp/inspect.json" "$arch" <<'EOF' || fail "skopeo inspect: the image is not what image.sh makes"
import json, sys
inspect = json.load(open(sys.argv[1]))
print("Architecture: %s  Os: %s  Layers: %d" % (inspect["Architecture"], inspect["Os"], len(inspect["Layers"])))
print("Labels:")
for k, v in sorted((inspect.get("Labels") or {}).items()):
    print("  %s=%s" % (k, v))
if inspect["Architecture"] != sys.argv[2] or inspect["Os"] != "linux":
    sys.exit("image_run.sh: the image is %s/%s, not linux/%s" % (inspect["Os"], inspect["Architecture"], sys.argv[2]))
for label in ("title", "version", "created", "description"):
    if not (inspect.get("Labels") or {}).get("org.opencontainers.image." + label):
        sys.exit("image_run.sh: no label org.opencontainers.image." + label)
EOF
# The health check: Docker's config.Healthcheck, ["CMD", argv...].
mapfile -t health < <(python3 - "$tmp/config.json" <<'EOF'
import json, sys
hc = (json.load(open(sys.argv[1])).get("config") or {}).get("Healthcheck") or {}
test = hc.get("Test") or []
if test[:1] != ["CMD"] or len(test) < 2:
    sys.exit("image_run.sh: the image's Healthcheck is not a CMD one: %r" % (test,))
print("\n".join(test[1:]))
EOF
) || true
((${#health[@]} > 0)) || fail "the image config has no usable Healthcheck (config.Healthcheck.Test)"
echo "Healthcheck: ${health[*]}" >&2

# ---- 2. the runtime bundle ------------------------------------------------------------------------
step "skopeo copy to an OCI layout, umoci unpack"
skopeo copy --quiet "oci-archive:$archive" "oci:$tmp/layout:image" 2>"$tmp/skopeo.err" ||
  fail "skopeo copy: $(cat "$tmp/skopeo.err")"
umoci unpack --image "$tmp/layout:image" "$tmp/bundle" >/dev/null 2>"$tmp/umoci.err" ||
  fail "umoci unpack: $(cat "$tmp/umoci.err")"
rootfs=$tmp/bundle/rootfs
# config.json as shell words: uid, gid, cwd, then args and env (NUL-separated).
python3 - "$tmp/bundle/config.json" "$tmp" <<'EOF' || fail "the runtime spec (config.json) is not usable"
import json, sys
spec = json.load(open(sys.argv[1]))
p = spec["process"]
with open(sys.argv[2] + "/user", "w") as f:
    f.write("%d:%d\n%s\n" % (p["user"]["uid"], p["user"]["gid"], p.get("cwd") or "/"))
with open(sys.argv[2] + "/args", "wb") as f:
    f.write(b"".join(a.encode() + b"\0" for a in p["args"]))
with open(sys.argv[2] + "/env", "wb") as f:
    f.write(b"".join(e.encode() + b"\0" for e in p.get("env") or []))
print("user %s:%s  cwd %s\nargs %s\nenv %s" % (p["user"]["uid"], p["user"]["gid"], p.get("cwd"), p["args"], p.get("env")), file=sys.stderr)
EOF
{ IFS= read -r user; IFS= read -r cwd; } <"$tmp/user"
mapfile -d '' -t args <"$tmp/args"
mapfile -d '' -t env <"$tmp/env"
[[ "$cwd" == / ]] || fail "the image's working directory is $cwd: this test can run only in /"
[[ "$user" == 9400:9400 ]] || fail "the image runs as $user, not 9400:9400"
[[ "${args[0]}" == /usr/bin/gpumeter && "${args[1]:-}" == serve ]] || fail "the image runs '${args[*]}', not /usr/bin/gpumeter serve"
[[ -x "$rootfs${args[0]}" ]] || fail "no ${args[0]} in the image"
owner=$(stat -c %u:%g "$rootfs/var/lib/gpumeter") || fail "no /var/lib/gpumeter in the image"
[[ "$owner" == "$user" ]] || fail "/var/lib/gpumeter is owned by $owner, not by the image's user $user"
grep -q '^gpumeter:x:9400:9400:' "$rootfs/etc/passwd" || fail "no user gpumeter (9400) in /etc/passwd"
grep -q '^gpumeter:x:9400:' "$rootfs/etc/group" || fail "no group gpumeter (9400) in /etc/group"

# ---- 3. the agent, chrooted into the rootfs, in its own namespaces ---------------------------------
scenario=/usr/share/gpumeter/scenarios/h100-8x-three-teams.yaml
[[ -f "$rootfs$scenario" ]] || fail "no $scenario in the image"
prefix=()
host_arch=$(dpkg --print-architecture 2>/dev/null || uname -m)
if [[ "$arch" != "$host_arch" ]]; then
  if [[ "$(head -1 "/proc/sys/fs/binfmt_misc/$qemu" 2>/dev/null)" == enabled ]]; then
    echo "image_run.sh: $arch through binfmt_misc ($qemu)" >&2
    interp=$(sed -n 's/^interpreter //p' "/proc/sys/fs/binfmt_misc/$qemu")
    # Without the F flag the interpreter is opened inside the chroot.
    if ! grep -q '^flags:.*F' "/proc/sys/fs/binfmt_misc/$qemu" && [[ -n "$interp" ]]; then
      install -D -m 0755 "$interp" "$rootfs$interp"
    fi
  else
    command -v "$qemu-static" >/dev/null || fail "$arch on $host_arch needs $qemu-static or binfmt_misc"
    echo "image_run.sh: $arch under $qemu-static (binfmt_misc has no $qemu)" >&2
    install -D -m 0755 "$(command -v "$qemu-static")" "$rootfs/.image-run/$qemu-static"
    prefix=("/.image-run/$qemu-static")
  fi
fi
# Run "$@" chrooted into the rootfs as the image's user with the image's env. In a new mount
# namespace first: /dev as a runtime makes it.
cat >"$tmp/enter.sh" <<'EOF'
#!/bin/sh
set -e
rootfs=$1 user=$2; shift 2
mount -t tmpfs -o nosuid,noexec,mode=0755,size=64k tmpfs "$rootfs/dev"
for node in null zero full random urandom tty; do
  : >"$rootfs/dev/$node"
  mount --bind "/dev/$node" "$rootfs/dev/$node"
done
ln -s /proc/self/fd "$rootfs/dev/fd"
ln -s /proc/self/fd/0 "$rootfs/dev/stdin"
ln -s /proc/self/fd/1 "$rootfs/dev/stdout"
ln -s /proc/self/fd/2 "$rootfs/dev/stderr"
ip link set lo up
exec chroot --userspec="$user" "$rootfs" "$@"
EOF
chmod 0755 "$tmp/enter.sh"

step "run ${args[*]} --sim.scenario=$scenario, as $user, chrooted, in new namespaces"
# setsid: the agent's group is not this shell's, so a ^C here reaches it only through cleanup.
env -i "${env[@]}" setsid unshare --mount --pid --net --uts --ipc --fork --mount-proc="$rootfs/proc" \
  "$tmp/enter.sh" "$rootfs" "$user" "${prefix[@]}" "${args[@]}" --sim.scenario="$scenario" \
  >"$tmp/agent.log" 2>&1 </dev/null &
runner_pid=$!
# The agent: unshare's child (PID 1 of the new PID namespace).
for _ in $(seq 50); do
  agent_pid=$(awk '{print $1}' "/proc/$runner_pid/task/$runner_pid/children" 2>/dev/null) || true
  [[ -z "$agent_pid" ]] || break
  kill -0 "$runner_pid" 2>/dev/null || fail "the agent exited at once"
  sleep 0.1
done
[[ -n "$agent_pid" ]] || fail "no agent process under unshare ($runner_pid)"

# An HTTP GET from the agent's network namespace: prints the status (0: no answer) and writes
# the body to $tmp/body.
get() {
  nsenter --target "$agent_pid" --net python3 - "$1" "$tmp/body" <<'PY'
import sys, urllib.request, urllib.error
status, body = 0, b""
try:
    r = urllib.request.urlopen(sys.argv[1], timeout=5)
    status, body = r.status, r.read()
except urllib.error.HTTPError as e:
    status, body = e.code, e.read()
except Exception as e:
    body = str(e).encode()
open(sys.argv[2], "wb").write(body)
print(status)
PY
}
# The health check command, the way Docker runs it: in the container, as its user, its env.
healthcheck() {
  env -i "${env[@]}" timeout 10 nsenter --target "$agent_pid" --mount --net \
    chroot --userspec="$user" "$rootfs" "${prefix[@]}" "${health[@]}"
}

step "wait for http://127.0.0.1:9400/-/healthy (the image's own listen address)"
# Polls PATH every half second until it answers 200, for at most SECONDS, while the agent runs.
wait_200() {
  local path=$1 seconds=$2 status=0
  for _ in $(seq $((seconds * 2))); do
    kill -0 "$runner_pid" 2>/dev/null || fail "the agent exited before $path answered 200"
    status=$(get "http://127.0.0.1:9400$path")
    [[ "$status" != 200 ]] || break
    sleep 0.5
  done
  [[ "$status" == 200 ]] || fail "$path answered $status, not 200, within $seconds s: $(head -c 300 "$tmp/body")"
  echo "$path: 200" >&2
}
wait_200 /-/healthy 30
wait_200 /-/ready 20
status=$(get http://127.0.0.1:9400/metrics)
[[ "$status" == 200 ]] || fail "/metrics answered $status: $(head -c 300 "$tmp/body")"
series=$(grep -c '^gpu_' "$tmp/body" || true)
((series > 0)) || fail "/metrics has no gpu_* series"
gpus=$(grep -o '^gpu_[a-z_]*{[^}]*uuid="[^"]*"' "$tmp/body" | grep -o 'uuid="[^"]*"' | sort -u | wc -l)
echo "/metrics: $series gpu_* series, $gpus GPUs" >&2

step "the health check: ${health[*]}"
healthcheck >"$tmp/health.log" 2>&1 || fail "the health check exited $?: $(cat "$tmp/health.log")"
echo "health check: exit 0" >&2

# ---- 5. stop ---------------------------------------------------------------------------------------
step "SIGTERM"
kill -TERM "$agent_pid"
rc=""
for _ in $(seq 150); do
  if ! kill -0 "$runner_pid" 2>/dev/null; then
    rc=0; wait "$runner_pid" || rc=$?
    break
  fi
  sleep 0.1
done
[[ -n "$rc" ]] || fail "the agent did not stop within 15 s of SIGTERM"
runner_pid="" agent_pid=""
[[ "$rc" == 0 ]] || fail "the agent exited $rc after SIGTERM"
[[ -s "$rootfs/var/lib/gpumeter/ledger.json" ]] || fail "no ledger state file /var/lib/gpumeter/ledger.json after the stop"
[[ "$(stat -c %u:%g "$rootfs/var/lib/gpumeter/ledger.json")" == "$user" ]] || fail "the ledger state file is not the image user's"
echo "stopped: exit 0, /var/lib/gpumeter/ledger.json written" >&2
# With no agent the health check must fail (a check that cannot fail proves nothing). Its own
# network namespace is gone with the agent: a fresh one, loopback only.
# shellcheck disable=SC2016
if env -i "${env[@]}" timeout 10 unshare --net --mount sh -c 'r=$0 u=$1; shift
    ip link set lo up; mount -t tmpfs tmpfs "$r/dev"; : >"$r/dev/null"; mount --bind /dev/null "$r/dev/null"
    exec chroot --userspec="$u" "$r" "$@"' \
  "$rootfs" "$user" "${prefix[@]}" "${health[@]}" >/dev/null 2>&1; then
  fail "the health check passes with no agent running"
fi
echo "health check with no agent: fails, as it must" >&2
echo "image_run.sh: OK: $(basename "$archive") ($arch) runs as $user, serves /-/healthy, /-/ready and $series gpu_* series, passes its health check, stops on SIGTERM"
