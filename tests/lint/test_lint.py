"""scripts/lint.sh and the default tree's compiler flags: each check passes on the tree (lint.sh
itself runs in scripts/test.sh) and fails on a violation planted in a copy of it."""
import json
import os
import shlex
import shutil
import subprocess
import tempfile
import unittest

SOURCE = os.environ.get("GPUMETER_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("GPUMETER_BUILD_DIR") or os.path.join(SOURCE, "build")
LINT = os.path.join(SOURCE, "scripts", "lint.sh")


def compile_command_of(source):
    """The default tree's compile command of a file of src/, as compile_commands.json has it."""
    with open(os.path.join(BUILD, "compile_commands.json"), encoding="utf-8") as f:
        return next(c for c in json.load(f) if c["file"].endswith(source) and "cmake_pch" not in c["command"])


def lint(*args):
    return subprocess.run([LINT, *args], capture_output=True, text=True, timeout=300)


class PlantedTree(unittest.TestCase):
    """A copy of the repository's src/, docs/ and lint configuration, to plant violations in."""

    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="gpumeter-lint.")
        self.addCleanup(shutil.rmtree, self.root)
        for name in ("src", "docs"):
            shutil.copytree(os.path.join(SOURCE, name), os.path.join(self.root, name))
        for name in (".clang-format", ".clang-tidy"):
            shutil.copy(os.path.join(SOURCE, name), self.root)

    def plant(self, rel, text):
        path = os.path.join(self.root, rel)
        with open(path, "a", encoding="utf-8") as f:
            f.write(text)
        return path


class ArrowsTest(PlantedTree):
    def test_the_tree_keeps_to_the_module_map(self):
        result = lint("--root", self.root, "arrows")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)

    def test_a_ledger_that_includes_a_backend_fails_naming_the_line(self):
        self.plant("src/ledger/ledger.h", '\n#include "backend/backend.h"\n')
        result = lint("--root", self.root, "arrows")
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        self.assertRegex(result.stdout, r"src/ledger/ledger\.h:\d+: ledger may not include backend/backend\.h")

    def test_a_module_without_a_row_fails(self):
        os.makedirs(os.path.join(self.root, "src", "newthing"))
        self.plant("src/newthing/a.h", "#pragma once\n")
        result = lint("--root", self.root, "arrows")
        self.assertEqual(result.returncode, 1)
        self.assertIn("module newthing has no row in the module map", result.stdout)

    def test_a_map_naming_an_unknown_module_is_refused(self):
        path = os.path.join(self.root, "docs", "architecture.md")
        with open(path, encoding="utf-8") as f:
            text = f.read()
        text = text.replace("| `model` | plain values: identities, readings, snapshots, owners, metric families | `util` |",
                            "| `model` | plain values | `util` `nowhere` |")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        result = lint("--root", self.root, "arrows")
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        self.assertIn("model may include nowhere, which has no row", result.stderr)


class FormatTest(PlantedTree):
    def test_the_tree_is_formatted(self):
        result = lint("--root", self.root, "format")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)

    def test_a_misformatted_line_fails_naming_the_file(self):
        self.plant("src/util/duration.cpp", "\nnamespace gpumeter {  int   planted ( ){return 1 ;}  }\n")
        result = lint("--root", self.root, "format")
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        self.assertIn("src/util/duration.cpp", result.stderr)


class TidyTest(unittest.TestCase):
    """clang-tidy over a tree of one planted file, compiled as the default tree compiles src/util."""

    def tidy_over(self, lines):
        model = compile_command_of("src/util/duration.cpp")
        root = tempfile.mkdtemp(prefix="gpumeter-lint.")
        self.addCleanup(shutil.rmtree, root)
        shutil.copy(os.path.join(SOURCE, ".clang-tidy"), root)
        os.makedirs(os.path.join(root, "src", "util"))
        path = os.path.join(root, "src", "util", "planted.cpp")
        body = "".join(f"  total += {i};\n" for i in range(lines - 4))
        with open(path, "w", encoding="utf-8") as f:  # `lines` lines from the signature to the brace
            f.write(f"int planted() {{\n  int total = 0;\n{body}  return total;\n}}\n")
        entry = dict(model, file=path, command=model["command"].replace(model["file"], path))
        with open(os.path.join(root, "compile_commands.json"), "w", encoding="utf-8") as f:
            json.dump([entry], f)
        return lint("--root", root, "--build", root, "tidy")

    def test_a_function_of_120_lines_passes(self):
        result = self.tidy_over(120)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)

    def test_a_function_over_120_lines_fails(self):
        result = self.tidy_over(130)
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        self.assertIn("readability-function-size", result.stdout)


class WarningsAsErrorsTest(unittest.TestCase):
    def test_the_default_tree_fails_on_a_warning(self):
        model = compile_command_of("src/util/duration.cpp")
        with tempfile.TemporaryDirectory(prefix="gpumeter-werror.") as d:
            planted = os.path.join(d, "planted.cpp")
            with open(planted, "w", encoding="utf-8") as f:
                f.write("int planted() {\n  int unused = 1;\n  return 0;\n}\n")
            argv = shlex.split(model["command"])
            argv = [planted if a == model["file"] else a for a in argv]
            argv[argv.index("-o") + 1] = os.path.join(d, "planted.o")
            argv = [a for a in argv if not a.startswith(("-MD", "-MF", "-MT", "-MQ"))]
            # The launcher (ccache) may be the first word; run the compiler itself.
            if os.path.basename(argv[0]) == "ccache":
                argv = argv[1:]
            result = subprocess.run(argv, capture_output=True, text=True, cwd=model["directory"], timeout=120)
        self.assertNotEqual(result.returncode, 0, result.stderr)
        self.assertRegex(result.stderr, r"error: unused variable .unused. \[-Werror=unused-variable\]")


if __name__ == "__main__":
    unittest.main()
