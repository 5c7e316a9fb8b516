#!/usr/bin/env python3
"""Writes the seed corpora of corpus/<target>/ from the repository's own examples.

Run from anywhere; it rewrites only the seeds it names (seed-*), so inputs a campaign added
(and a person merged in) stay. The pod-resources seeds are protobuf bytes written by hand,
because Debian's python3 has no protobuf module in the test dependencies.
"""
import json
import pathlib
import re

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CORPUS = HERE / "corpus"


def put(target, name, data):
    folder = CORPUS / target
    folder.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    (folder / f"seed-{name}").write_bytes(data)


def yaml_blocks(markdown):
    return re.findall(r"```ya?ml\n(.*?)```", markdown, re.S)


# Config files: the shipped example and every YAML example of docs/configuration.md.
put("fuzz_config", "deploy-gpumeter.yaml", (ROOT / "deploy/config/gpumeter.yaml").read_text())
for i, block in enumerate(yaml_blocks((ROOT / "docs/configuration.md").read_text())):
    put("fuzz_config", f"docs-{i}.yaml", block)



def raw_strings(test_file):
    """The multi-line raw string literals of a unit test: the documents it feeds its parser."""
    return [b for b in re.findall(r'R"\((.*?)\)"', test_file.read_text(), re.S) if "\n" in b and ":" in b]


for i, block in enumerate(raw_strings(ROOT / "tests/unit/config/config_test.cpp")):
    put("fuzz_config", f"unit-{i}.yaml", block)
for i, block in enumerate(raw_strings(ROOT / "tests/unit/pricing/pricing_test.cpp")):
    put("fuzz_pricing", f"unit-{i}.yaml", block)
for i, block in enumerate(raw_strings(ROOT / "tests/unit/sim/scenario_parse_test.cpp")):
    put("fuzz_scenario", f"unit-{i}.yaml", block)

# Scenarios: the shipped ones and the integration tests'.
for f in sorted((ROOT / "deploy/scenarios").glob("*.yaml")):
    if f.stat().st_size <= 16384:
        put("fuzz_scenario", f"deploy-{f.name}", f.read_text())
for f in sorted((ROOT / "tests/integration/scenarios").rglob("*.yaml")):
    if f.stat().st_size <= 16384:
        put("fuzz_scenario", f"it-{f.relative_to(ROOT / 'tests/integration/scenarios')}".replace("/", "-"),
            f.read_text())

# Pricing files.
for f in sorted((ROOT / "deploy/pricing").glob("*.yaml")):
    put("fuzz_pricing", f"deploy-{f.name}", f.read_text())
for i, block in enumerate(yaml_blocks((ROOT / "docs/chargeback.md").read_text())):
    if "gpu_models" in block or "currency" in block:
        put("fuzz_pricing", f"docs-{i}.yaml", block)
for i, t in enumerate(["2026-07-01", "2026-07-01T00:00:00Z", "2026-07-01T02:00:00.250+02:00"]):
    put("fuzz_pricing", f"date-{i}", t)

# procfs: each fixture file, behind its selector byte (see fuzz_procfs.cpp), and the cgroups.
for d in sorted((ROOT / "tests/fixtures/procfs").iterdir()):
    if not d.is_dir():
        continue
    for pid in sorted((d / "proc").glob("[0-9]*")):
        for selector, file in ((0, "stat"), (1, "status"), (3, "environ")):
            if (pid / file).exists():
                put("fuzz_procfs", f"{d.name}-{file}", bytes([selector]) + (pid / file).read_bytes())
        if (pid / "cgroup").exists():
            put("fuzz_cgroup", d.name, (pid / "cgroup").read_bytes())
# Owner values: a selector byte (the project's source), then environment value, comm, cgroup
# text and mapping file, separated by 0x1e; valid and invalid UTF-8.
for selector, name, values in [
        (0, "env-not-utf8", [b"vision\xff\xfeserving", b"python", b"0::/user.slice/u.scope\n", b"4242\n"]),
        (1, "comm-not-utf8", [b"", b"nb\xfe", b"0::/kubepods/burstable/pod1/abc\n", b""]),
        (2, "cgroup-not-utf8", [b"", b"c", b"0::/system.slice/bad\xfe.scope\n", b""]),
        (3, "jobs-binary", [b"", b"c", b"0::/\n", b"\x9b\x01job\n77\n\xc3\x28\n"]),
        (4, "slurm", [b"48\xff213", b"c", b"0::/system.slice/slurmstepd.scope/job_48213/step_0\n", b""]),
        (0, "valid", ["\u00e9quipe-\u65e5\u672c".encode(), b"train", b"0::/user.slice\n", b"1\n2\n"])]:
    put("fuzz_owner_values", name, bytes([selector]) + b"\x1e".join(values))
put("fuzz_procfs", "proc-stat", b"\x02cpu  1 2 3 4\nintr 5\nctxt 6\nbtime 1767225600\nprocesses 7\n")
put("fuzz_cgroup", "v1-slurm-uid",
    "12:memory:/slurm/uid_1000/job_4242/step_0\n11:devices:/slurm/uid_1000/job_4242/step_batch\n"
    "1:name=systemd:/system.slice/slurmd.service\n0::/\n")

