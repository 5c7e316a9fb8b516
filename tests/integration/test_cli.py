"""The command line: help that explains itself, clear errors and non-zero exits on bad input."""
import os
import subprocess
import tempfile
import unittest

from harness import BIN, DEPLOY_SCENARIOS


def run(*args):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=30)


class Cli(unittest.TestCase):
    def test_help_lists_commands_and_flags(self):
        r = run("--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("serve", r.stdout)
        self.assertIn("sim", r.stdout)
        r = run("serve", "--help")
        self.assertEqual(r.returncode, 0)
        for flag in ["--web.listen-address", "--web.telemetry-path", "--web.config.file", "--log.level",
                     "--log.format", "--path.procfs", "--path.sysfs", "--nvml.library", "--collect.interval"]:
            self.assertIn(flag, r.stdout)
        self.assertIn(":9400", r.stdout)
        # The range serve enforces (test_bad_flags_fail_with_a_reason) is the one it states.
        self.assertRegex(r.stdout, r"--collect\.interval [^\n]*(\n {10,}[^\n]*)*\(100ms to 1h\)")

    def test_usage_lines_name_the_program_and_command(self):
        for command in ([], ["serve"], ["sim"], ["sim", "check"], ["report"]):
            r = run(*command, "--help")
            self.assertEqual(r.returncode, 0, command)
            self.assertRegex(r.stdout, r"(?m)^Usage: %s \[OPTIONS\]" % " ".join(["gpumeter"] + command))

    def test_version(self):
        r = run("--version")
        self.assertEqual(r.returncode, 0)
        self.assertRegex(r.stdout, r"gpumeter \d+\.\d+\.\d+")

    def test_no_command_is_an_error(self):
        for args in ([], ["sim"], ["slurm"]):
            r = run(*args)
            self.assertEqual(r.returncode, 2, args)
            self.assertIn("required", r.stderr, args)

    def test_unknown_command_is_named(self):
        for args, known in ((["bogus"], "serve, snapshot, report, rules, burn, slurm, sim"),
                            (["sim", "bogus"], "truth, check, procfs, sysfs, kubelet, reset"),
                            (["slurm", "bogus"], "epilog")):
            r = run(*args)
            self.assertEqual(r.returncode, 2, args)
            prefix = " ".join(["gpumeter"] + args[:-1])
            self.assertIn("%s: unknown command 'bogus' (one of %s)" % (prefix, known), r.stderr)

    def test_every_parser_error_exits_2(self):
        # The man page's EXIT STATUS: no CLI11 code (105, 106, 109) reaches the caller.
        for args in (["serve", "--bogus"], ["serve", "extra"], ["serve", "--web.max-requests=0"],
                     ["serve", "--log.level=trace"], ["serve", "--compat=bogus"],
                     ["serve", "--collector.device", "--no-collector.device"], ["sim", "check", "--bogus"],
                     ["snapshot", "--format=xml"], ["report", "--bogus"], ["rules", "--bogus"]):
            r = run(*args)
            self.assertEqual(r.returncode, 2, (args, r.stderr))

    def test_bad_flags_fail_with_a_reason(self):
        cases = [
            (["serve", "--collect.interval", "fast"], "invalid duration"),
            (["serve", "--collect.interval", "10ms"], "between 100ms and 1h"),
            (["serve", "--collect.interval", "1.5s"], "no fractions"),
            (["serve", "--config.reload-interval", "30s1m"], "from the largest to the smallest"),
            (["serve", "--log.level", "loud"], "--log.level"),
            (["serve", "--log.format", "xml"], "--log.format"),
            (["serve", "--sim.scenario", "/nonexistent.yaml"], "/nonexistent.yaml"),
            (["serve", "--web.telemetry-path", "metrics"], "--web.telemetry-path"),
            (["serve", "--no-such-flag"], "--no-such-flag"),
        ]
        for args, needle in cases:
            r = run(*args)
            self.assertEqual(r.returncode, 2, args)  # what the man page promises for any bad flag
            self.assertIn(needle, r.stdout + r.stderr, args)

    def test_missing_config_file_and_invalid_scenario_exit_2(self):
        r = run("serve", "--config.file", "/nonexistent/gpumeter.yaml")
        self.assertEqual(r.returncode, 2)
        self.assertIn("/nonexistent/gpumeter.yaml", r.stdout + r.stderr)
        with tempfile.TemporaryDirectory() as d:
            bad = os.path.join(d, "bad.yaml")
            with open(bad, "w") as f:
                f.write("models: {h100: 1\n")
            for args in (["serve", "--web.listen-address", "127.0.0.1:0"], ["snapshot"]):
                r = run(*args, "--sim.scenario", bad)
                self.assertEqual(r.returncode, 2, args)
                self.assertIn(bad + ":2:1:", r.stdout + r.stderr, args)

    def test_equals_form_takes_an_empty_value(self):
        # `--ledger.state-file=""` as the man page writes it: the shell leaves `--ledger.state-file=`.
        scenario = os.path.join(DEPLOY_SCENARIOS, "faults-demo.yaml")
        r = run("snapshot", "--sim.scenario=" + scenario, "--ledger.state-file=", "--interval=200ms")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("required", r.stderr)

    def test_every_config_example_in_the_docs_loads_on_its_own(self):
        # A reader copies an example whole; each ```yaml block of docs/configuration.md must be a
        # config file the agent accepts, with nothing from elsewhere on the page.
        from harness import SOURCE_DIR
        import re
        with open(os.path.join(SOURCE_DIR, "docs", "configuration.md")) as f:
            blocks = re.findall(r"```yaml\n(.*?)```", f.read(), re.S)
        self.assertGreaterEqual(len(blocks), 1)
        scenario = os.path.join(DEPLOY_SCENARIOS, "faults-demo.yaml")
        with tempfile.TemporaryDirectory() as d:
            for i, block in enumerate(blocks):
                path = os.path.join(d, "example-%d.yaml" % i)
                with open(path, "w") as f:
                    f.write(block)
                r = run("snapshot", "--sim.scenario", scenario, "--config.file", path, "--ledger.state-file", "",
                        "--interval", "200ms")
                self.assertEqual(r.returncode, 0, "example %d:\n%s\n%s" % (i, block, r.stderr))

    def test_man_page_documents_every_command_flag_and_default(self):
        # Every command and every flag the binary documents in --help is in the page, in that
        # command's part, with its default, so the two cannot drift apart.
        import re
        from harness import SOURCE_DIR
        page = os.path.join(SOURCE_DIR, "docs", "gpumeter.1")
        env = dict(os.environ, MANWIDTH="200", LC_ALL="C.UTF-8", MAN_KEEP_FORMATTING="", MANPAGER="cat",
                   PAGER="cat")
        p = subprocess.run(["man", "--warnings", "-l", page], capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(p.stderr, "")
        text = p.stdout
        commands = [["serve"], ["snapshot"], ["report"], ["rules"], ["burn"], ["sim", "truth"], ["sim", "check"],
                    ["sim", "procfs"], ["sim", "sysfs"], ["sim", "kubelet"], ["sim", "reset"], ["slurm", "epilog"]]
        listed = re.findall(r"^  ([a-z]+) {2,}", run("--help").stdout.split("Subcommands:")[1], re.M)
        self.assertEqual(sorted(listed), sorted({c[0] for c in commands}))
        listed = re.findall(r"^  ([a-z]+) {2,}", run("sim", "--help").stdout.split("Subcommands:")[1], re.M)
        self.assertEqual(sorted(listed), sorted(c[1] for c in commands if c[0] == "sim"))
        # Each command's flags are in its own part of the page: its subsection, or for a sim
        # command, its paragraph in the sim subsection.
        parts = dict(re.findall(r"(?ms)^   gpumeter ([a-z]+)\n(.*?)(?=^   gpumeter |^[A-Z])", text))
        self.assertEqual(sorted(parts), sorted({c[0] for c in commands}))

        def flag_paragraph(part, flag):
            """From the line that defines the flag to the line that defines the next one."""
            define = re.search(r"(?m)^[ \t]+%s(?:[= ]|$)" % re.escape(flag), part)
            if not define:
                return None
            rest = part[define.start():]
            first_line = rest.find("\n") + 1
            nxt = re.search(r"(?m)^[ \t]+--[a-z]", rest[first_line:])
            return rest[:first_line + nxt.start()] if nxt else rest

        missing = []
        for command in commands:
            part = parts[command[0]]
            if len(command) == 2:
                m = re.search(r"(?ms)^       gpumeter %s %s\b(.*?)(?=^       gpumeter %s |\Z)"
                              % (command[0], command[1], command[0]), part)
                self.assertIsNotNone(m, "no paragraph for gpumeter %s" % " ".join(command))
                part = m.group(1)
            help_text = run(*command, "--help").stdout
            options = re.findall(r"^  (?:-\w,)?(--[a-z][a-z0-9.-]*)(?: (\S+))?", help_text.split("Options:")[1], re.M)
            self.assertGreater(len(options), 1, command)
            for flag, spec in options:
                if flag == "--help":
                    continue
                where = re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(flag), part)
                self.assertTrue(where, "gpumeter %s %s is not in its part of the man page" % (" ".join(command), flag))
                default = spec.split("=", 1)[1].strip("[]") if "=" in spec else ""  # CLI11 shows lists in []
                if not default:
                    continue
                paragraph = flag_paragraph(part, flag)
                if paragraph is not None and "As for serve" in paragraph:
                    paragraph = flag_paragraph(parts["serve"], flag)
                if paragraph is None or default not in paragraph:
                    missing.append("gpumeter %s %s: default %s" % (" ".join(command), flag, default))
        self.assertEqual(missing, [], "defaults missing from their flag's man page paragraph")

    def test_busy_port_fails_cleanly(self):
        import socket
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen()
            port = s.getsockname()[1]
            r = subprocess.run([BIN, "serve", "--web.listen-address", "127.0.0.1:%d" % port,
                                "--nvml.library", "/nonexistent/libnvidia-ml.so.1"],
                               capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1)
        self.assertIn("cannot serve HTTP", r.stderr)

    def test_sim_check_accepts_the_bundled_scenarios(self):
        for name in sorted(os.listdir(DEPLOY_SCENARIOS)):
            if name.endswith(".yaml"):
                r = run("sim", "check", "--scenario", os.path.join(DEPLOY_SCENARIOS, name))
                self.assertEqual(r.returncode, 0, name + ": " + r.stdout + r.stderr)

    def test_sim_check_names_file_and_line_of_an_error(self):
        bad = os.path.join(tempfile.mkdtemp(), "bad.yaml")
        with open(bad, "w") as f:
            f.write("driver_version: '550.54.15'\nno_such_key: 1\n")
        r = run("sim", "check", "--scenario", bad)
        self.assertEqual(r.returncode, 2)
        self.assertIn(bad + ":2", r.stdout + r.stderr)
