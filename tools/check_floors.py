#!/usr/bin/env python3
"""Checks that no #include (or proto import) climbs a floor of tools/floors.txt.

Usage: check_floors.py [--root DIR] [--table FILE]

Scans every C++, CUDA and proto file under DIR (default: the repository this script is in)
and prints one line per include that names a file of a higher floor, or of another folder on
the same floor, and per top-level folder that the table does not list. Exits 1 when it
printed any, 0 otherwise.
"""

import argparse
import os
import re
import sys

SOURCE = re.compile(r"\.(cc|h|cu|cuh|hpp|cpp|proto)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+["<]([^">]+)[">]')
IMPORT = re.compile(r'^\s*import\s+(?:public\s+|weak\s+)?"([^"]+)"')
TEST_FILE = re.compile(r"_test\.(cc|cpp|cu)$")


def parse_table(text):
    """{folder: floor} from the table's text; raises ValueError naming a bad line."""
    floors = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        words = line.split()
        if len(words) < 2 or not words[0].isdigit():
            raise ValueError(f"line {number}: expected '<floor> <folder>...', got {line!r}")
        for folder in words[1:]:
            folder = folder.strip("/")
            if folder in floors:
                raise ValueError(f"line {number}: folder {folder} is listed twice")
            floors[folder] = int(words[0])
    return floors


def folder_of(path, floors):
    """The longest folder of the table that contains `path`, or None."""
    parts = path.split("/")
    for n in range(len(parts) - 1, 0, -1):
        prefix = "/".join(parts[:n])
        if prefix in floors:
            return prefix
    return None


def ignored_top_level(root):
    """Top-level folders the repository's .gitignore ignores ("/runs/"): the main job's run
    directories and build outputs are no part of the code."""
    try:
        with open(os.path.join(root, ".gitignore")) as f:
            lines = [line.strip() for line in f]
    except OSError:
        return set()
    return {line.strip("/") for line in lines
            if line.startswith("/") and line.endswith("/") and "*" not in line}


def top_level_folders(root):
    ignored = ignored_top_level(root)
    for name in sorted(os.listdir(root)):
        if name.startswith(".") or name.startswith("bazel-") or name in ignored:
            continue
        if os.path.isdir(os.path.join(root, name)) and not os.path.islink(os.path.join(root, name)):
            yield name


def source_files(root, top):
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if SOURCE.search(name):
                yield os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/")


def check(root, floors, table_name="tools/floors.txt"):
    """The violations under `root`, one message each."""
    errors = []
    tops = list(top_level_folders(root))
    for top in tops:
        if top not in floors:
            errors.append(f"{top}/: a top-level folder that {table_name} does not list; add it "
                          f"to the table on the floor it belongs to")
    for top in tops:
        if top not in floors:
            continue
        for path in source_files(root, top):
            if TEST_FILE.search(path):
                continue
            here = folder_of(path, floors)
            with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
                for number, line in enumerate(f, 1):
                    match = INCLUDE.match(line) or IMPORT.match(line)
                    if not match or "/" not in match.group(1):
                        continue
                    included = match.group(1)
                    first = included.split("/", 1)[0]
                    if first not in floors and first not in tops:
                        continue  # a system or third-party header
                    there = folder_of(included, floors)
                    if there is None:
                        errors.append(f"{path}:{number}: includes {included}, whose folder "
                                      f"{first}/ {table_name} does not list; add it to the table")
                        continue
                    if there == here or floors[there] < floors[here]:
                        continue
                    relation = "a higher floor" if floors[there] > floors[here] else "the same floor"
                    errors.append(f"{path}:{number}: {here}/ (floor {floors[here]}) includes "
                                  f"{included}, of {there}/ on {relation} (floor {floors[there]})")
    return errors


def main(argv):
    default_root = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=default_root)
    parser.add_argument("--table", default=None)
    args = parser.parse_args(argv)
    table = args.table or os.path.join(args.root, "tools", "floors.txt")
    with open(table, encoding="utf-8") as f:
        try:
            floors = parse_table(f.read())
        except ValueError as e:
            print(f"{table}: {e}")
            return 1
    errors = check(args.root, floors)
    for e in errors:
        print(e)
    if errors:
        print(f"{len(errors)} include(s) or folder(s) break the floors of {table}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