# HTTP request targets and headers, behind their selector bytes (see fuzz_http_headers.cpp).
for i, t in enumerate(["/metrics", "/metrics?debug=1", "/", "/%2e%2E/x?a=%20b", "/probe?target=a&b=c"]):
    put("fuzz_http_headers", f"target-{i}", b"\x00" + t.encode())
for i, a in enumerate(["application/openmetrics-text; version=1.0.0; charset=utf-8",
                       "application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
                       "text/plain;q=0.9, application/openmetrics-text;q=0.9", "*/*"]):
    put("fuzz_http_headers", f"accept-{i}", b"\x01" + a.encode())
for i, a in enumerate(["gzip", "gzip, deflate, br", "gzip;q=0, *;q=1", "x-gzip;q=0.5", "identity"]):
    put("fuzz_http_headers", f"encoding-{i}", b"\x02" + a.encode())

for i, d in enumerate(["0", "500ms", "1m30s", "2h", "1w", "1y", "1.25", "12.5GiB", "0x1F", "1h30m15s500ms"]):
    put("fuzz_duration", str(i), d)

# Web configs: the shapes of docs/security.md's and the tests' examples (paths need not exist).
bcrypt = "$2y$10$2b2cU8CPhOTaGrs1HRQuAueS7JTT5ZHsHSzYiFPm1leZck7Mc8T4W"
put("fuzz_web_config", "tls", "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
    "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n  min_version: TLS12\n"
    "  max_version: TLS13\n  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]\n"
    "  prefer_server_cipher_suites: true\n  curve_preferences: [X25519, CurveP256]\n")
put("fuzz_web_config", "auth", f"basic_auth_users:\n  prometheus: {bcrypt}\n"
    "http_server_config:\n  http2: false\n  headers:\n    X-Frame-Options: deny\n"
    "    Strict-Transport-Security: max-age=31536000\n")
put("fuzz_web_config", "empty", "")

# Query API answers: every JSON body the report's unit tests use, behind the selector byte.
api_test = (ROOT / "tests/unit/report/api_parse_test.cpp").read_text()
for i, body in enumerate(sorted(set(re.findall(r'R"\((\{.*?\})\)"', api_test)))):
    put("fuzz_prom_api", f"test-{i}", (b"\x01" if '"data":[' in body else b"\x00") + body.encode())
put("fuzz_prom_api", "series", b"\x01" + json.dumps(
    {"status": "success", "data": [{"__name__": "gpu_info", "gpu": "0", "model": "NVIDIA H100"}]}).encode())

# Remote read answers: a real Prometheus' frames (the report's unit test data), whole and cut
# in the middle.
remote = (ROOT / "tests/unit/report/testdata/remote-read-busy.bin").read_bytes()
put("fuzz_remote_read", "prometheus", b"\x80" + remote)
put("fuzz_remote_read", "prometheus-cut", b"\x00" + remote[: len(remote) // 2])

# Ledger state files: the shape UsageTracker::checkpoint() writes.
owner = {"project": "vision", "user": "alice", "namespace": "ml", "pod": "train-0", "container": "main",
         "hpc_job": ""}
ledger = {"mode": "samples", "cursor_us": 1767225600000000, "energy_counter_joules": 1234.5,
          "covered_seconds": 60.0, "busy_seconds": 30.5, "energy_joules": 9000.0, "gap_seconds": 0.0, "gaps": 0,
          "processes": [{"pid": 4242, "owner": owner, "memory_bytes": 1073741824.0}],
          "owners": [{"owner": owner, "allocated_seconds": 60.0, "busy_seconds": 30.5,
                      "memory_byte_seconds": 6.4e10, "energy_joules": 9000.0, "last_active_us": 1767225600000000}]}
state = {"format": "gpumeter-ledger-state", "version": 1, "saved_unix": 1767225600.5,
         "gpus": {"GPU-6f1c0e2a-0000-4000-8000-000000000001": {"index": 0, "model": "NVIDIA H100 80GB HBM3",
                                                               "ledger": ledger}}}
put("fuzz_ledger_state", "one-gpu.json", json.dumps(state, indent=1))
put("fuzz_ledger_state", "empty.json", '{"format":"gpumeter-ledger-state","version":1,"gpus":{}}')


# Pod-resources List replies in protobuf wire format.
def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number, payload):
    if isinstance(payload, str):
        payload = payload.encode()
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def devices(resource, ids):
    return field(1, resource) + b"".join(field(2, i) for i in ids)


def pod(name, namespace, containers):
    return field(1, name) + field(2, namespace) + b"".join(
        field(3, field(1, c) + b"".join(field(2, devices(r, ids)) for r, ids in devs)) for c, devs in containers)


uuid = "GPU-6f1c0e2a-0000-4000-8000-00000000000"
reply = field(1, pod("train-0", "ml", [("main", [("nvidia.com/gpu", [uuid + "1", uuid + "2"])])]))
reply += field(1, pod("infer-0", "serving", [("a", [("nvidia.com/gpu.shared", [uuid + "3::0", uuid + "3::1"])]),
                                              ("b", [("nvidia.com/mig-1g.10gb", ["MIG-1234"]),
                                                     ("example.com/nic", ["eth1"])])]))
put("fuzz_pod_resources", "two-pods.bin", reply)
put("fuzz_pod_resources", "index-ids.bin", field(1, pod("p", "default", [("c", [("nvidia.com/gpu", ["0", "1"])])])))
