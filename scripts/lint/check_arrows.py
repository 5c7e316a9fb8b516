#!/usr/bin/env python3
"""Checks every #include "..." under src/ against the module map in docs/architecture.md.

A module is a folder of src/ (the simulator's rooms, src/sim/*, and the backends, src/backend/*, are
modules of their own). A file
may include headers of its own module and of the modules its module's row in the map names;
anything else is an arrow the architecture does not allow. Prints one line per such include and
exits 1 if there is any, 2 if the map cannot be read.

usage: check_arrows.py [--root DIR] [--map FILE]   (defaults: the repository, its architecture.md)
"""
import argparse
import os
import re
import sys

MAP_START = "<!-- module-map -->"
MAP_END = "<!-- /module-map -->"
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def read_map(path):
    """The map's rows: module -> the set of modules it may include."""
    text = open(path, encoding="utf-8").read()
    if MAP_START not in text or MAP_END not in text:
        raise ValueError(f"{path}: no module map between {MAP_START} and {MAP_END}")
    allowed = {}
    for line in text[text.index(MAP_START):text.index(MAP_END)].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        module = cells[0].strip("`")
        targets = set(re.findall(r"`([^`]+)`", cells[2]))
        if module in allowed:
            raise ValueError(f"{path}: module {module} has two rows")
        allowed[module] = targets
    if not allowed:
        raise ValueError(f"{path}: the module map has no rows")
    for module, targets in allowed.items():
        unknown = targets - set(allowed)
        if unknown:
            raise ValueError(f"{path}: {module} may include {', '.join(sorted(unknown))}, which has no row")
    return allowed


# Folders whose subfolders are modules of their own: the simulator's rooms and the backends.
NESTED = ("sim", "backend")


def module_of(parts):
    """The module a path under src/ (as parts, without src/) belongs to."""
    if parts[0] in NESTED and len(parts) > 2:
        return parts[0] + "/" + parts[1]
    return parts[0]


def check(root, allowed):
    problems = []
    src = os.path.join(root, "src")
    for folder, dirs, files in os.walk(src):
        dirs.sort()
        for name in sorted(files):
            if not name.endswith((".h", ".cpp", ".c")):
                continue
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, src).split(os.sep)
            if len(rel) < 2:
                continue  # files at the top of src/ belong to no module
            module = module_of(rel)
            if module not in allowed:
                problems.append(f"src/{'/'.join(rel)}: module {module} has no row in the module map")
                continue
            text = open(path, encoding="utf-8", errors="replace").read()
            for match in INCLUDE.finditer(text):
                included = match.group(1).split("/")
                if len(included) < 2:
                    continue  # a header beside the file
                target = module_of(included)
                if target != module and target not in allowed[module]:
                    line = text.count("\n", 0, match.start()) + 1
                    problems.append(f"src/{'/'.join(rel)}:{line}: {module} may not include {match.group(1)} "
                                    f"({target}); the module map allows {', '.join(sorted(allowed[module])) or 'nothing'}")
    return problems


def main():
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=here, help="the repository (default: this one)")
    parser.add_argument("--map", help="the file with the module map (default: ROOT/docs/architecture.md)")
    args = parser.parse_args()
    try:
        allowed = read_map(args.map or os.path.join(args.root, "docs", "architecture.md"))
    except (OSError, ValueError) as e:
        print(f"check_arrows: {e}", file=sys.stderr)
        return 2
    problems = check(args.root, allowed)
    for p in problems:
        print(p)
    if problems:
        print(f"check_arrows: {len(problems)} include(s) against the module map", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
