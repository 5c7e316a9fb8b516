"""The Debian package: built by CPack from this build tree, checked with dpkg-deb, installed with
dpkg into a private root (never into the system), and run from there.

The package is built with `cpack --config <build>/CPackConfig.cmake -B <temporary directory>`, so
it holds this tree's binaries (stripped) and the build tree gets nothing but CMake's install
manifest (install_manifest_gpumeter.txt); it is compressed with gzip rather than xz, for speed. dpkg installs it
with --root into a temporary directory whose status database holds only the packages named in
Depends, copied from the system's database: the install fails if a dependency is not installed
on this machine. Maintainer scripts run without chroot and see DPKG_ROOT, so they touch nothing
outside that directory.

Environment: GPUMETER_BIN, GPUMETER_SOURCE_DIR as for every integration test, and
GPUMETER_BUILD_DIR, the build tree (default: the directory above GPUMETER_BIN's bin/).
"""
import configparser
import gzip
import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
import unittest

import yaml

from harness import BIN, SOURCE_DIR, Process, free_port, http_get, parse_text, wait_until

BUILD_DIR = os.environ.get("GPUMETER_BUILD_DIR") or os.path.dirname(os.path.dirname(os.path.abspath(BIN)))
UNIT_SOURCE = os.path.join(SOURCE_DIR, "deploy", "systemd", "gpumeter.service")
MAN_SOURCE = os.path.join(SOURCE_DIR, "docs", "gpumeter.1")
SCENARIO = "h100-8x-three-teams.yaml"

CONFFILES = {"/etc/gpumeter/gpumeter.yaml", "/etc/gpumeter/pricing.yaml", "/etc/default/gpumeter"}
# Packaged file -> the source file it must be a copy of (byte for byte).
COPIES = {
    "etc/gpumeter/gpumeter.yaml": "deploy/config/gpumeter.yaml",
    "etc/gpumeter/pricing.yaml": "deploy/pricing/list-prices.yaml",
    "etc/default/gpumeter": "deploy/systemd/gpumeter.default",
    "lib/systemd/system/gpumeter.service": "deploy/systemd/gpumeter.service",
    "usr/share/doc/gpumeter/copyright": "deploy/debian/copyright",
    "usr/share/gpumeter/scenarios/" + SCENARIO: "deploy/scenarios/" + SCENARIO,
}


def run(args, check=True, **kw):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    if check and p.returncode != 0:
        raise AssertionError("%s: exit %d\nstdout:\n%s\nstderr:\n%s" % (" ".join(args), p.returncode, p.stdout,
                                                                       p.stderr))
    return p


def project_version():
    with open(os.path.join(SOURCE_DIR, "CMakeLists.txt")) as f:
        return re.search(r"project\(gpumeter VERSION ([0-9.]+)", f.read()).group(1)


def unit_settings(path):
    """The unit as {section: {key: [values, in order]}}, keys repeated as systemd allows."""
    parser = configparser.RawConfigParser(strict=False, delimiters=("=",), comment_prefixes=("#", ";"),
                                          interpolation=None, dict_type=_MultiDict)
    parser.optionxform = str
    parser.read(path)
    return {s: {k: v.split("\n") for k, v in parser.items(s)} for s in parser.sections()}


class _MultiDict(dict):
    """Lets configparser keep every value of a repeated key (joined by newlines)."""

    def __setitem__(self, key, value):
        if isinstance(value, list) and key in self:
            self[key].extend(value)
        else:
            super().__setitem__(key, value)


def depends_packages(depends):
    """'a (>= 1), b | c' -> {'a', 'b', 'c'}."""
    names = set()
    for alternative in re.split(r"[,|]", depends):
        alternative = alternative.strip()
        if alternative:
            names.add(re.match(r"[a-z0-9][a-z0-9.+-]*", alternative).group(0))
    return names


