"""The release's acceptance checks (docs/packaging.md, "Testing the release"), on the artifacts of
scripts/release.sh in GPUMETER_RELEASE_DIR (default: release/ in the sources):

- the amd64 bundle in a Debian 13 (trixie) root, which has glibc 2.41 and none of Debian 12's
  library sonames: `serve` on its simulator with owners from a `sim procfs` tree, /metrics that
  `promtool check metrics` accepts, `report` against a Prometheus outside the root, a clean ldd;
- the same bundle in a Debian 11 (bullseye) root, glibc 2.31: the launcher's one line, exit 1;
- the arm64 bundle in an arm64 trixie root, under qemu-user: `serve`, /metrics and `sim truth`;
- the .deb (lintian, dpkg --root into the trixie root) and the RPM (rpmlint, its requirements,
  rpm --root into a scratch root, where it runs);
- the OCI image, through tests/release/image_run.sh (no container runtime starts here).

Foreign roots are made by mmdebstrap (variant essential) from Debian's mirror, once: their
tarballs are kept in GPUMETER_CACHE_DIR (default ~/.cache/gpumeter/rootfs), outside the clone.
Each test unpacks its own copy and runs commands in it with `unshare --mount --pid --fork
--mount-proc chroot`, so nothing they start outlives the test. Run as root.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.normpath(os.path.join(HERE, "..", "integration")))
from harness import SOURCE_DIR, Process, Prometheus, free_port, http_get, parse_text, wait_until  # noqa: E402

RELEASE_DIR = os.environ.get("GPUMETER_RELEASE_DIR") or os.path.join(SOURCE_DIR, "release")
CACHE_DIR = os.environ.get("GPUMETER_CACHE_DIR") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "gpumeter")
MIRROR = os.environ.get("GPUMETER_DEBIAN_MIRROR", "http://deb.debian.org/debian")
SCENARIO = "/opt/gpumeter/share/gpumeter/scenarios/h100-8x-three-teams.yaml"
PROJECTS = {"nlp-pretraining", "vision-serving", "climate-downscaling", "vision-research"}
# Sonames of Debian 12's libraries that a build there could have linked; a foreign root has none.
DEBIAN12_SONAMES = ("libgrpc++.so.1.51", "libprotobuf.so.32", "libabsl_base.so.20220623", "libyaml-cpp.so.0.7",
                    "libfmt.so.9", "libre2.so.9", "libcpp-httplib.so.0.11")
CHROOT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def run(args, check=True, **kw):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    if check and p.returncode != 0:
        raise AssertionError("%s: exit %d\nstdout:\n%s\nstderr:\n%s" % (" ".join(args), p.returncode,
                                                                       p.stdout[-3000:], p.stderr[-3000:]))
    return p


def version():
    with open(os.path.join(SOURCE_DIR, "CMakeLists.txt")) as f:
        return re.search(r"project\(gpumeter VERSION ([0-9.]+)", f.read()).group(1)


def artifact(name):
    path = os.path.join(RELEASE_DIR, name)
    if not os.path.exists(path):
        raise AssertionError("%s is missing: run scripts/release.sh first" % path)
    return path


def root_tarball(suite, arch):
    """A Debian root file system (mmdebstrap, variant essential) as a tarball in the cache."""
    path = os.path.join(CACHE_DIR, "rootfs", "%s-%s-essential.tar" % (suite, arch))
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        partial = path[:-len(".tar")] + ".partial.tar"  # mmdebstrap: the extension names the format
        run(["mmdebstrap", "--quiet", "--variant=essential", "--architectures=" + arch, "--include=libc-bin",
             suite, partial, MIRROR])
        os.rename(partial, path)
    return path


def enable_binfmt(qemu_arch):
    """Registers qemu-user for `qemu_arch` binaries with the kernel, as binfmt-support does at boot
    on a machine where its service runs."""
    handler = "/proc/sys/fs/binfmt_misc/qemu-" + qemu_arch
    if os.path.exists(handler):
        return
    if not os.path.exists("/proc/sys/fs/binfmt_misc/register"):
        run(["mount", "-t", "binfmt_misc", "binfmt_misc", "/proc/sys/fs/binfmt_misc"])
    run(["update-binfmts", "--enable", "qemu-" + qemu_arch])
    if not os.path.exists(handler):
        raise AssertionError("%s is missing after update-binfmts --enable" % handler)


class Root:
    """A private copy of a foreign root file system, with the bundle unpacked in /opt/gpumeter."""

    def __init__(self, suite, arch, bundle=True):
        self.arch = arch
        if arch != "amd64":
            enable_binfmt({"arm64": "aarch64"}[arch])  # mmdebstrap runs the root's scripts under it too
        self.dir = tempfile.mkdtemp(prefix="gpumeter-root-%s-%s-" % (suite, arch))
        run(["tar", "-xf", root_tarball(suite, arch), "-C", self.dir])
        if arch != "amd64":
            # binfmt_misc runs foreign binaries with an interpreter at this path, looked up inside
            # the root (Debian's handler has no F flag).
            interp = self.path("/usr/libexec/qemu-binfmt/%s-binfmt-P" % {"arm64": "aarch64"}[arch])
            os.makedirs(os.path.dirname(interp), exist_ok=True)
            shutil.copy(shutil.which("qemu-%s-static" % {"arm64": "aarch64"}[arch]), interp)
        if bundle:
            os.makedirs(self.path("/opt/gpumeter"))
            run(["tar", "-xzf", artifact("gpumeter-%s-linux-%s.tar.gz" % (version(), arch)), "-C",
                 self.path("/opt/gpumeter"), "--strip-components=1"])

    def path(self, p):
        return os.path.join(self.dir, p.lstrip("/"))

    def command(self, args, env=None):
        """`args` run in the root, in its own mount and pid namespaces, with only `env` set."""
        variables = ["PATH=" + CHROOT_PATH] + ["%s=%s" % kv for kv in (env or {}).items()]
        return ["unshare", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc=" + self.path("/proc"),
                "chroot", self.dir, "/usr/bin/env", "-i"] + variables + list(args)

    def run(self, args, env=None, check=True):
        return run(self.command(args, env), check=check)

    def start(self, args, env=None, name="proc"):
        return Process(self.command(args, env), name=name)

    def remove(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def start_agent(test, root, extra=(), env=None):
    """`gpumeter serve` from the bundle on the simulator, on a free port; waits for /-/ready."""
    port = free_port()
    agent = root.start(["/opt/gpumeter/bin/gpumeter", "serve", "--sim.scenario", SCENARIO, "--web.listen-address",
                        "127.0.0.1:%d" % port, "--collect.interval", "1s", "--ledger.state-file", ""] + list(extra),
                       env=env, name="gpumeter")
    test.addCleanup(agent.stop)
    base = "http://127.0.0.1:%d" % port

    def ready():
        if not agent.alive():
            raise AssertionError("gpumeter exited:\n" + agent.log())
        return http_get(base + "/-/ready", timeout=5)[0] == 200
    wait_until(ready, 120, what="gpumeter /-/ready in the %s root" % root.arch)
    return agent, base


def metrics(base):
    status, _, body = http_get(base + "/metrics", timeout=30)
    if status != 200:
        raise AssertionError("GET /metrics: %d" % status)
    return body.decode()


def check_metrics(test, body):
    p = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True, text=True)
    test.assertEqual(p.returncode, 0, p.stdout + p.stderr)
    test.assertTrue(any(name.startswith("gpu_") for name, _ in parse_text(body)))


class RootTestCase(unittest.TestCase):
    """Tests that share one root of SUITE and ARCH, with the bundle in it."""
    SUITE = ARCH = None

    @classmethod
    def setUpClass(cls):
        cls.root = Root(cls.SUITE, cls.ARCH)
        cls.addClassCleanup(cls.root.remove)


class TrixieAmd64Test(RootTestCase):
    """The amd64 bundle on Debian 13: glibc 2.41, no Debian 12 library."""
    SUITE, ARCH = "trixie", "amd64"

    def test_the_root_is_foreign_and_ldd_finds_everything(self):
        self.assertEqual(self.root.run(["getconf", "GNU_LIBC_VERSION"]).stdout.strip(), "glibc 2.41")
        for soname in DEBIAN12_SONAMES:
            found = self.root.run(["sh", "-c", "ls /usr/lib/x86_64-linux-gnu/%s* 2>/dev/null || true" % soname])
            self.assertEqual(found.stdout, "", soname)
        for elf in ("/opt/gpumeter/libexec/gpumeter", "/opt/gpumeter/lib/gpumeter/libnvidia-ml.so.1"):
            out = self.root.run(["ldd", elf]).stdout
            self.assertNotIn("not found", out)
            libs = {line.split()[0] for line in out.splitlines() if line.strip()}
            self.assertTrue(libs <= {"linux-vdso.so.1", "libc.so.6", "libm.so.6", "/lib64/ld-linux-x86-64.so.2"},
                            out)

    def test_serve_attributes_owners_and_report_reads_them_back(self):
        # Scenario time 17 minutes at the start, for both: three teams' jobs are running then.
        env = {"GPUMETER_SIM_EPOCH": repr(time.time() - 17 * 60)}
        node = self.root.start(["/opt/gpumeter/bin/gpumeter", "sim", "procfs", "--scenario", SCENARIO, "--out",
                                "/tmp/node", "--follow"], env=env, name="sim-procfs")
        self.addCleanup(node.stop)
        wait_until(lambda: os.path.exists(self.root.path("/tmp/node/etc/passwd")), 60, what="sim procfs")
        with open(self.root.path("/tmp/gpumeter.yaml"), "w") as f:
            f.write("attribution:\n  environment: [GPUMETER_PROJECT]\n  kubelet:\n    socket: off\n"
                    "project:\n  default: unknown\n  rules:\n    - {source: env.GPUMETER_PROJECT}\n")
        started = int(time.time())
        _, base = start_agent(self, self.root, ["--path.procfs", "/tmp/node/proc", "--path.rootfs", "/tmp/node",
                                                "--config.file", "/tmp/gpumeter.yaml"], env)

        def owners():
            samples = parse_text(metrics(base))
            return {dict(labels).get("project") for name, labels in samples if name == "gpu_allocated_seconds_total"}
        wait_until(lambda: len(PROJECTS & owners()) >= 2, 120, what="two projects from the sim procfs tree")
        check_metrics(self, metrics(base))

        prom = Prometheus(targets=[base[len("http://"):]])
        self.addCleanup(prom.stop)

        def scraped():
            return {s["metric"].get("project") for s in prom.query("gpu_allocated_seconds_total")} & PROJECTS
        wait_until(lambda: len(scraped()) >= 2, 120, what="two projects scraped")
        time.sleep(3)  # a few more scrapes inside the period
        p = self.root.run(["/opt/gpumeter/bin/gpumeter", "report", "--url", prom.base, "--from", str(started),
                           "--to", "now", "--by", "project", "--format", "json"])
        doc = json.loads(p.stdout)
        projects = {row["key"]["project"] for row in doc["rows"] if row["allocated_seconds"] > 0}
        self.assertGreaterEqual(projects & PROJECTS, scraped(), doc["rows"])


class BullseyeAmd64Test(unittest.TestCase):
    """The amd64 bundle on Debian 11, glibc 2.31: below the floor."""

    def test_the_launcher_says_why_in_one_line(self):
        root = Root("bullseye", "amd64")
        self.addCleanup(root.remove)
        self.assertEqual(root.run(["getconf", "GNU_LIBC_VERSION"]).stdout.strip(), "glibc 2.31")
        p = root.run(["/opt/gpumeter/bin/gpumeter", "serve"], check=False)
        self.assertEqual(p.returncode, 1)
        self.assertEqual(p.stdout, "")
        lines = p.stderr.splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        for words in ("glibc 2.34 or newer", "glibc 2.31", "container image"):
            self.assertIn(words, lines[0])
        # Without the launcher the dynamic loader's own message names neither.
        raw = root.run(["/opt/gpumeter/libexec/gpumeter", "--version"], check=False)
        self.assertNotEqual(raw.returncode, 0)
        self.assertIn("GLIBC_2.3", raw.stderr)
        self.assertNotIn("container", raw.stderr)


class TrixieArm64Test(RootTestCase):
    """The arm64 bundle on an arm64 Debian 13 root, under qemu-user."""
    SUITE, ARCH = "trixie", "arm64"

    def test_it_is_arm64(self):
        out = run(["file", "-L", self.root.path("/opt/gpumeter/libexec/gpumeter")]).stdout
        self.assertIn("ARM aarch64", out)

    def test_serve_and_metrics(self):
        _, base = start_agent(self, self.root)
        check_metrics(self, metrics(base))

    def test_sim_truth(self):
        p = self.root.run(["/opt/gpumeter/bin/gpumeter", "sim", "truth", "--scenario", SCENARIO, "--from", "0",
                           "--to", "600", "--format", "json"])
        doc = json.loads(p.stdout)
        self.assertTrue(doc, p.stdout[:300])


class DebTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.deb = artifact("gpumeter_%s-1_amd64.deb" % version())

    def test_lintian_finds_no_error(self):
        p = run(["lintian", "--fail-on", "error", "--tag-display-limit", "0", self.deb], check=False)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertNotRegex(p.stdout, r"(?m)^E: ")

    def test_it_depends_on_glibc_alone(self):
        depends = run(["dpkg-deb", "--field", self.deb, "Depends"]).stdout.strip()
        self.assertEqual(depends, "libc6 (>= 2.34)")

    def test_dpkg_installs_it_into_trixie_and_it_runs(self):
        root = Root("trixie", "amd64", bundle=False)
        self.addCleanup(root.remove)
        run(["dpkg", "--root=" + root.dir, "--log=/dev/null", "--install", self.deb])
        status = run(["dpkg-query", "--admindir=" + root.path("/var/lib/dpkg"), "--show", "--showformat=${Status}",
                      "gpumeter"]).stdout
        self.assertEqual(status, "install ok installed")
        self.assertRegex(root.run(["gpumeter", "--version"]).stdout, r"^gpumeter %s " % re.escape(version()))
        self.assertTrue(os.path.isfile(root.path("/lib/systemd/system/gpumeter.service")))


class RpmTest(unittest.TestCase):
    ALLOWED = re.compile(r"^(rpmlib\(.*\)|rtld\(GNU_HASH\)|(libc|libm)\.so\.6(\(.*\))?(\(64bit\))?|"
                         r"ld-linux-(x86-64|aarch64)\.so\.[12](\(.*\))?(\(64bit\))?|systemd|shadow-utils|"
                         r"/usr/sbin/(useradd|groupadd)|config\(gpumeter\) = .*)( .*)?$")

    @classmethod
    def setUpClass(cls):
        cls.rpm = artifact("gpumeter-%s-1.x86_64.rpm" % version())

    def test_rpmlint_finds_no_error(self):
        # With the project's settings: EL9's conventions rather than openSUSE's, each with its
        # reason in the file.
        p = run(["rpmlint", "-c", os.path.join(SOURCE_DIR, "deploy", "rpm", "rpmlint.toml"), self.rpm], check=False)
        self.assertRegex(p.stdout, r"\b0 errors\b", p.stdout + p.stderr)

    def test_it_requires_only_glibc_systemd_and_shadow_utils(self):
        requires = run(["rpm", "-qp", "--requires", self.rpm]).stdout.split("\n")
        others = [r for r in requires if r and not self.ALLOWED.match(r)]
        self.assertEqual(others, [])
        self.assertIn("libc.so.6(GLIBC_2.34)(64bit)", requires)

    def test_its_payload_installs_into_a_scratch_root_and_runs(self):
        root = Root("trixie", "amd64", bundle=False)
        self.addCleanup(root.remove)
        run(["rpm", "--root", root.dir, "--initdb"])
        run(["rpm", "--root", root.dir, "--nodeps", "--noscripts", "--install", self.rpm])
        self.assertTrue(os.path.isfile(root.path("/usr/lib/systemd/system/gpumeter.service")))
        self.assertRegex(root.run(["/usr/bin/gpumeter", "--version"]).stdout, r"^gpumeter %s " % re.escape(version()))


class ImageTest(unittest.TestCase):
    def test_the_image_runs_as_its_config_says(self):
        image = artifact("gpumeter-%s-amd64.oci.tar" % version())
        p = run([os.path.join(HERE, "image_run.sh"), image, "amd64"], check=False)
        self.assertEqual(p.returncode, 0, p.stdout[-3000:] + p.stderr[-3000:])


if __name__ == "__main__":
    unittest.main()