def status_stanzas(names):
    """The system dpkg database's stanzas of the installed packages in names."""
    with open("/var/lib/dpkg/status") as f:
        stanzas = f.read().split("\n\n")
    kept = []
    for s in stanzas:
        m = re.match(r"Package: (\S+)\n", s)
        if m and m.group(1) in names and "\nStatus: install ok installed\n" in s + "\n":
            kept.append(s.strip("\n"))
    return kept


class PrivateRoot:
    """A directory that dpkg --root installs into, with a status database holding `packages`."""

    def __init__(self, packages):
        self.dir = tempfile.mkdtemp(prefix="gpumeter-pkgroot-")
        self.admindir = os.path.join(self.dir, "var", "lib", "dpkg")
        for sub in ("info", "updates", "triggers"):
            os.makedirs(os.path.join(self.admindir, sub))
        os.makedirs(self.path("var/log"))
        stanzas = status_stanzas(packages)
        with open(os.path.join(self.admindir, "status"), "w") as f:
            f.write("\n\n".join(stanzas) + "\n\n" if stanzas else "")
        open(os.path.join(self.admindir, "available"), "w").close()
        for s in stanzas:
            name = re.match(r"Package: (\S+)\n", s).group(1)
            arch = re.search(r"\nArchitecture: (\S+)", s).group(1)
            multi_arch_same = "\nMulti-Arch: same" in s
            list_name = "%s:%s.list" % (name, arch) if multi_arch_same else name + ".list"
            open(os.path.join(self.admindir, "info", list_name), "w").close()

    def dpkg(self, *args, check=True):
        # dpkg logs to the host's /var/log/dpkg.log even with --root: keep the log in the root.
        # Host configuration may exclude man pages and docs (container images do); include them.
        return run(["dpkg", "--root=" + self.dir, "--log=" + self.path("var/log/dpkg.log"), "--force-not-root",
                    "--force-script-chrootless", "--path-include=/usr/share/man/*",
                    "--path-include=/usr/share/doc/*"] + list(args), check=check)

    def path(self, p):
        return os.path.join(self.dir, p.lstrip("/"))

    def status(self, package="gpumeter"):
        p = run(["dpkg-query", "--admindir=" + self.admindir, "--show", "--showformat=${Status}", package],
                check=False)
        return p.stdout if p.returncode == 0 else "not known"

    def remove(self):
        shutil.rmtree(self.dir, ignore_errors=True)


class PackageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # Class cleanups run even when setUpClass fails part way.
        cls.tmp = tempfile.mkdtemp(prefix="gpumeter-package-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)
        config = os.path.join(BUILD_DIR, "CPackConfig.cmake")
        if not os.path.isfile(config):
            raise AssertionError("no %s: configure the build tree (cmake/Packaging.cmake makes it)" % config)
        # gzip instead of the package's xz: the same package, made in a quarter of the time (the
        # sanitizer build's binary is over 100 MiB even stripped).
        run(["cpack", "-G", "DEB", "-D", "CPACK_DEBIAN_COMPRESSION_TYPE=gzip", "--config", config,
             "-B", os.path.join(cls.tmp, "out")])
        debs = [f for f in os.listdir(os.path.join(cls.tmp, "out")) if f.endswith(".deb")]
        if len(debs) != 1:
            raise AssertionError("cpack made %r, not one .deb" % debs)
        cls.deb = os.path.join(cls.tmp, "out", debs[0])
        cls.arch = run(["dpkg", "--print-architecture"]).stdout.strip()
        cls.fields = {}
        for name in ("Package", "Version", "Architecture", "Depends", "Maintainer", "Section", "Description"):
            cls.fields[name] = run(["dpkg-deb", "--field", cls.deb, name]).stdout.strip()
        cls.root = PrivateRoot(depends_packages(cls.fields["Depends"]))
        cls.addClassCleanup(cls.root.remove)
        cls.install = cls.root.dpkg("--install", cls.deb)

    # --- the unit ------------------------------------------------------------------------------

    def verify_unit(self, unit_text, binary, man_dir):
        """systemd-analyze verify on a copy of the unit whose ExecStart runs `binary`."""
        d = tempfile.mkdtemp(prefix="unit-", dir=self.tmp)
        path = os.path.join(d, "gpumeter.service")
        with open(path, "w") as f:
            f.write(unit_text.replace("ExecStart=/usr/bin/gpumeter ", "ExecStart=%s " % binary))
        # Documentation=man:gpumeter(1) is looked up with man(1), so point MANPATH at the page.
        env = dict(os.environ, MANPATH=man_dir)
        return run(["systemd-analyze", "verify", path], check=False, env=env, cwd=d), path

    def test_unit_passes_systemd_analyze_verify(self):
        man_dir = os.path.join(self.tmp, "man")
        os.makedirs(os.path.join(man_dir, "man1"), exist_ok=True)
        shutil.copy(MAN_SOURCE, os.path.join(man_dir, "man1", "gpumeter.1"))
        with open(UNIT_SOURCE) as f:
            unit = f.read()
        self.assertIn("ExecStart=/usr/bin/gpumeter serve ", unit)
        p, path = self.verify_unit(unit, os.path.abspath(BIN), man_dir)
        self.assertEqual((p.returncode, p.stderr, p.stdout), (0, "", ""))
        # The same check fails where it should: an ExecStart binary that does not exist.
        bad, _ = self.verify_unit(unit, os.path.join(self.tmp, "no-such-binary"), man_dir)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("no-such-binary", bad.stderr)

        # systemd's own exposure score (0 safest, 10 unprotected) stays at 3.0 or below.
        sec = run(["systemd-analyze", "security", "--offline=yes", "--threshold=30", path], check=False)
        self.assertEqual(sec.returncode, 0, sec.stdout[-2000:] + sec.stderr)
        score = re.search(r"Overall exposure level for gpumeter.service: ([0-9.]+)", sec.stdout)
        self.assertIsNotNone(score, sec.stdout[-500:])
        self.assertLessEqual(float(score.group(1)), 3.0)

    def test_unit_hardening_keeps_what_the_agent_needs(self):
        s = unit_settings(UNIT_SOURCE)["Service"]
        one = lambda key: s[key][-1]  # noqa: E731 (systemd: the last assignment wins)
        self.assertEqual(one("ExecStart").split()[:3],
                         ["/usr/bin/gpumeter", "serve", "--config.file=/etc/gpumeter/gpumeter.yaml"])
        self.assertEqual(one("ExecStart").split()[-1], "$GPUMETER_ARGS")
        self.assertEqual(one("EnvironmentFile"), "-/etc/default/gpumeter")
        # The ledger's default state file, /var/lib/gpumeter/ledger.json, must be writable.
        self.assertEqual(one("StateDirectory"), "gpumeter")
        help_text = run([BIN, "serve", "--help"]).stdout
        self.assertRegex(help_text, r"--ledger.state-file TEXT=/var/lib/gpumeter/ledger.json")
        for key, value in {"DynamicUser": "yes", "ProtectSystem": "strict", "ProtectHome": "yes",
                           "PrivateTmp": "yes", "NoNewPrivileges": "yes", "DevicePolicy": "closed",
                           # Other users' /proc/<pid> and NVML's /proc/driver/nvidia stay visible.
                           "ProtectProc": "default", "ProcSubset": "all",
                           # The real /dev, so that /dev/nvidia* exist.
                           "PrivateDevices": "no"}.items():
            self.assertEqual(one(key), value, key)
        self.assertIn("char-nvidia* rw", s["DeviceAllow"])
        caps = {"CAP_DAC_READ_SEARCH", "CAP_SYS_PTRACE", "CAP_SYS_ADMIN"}
        self.assertEqual(set(one("CapabilityBoundingSet").split()), caps)
        self.assertEqual(set(one("AmbientCapabilities").split()), caps)
        self.assertEqual(set(one("RestrictAddressFamilies").split()), {"AF_INET", "AF_INET6", "AF_UNIX"})
        self.assertIn("@system-service", s["SystemCallFilter"])
        self.assertRegex(one("MemoryMax"), r"^[0-9]+M$")
        self.assertEqual(unit_settings(UNIT_SOURCE)["Install"]["WantedBy"], ["multi-user.target"])

    # --- the package file ----------------------------------------------------------------------

    def test_package_fields_and_dependencies(self):
        f = self.fields
        self.assertEqual(f["Package"], "gpumeter")
        self.assertEqual(f["Version"], project_version() + "-1")
        self.assertEqual(f["Architecture"], self.arch)
        self.assertEqual(f["Section"], "admin")
        self.assertRegex(f["Maintainer"], r"^[^<>]+ <[^<>@]+@[^<>]+\.[^<>.]+>$")
        self.assertNotIn("@localhost", f["Maintainer"])
        self.assertIn("/usr/lib/gpumeter", f["Description"])
        self.assertIn("simulator", f["Description"])
        for line in f["Description"].splitlines():
            self.assertLessEqual(len(line), 80, line)
        # NVML is loaded with dlopen at run time: no package may be needed for it.
        self.assertNotIn("nvidia", f["Depends"])

        # dpkg-shlibdeps: every library the two ELF files link is in a package named in Depends.
        depends = depends_packages(f["Depends"])
        extract = os.path.join(self.tmp, "extract")
        run(["dpkg-deb", "--extract", self.deb, extract])
        needed = set()
        for elf in ("usr/bin/gpumeter", "usr/lib/gpumeter/libnvidia-ml.so.1"):
            dynamic = run(["objdump", "-p", os.path.join(extract, elf)]).stdout
            needed |= set(re.findall(r"^\s+NEEDED\s+(\S+)$", dynamic, re.M))
        self.assertIn("libc.so.6", needed)
        # Where the dynamic linker finds each of them for the installed binary and library.
        resolved = {}
        for elf in ("usr/bin/gpumeter", "usr/lib/gpumeter/libnvidia-ml.so.1"):
            for line in run(["ldd", os.path.join(extract, elf)]).stdout.splitlines():
                m = re.match(r"^\s+(\S+) => (/\S+) \(", line)
                if m:
                    resolved[m.group(1)] = m.group(2)
                m = re.match(r"^\s+(/\S+) \(", line)  # the dynamic linker itself
                if m:
                    resolved[os.path.basename(m.group(1))] = m.group(1)
        paths = {}
        for soname in needed:
            self.assertIn(soname, resolved, "the dynamic linker does not find %s" % soname)
            real = os.path.realpath(resolved[soname])
            paths[soname] = {resolved[soname], real, re.sub(r"^/usr/", "/", real), "/usr" + real}
        owners = run(["dpkg-query", "--search"] + sorted(set().union(*paths.values())), check=False).stdout
        for soname, candidates in paths.items():
            pkgs = {line.split(":")[0] for line in owners.splitlines()
                    if line.split(": ", 1)[-1] in candidates}
            self.assertTrue(pkgs, "no package owns %s (%s)" % (soname, candidates))
            self.assertTrue(pkgs & depends, "%s comes from %s, which Depends (%s) does not name"
                            % (soname, pkgs, f["Depends"]))

    def test_package_contents(self):
        listing = run(["dpkg-deb", "--contents", self.deb]).stdout
        files = {}
        for line in listing.splitlines():
            mode, owner, _size, _date, _time, name = line.split(None, 5)
            self.assertEqual(owner, "root/root", line)
            if not mode.startswith("d"):
                files[name[2:] if name.startswith("./") else name] = mode
        for path, mode in {"usr/bin/gpumeter": "-rwxr-xr-x",
                           "usr/bin/gpumeter-sim": "-rwxr-xr-x",
                           "usr/lib/gpumeter/libnvidia-ml.so.1": "-rw-r--r--",
                           "usr/share/man/man1/gpumeter.1.gz": "-rw-r--r--",
                           "usr/share/man/man1/gpumeter-sim.1.gz": "-rw-r--r--",
                           "lib/systemd/system/gpumeter.service": "-rw-r--r--",
                           "etc/gpumeter/gpumeter.yaml": "-rw-r--r--",
                           "etc/gpumeter/pricing.yaml": "-rw-r--r--",
                           "etc/default/gpumeter": "-rw-r--r--",
                           "usr/share/doc/gpumeter/copyright": "-rw-r--r--",
                           "usr/share/doc/gpumeter/changelog.Debian.gz": "-rw-r--r--",
                           "usr/share/lintian/overrides/gpumeter": "-rw-r--r--",
                           "usr/share/gpumeter/prometheus/gpumeter-alerts.yml": "-rw-r--r--",
                           "usr/share/gpumeter/prometheus/prometheus.yml": "-rw-r--r--",
                           "usr/share/gpumeter/scenarios/" + SCENARIO: "-rw-r--r--"}.items():
            self.assertEqual(files.get(path), mode, path)
        # Every Prometheus file and every Alertmanager and Grafana file of the sources is shipped.
        deploy = os.path.join(SOURCE_DIR, "deploy")
        for name in os.listdir(os.path.join(deploy, "prometheus")):
            if name.endswith(".yml"):
                self.assertIn("usr/share/gpumeter/prometheus/" + name, files)
        for sub in ("alertmanager", "grafana"):
            for dirpath, _dirs, names in os.walk(os.path.join(deploy, sub)):
                for name in names:
                    rel = os.path.relpath(os.path.join(dirpath, name), deploy)
                    self.assertIn("usr/share/gpumeter/" + rel, files)
        # Nothing else: no development link that would let -lnvidia-ml find the simulator, no
        # promtool test files, nothing under /usr/local or outside the package's places.
        self.assertNotIn("usr/lib/gpumeter/libnvidia-ml.so", files)
        for name in files:
            self.assertRegex(name, r"^(usr/bin/gpumeter|usr/lib/gpumeter/|usr/share/(man/man1|doc/gpumeter|gpumeter)/"
                                   r"|usr/share/lintian/overrides/gpumeter$"
                                   r"|etc/gpumeter/|etc/default/gpumeter$|lib/systemd/system/gpumeter.service$)")
            self.assertNotIn("/tests/", name)

        control = os.path.join(self.tmp, "control")
        run(["dpkg-deb", "--control", self.deb, control])
        with open(os.path.join(control, "conffiles")) as f:
            self.assertEqual(set(f.read().split()), CONFFILES)
        for script in ("postinst", "prerm", "postrm"):
            mode = os.stat(os.path.join(control, script)).st_mode
            self.assertTrue(mode & stat.S_IXUSR, script)
            with open(os.path.join(control, script)) as f:
                text = "".join(line for line in f if not line.lstrip().startswith("#"))
            # Installing never enables or starts the agent.
            self.assertNotRegex(text, r"systemctl\s+(\S+\s+)*(enable|start|restart|try-restart)\b", script)
            # With dpkg --root they act inside that root only (scripts run there without chroot).
            self.assertIn("DPKG_ROOT", text, script)
            run(["sh", "-n", os.path.join(control, script)])

    def test_changelog_names_this_version(self):
        extract = os.path.join(self.tmp, "extract-changelog")
        run(["dpkg-deb", "--extract", self.deb, extract])
        with gzip.open(os.path.join(extract, "usr/share/doc/gpumeter/changelog.Debian.gz"), "rt") as f:
            text = f.read()
        with open(os.path.join(SOURCE_DIR, "deploy", "debian", "changelog")) as f:
            self.assertEqual(text, f.read())
        self.assertTrue(text.startswith("gpumeter (%s) " % self.fields["Version"]), text.splitlines()[0])
        # dpkg-parsechangelog reads it as Debian's tools do.
        parsed = run(["dpkg-parsechangelog", "-l", os.path.join(SOURCE_DIR, "deploy", "debian", "changelog"),
                      "-S", "Version"]).stdout.strip()
        self.assertEqual(parsed, self.fields["Version"])

    def test_lintian_finds_no_error_and_no_warning(self):
        # Debian's own package checker. Tags that cannot apply to a package built outside the
        # archive are overridden in the package (usr/share/lintian/overrides/gpumeter), each with
        # its reason; anything else it reports fails the test.
        r = run(["lintian", "--fail-on", "error,warning", "--tag-display-limit", "0", self.deb], check=False)
        print("lintian:\n" + r.stdout + r.stderr)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual([line for line in r.stdout.splitlines() if re.match(r"^[EW]: ", line)], [])
        shown = run(["lintian", "--tag-display-limit", "0", "--show-overrides", self.deb], check=False).stdout
        # The self-check kit's Python programs, which need python3 only when the check runs.
        kit = ("O: gpumeter: python3-script-but-no-python3-dep /usr/bin/python3 (does not satisfy python3:any | "
               "python3-minimal:any) [usr/share/gpumeter/gpu-check/%s]")
        self.assertEqual(sorted(line for line in shown.splitlines() if line.startswith("O: ")),
                         sorted(["O: gpumeter: initial-upload-closes-no-bugs [usr/share/doc/gpumeter/changelog.Debian.gz:1]",
                                 kit % "peer_exporter.py", kit % "gpu_check/sim-nvidia-smi"]))

    # --- installed -----------------------------------------------------------------------------

    def test_installed_with_dpkg(self):
        self.assertEqual(self.root.status(), "install ok installed")
        self.assertEqual(self.install.stderr, "")
        for rel, source in COPIES.items():
            with open(self.root.path(rel), "rb") as got, open(os.path.join(SOURCE_DIR, source), "rb") as want:
                self.assertEqual(got.read(), want.read(), rel)
        self.assertTrue(os.access(self.root.path("usr/bin/gpumeter"), os.X_OK))
        version = run([self.root.path("usr/bin/gpumeter"), "--version"]).stdout.strip()
        self.assertEqual(version, run([BIN, "--version"]).stdout.strip())
        self.assertRegex(version, r"^gpumeter %s " % re.escape(project_version()))

    def test_installed_agent_serves_metrics_on_installed_simulator(self):
        """The unit's command line, with /etc/default/gpumeter's GPUMETER_ARGS, run from the root."""
        root = self.root
        unit = unit_settings(root.path("lib/systemd/system/gpumeter.service"))["Service"]
        defaults = {}
        with open(root.path("etc/default/gpumeter")) as f:
            for line in f:
                m = re.match(r'^([A-Z_]+)="?([^"]*)"?$', line.strip())
                if m:
                    defaults[m.group(1)] = m.group(2)
        self.assertIn("GPUMETER_ARGS", defaults)
        args = []
        for word in unit["ExecStart"][-1].split():
            if word == "$GPUMETER_ARGS":
                args += defaults["GPUMETER_ARGS"].split()
            else:
                args.append(re.sub(r"^(--[a-z.]+=)?/(usr|etc)/", lambda m: (m.group(1) or "") + root.dir + "/"
                                   + m.group(2) + "/", word))
        self.assertEqual(args[0], root.path("usr/bin/gpumeter"))
        self.assertIn("--config.file=" + root.path("etc/gpumeter/gpumeter.yaml"), args)

        work = tempfile.mkdtemp(prefix="serve-", dir=self.tmp)
        empty = os.path.join(work, "empty")
        os.makedirs(empty)
        state = os.path.join(work, "state", "ledger.json")
        os.makedirs(os.path.dirname(state))
        scenario = root.path("usr/share/gpumeter/scenarios/" + SCENARIO)
        port = free_port()
        args += ["--web.listen-address=127.0.0.1:%d" % port, "--sim.scenario=" + scenario,
                 "--ledger.state-file=" + state, "--path.procfs=" + empty, "--path.rootfs=" + empty]
        agent = Process(args, workdir=work, name="installed-gpumeter")
        try:
            base = "http://127.0.0.1:%d" % port

            def ready():
                if not agent.alive():
                    raise AssertionError("installed gpumeter exited early:\n" + agent.log())
                return http_get(base + "/-/ready", timeout=2)[0] == 200
            wait_until(ready, timeout=60, what="installed gpumeter /-/ready")
            status, _headers, body = http_get(base + "/metrics")
            self.assertEqual(status, 200)
            samples = parse_text(body.decode())
            with open(scenario) as f:
                gpus = yaml.safe_load(f)["gpus"]["count"]
            info = [k for k in samples if k[0] == "gpu_info"]
            self.assertEqual(len(info), gpus)
            up = [v for k, v in samples.items() if k[0] == "gpu_up"]
            self.assertEqual(up, [1.0] * gpus)
            self.assertEqual(samples[("gpumeter_backend_up", frozenset({("backend", "nvml")}))], 1.0)
            # It ran on the installed simulator, found beside the installed binary.
            self.assertIn(root.path("usr/lib/gpumeter/libnvidia-ml.so.1"), agent.log())
        finally:
            rc = agent.stop()
        self.assertEqual(rc, 0, agent.log())
        with open(state) as f:
            json.load(f)  # the ledger's last checkpoint at shutdown

    def test_installed_man_page(self):
        page = self.root.path("usr/share/man/man1/gpumeter.1.gz")
        with gzip.open(page, "rb") as got, open(MAN_SOURCE, "rb") as want:
            self.assertEqual(got.read(), want.read())
        env = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8", MAN_KEEP_FORMATTING="", MANPAGER="cat",
                   PAGER="cat")
        p = run(["man", "--warnings", "-l", page], env=env)
        self.assertEqual(p.stderr, "")
        text = p.stdout
        for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS", "ENVIRONMENT", "EXIT STATUS", "FILES",
                        "SEE ALSO"):
            self.assertRegex(text, r"(?m)^%s$" % section)
        self.assertTrue(all(len(line) <= 80 for line in text.splitlines()),
                        [line for line in text.splitlines() if len(line) > 80])
        self.assertRegex(text, r"gpumeter %s\s" % re.escape(project_version()))

        # Its flags and defaults are checked against --help by test_cli on the same source.

    def test_conffiles_survive_reinstall_and_purge_removes_everything(self):
        root = PrivateRoot(depends_packages(self.fields["Depends"]))
        try:
            root.dpkg("--install", self.deb)
            config = root.path("etc/gpumeter/gpumeter.yaml")
            with open(config, "a") as f:
                f.write("# changed by the administrator\n")
            p = root.dpkg("--install", self.deb)  # same version again: a changed conffile is kept
            self.assertEqual(p.stderr, "")
            with open(config) as f:
                self.assertTrue(f.read().endswith("# changed by the administrator\n"))

            # What the running service would have left: its state directory (DynamicUser=yes).
            state_dir = root.path("var/lib/private/gpumeter")
            os.makedirs(state_dir)
            with open(os.path.join(state_dir, "ledger.json"), "w") as f:
                f.write("{}\n")
            os.symlink("private/gpumeter", root.path("var/lib/gpumeter"))

            root.dpkg("--remove", "gpumeter")
            self.assertEqual(root.status(), "deinstall ok config-files")
            self.assertFalse(os.path.exists(root.path("usr/bin/gpumeter")))
            self.assertFalse(os.path.exists(root.path("lib/systemd/system/gpumeter.service")))
            for conffile in CONFFILES:  # removal keeps configuration
                self.assertTrue(os.path.exists(root.path(conffile)), conffile)
            self.assertTrue(os.path.exists(os.path.join(state_dir, "ledger.json")))

            root.dpkg("--purge", "gpumeter")
            self.assertEqual(root.status(), "not known")
            for conffile in CONFFILES:
                self.assertFalse(os.path.exists(root.path(conffile)), conffile)
            self.assertFalse(os.path.lexists(root.path("var/lib/gpumeter")))
            self.assertFalse(os.path.exists(state_dir))
        finally:
            root.remove()


if __name__ == "__main__":
    unittest.main()
