#!/usr/bin/env python3
"""Checks that the documentation's relative links and the tree's pointers into docs/ resolve.

  check_links.py ROOT [--tree]

ROOT is the repository root. Always: every relative link in README.md and docs/**/*.md
([text](path), [text](path#anchor), [text](#anchor)) names a file or folder that exists, and
its anchor names a heading of that Markdown file (GitHub's anchors: the heading lower-cased,
punctuation dropped, spaces as hyphens, "-1", "-2" for repeats). External links (http:,
https:, mailto:) are not followed.

With --tree (ROOT is the whole source tree), also:
- every mention of a Markdown file under docs/ in the rest of the tree's text files (a code
  comment, an error message, a manifest: "docs/deploying.md#rolling-upgrades") names a file
  and heading that exist;
- every path that README.md and docs/ mention, in prose, code spans or code blocks, names a
  file or folder that exists, or a target of its package ("tests/netns_test"). A path is a
  word that starts with a top-level folder of ROOT and a slash ("ps_server/shard_store.h");
  one followed by a pattern or a placeholder ("bench/*.sh", "runs/<time>/") is not checked;
- every Bazel label they mention ("//ps_server:ps", "//worker", "//client/...") names a
  package, and a target that its BUILD file names or a file in it.

Prints one line per dead link, naming the file and line, then a summary; exits 1 if any.
"""

import os
import re
import sys

LINK = re.compile(r"\[[^\[\]]*?\]\(([^()\s]+)\)")  # a class, not (x|\n)*: no backtracking blow-up
POINTER = re.compile(r"(?<![\w/.-])(docs/[\w./-]+\.md)(#[\w-]+)?")
FENCE = re.compile(r"^(```|~~~)")
SKIP_DIRS = {".git", "node_modules", "runs", ".dist"}
# A Bazel label: //pkg, //pkg:name, //:name, //pkg/... (not a URL's "//host", not a comment).
LABEL = re.compile(r"(?<![\w:/])//(?=[\w:.])([\w/.-]*)(?::([\w./+@-]+))?")
PATH_CHARS = r"[\w./@+-]"
NOT_CHECKED_AFTER = set("*<{$")  # a glob, a placeholder or a variable: not one path
TEXT_SUFFIXES = (".h", ".cc", ".cu", ".py", ".sh", ".bzl", ".bazel", ".yaml", ".yml", ".json",
                 ".proto", ".md", ".service", ".txt", "BUILD", "WORKSPACE", ".bazelrc")


def anchors_of(path, cache={}):
    """GitHub's anchors for the headings of the Markdown file at `path`."""
    if path in cache:
        return cache[path]
    seen = {}
    anchors = set()
    in_fence = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if FENCE.match(line):
                in_fence = not in_fence
                continue
            m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if in_fence or not m:
                continue
            text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m.group(1))  # a link's text only
            slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            anchors.add(slug if n == 0 else f"{slug}-{n}")
    cache[path] = anchors
    return anchors


def check_target(root, base_dir, target):
    """None when `target` (relative to base_dir, or to root when it starts with '/') resolves,
    else why not."""
    path, _, anchor = target.partition("#")
    if path:
        full = os.path.normpath(os.path.join(root if path.startswith("/") else base_dir,
                                             path.lstrip("/")))
        if not os.path.exists(full):
            return f"no such file: {path}"
    else:
        return None if not anchor else "an anchor needs its page"  # caller passes the page
    if anchor:
        if not full.endswith(".md") or os.path.isdir(full):
            return f"an anchor into a file that is not Markdown: {target}"
        if anchor not in anchors_of(full):
            return f"no heading for #{anchor} in {os.path.relpath(full, root)}"
    return None


def markdown_files(root):
    files = [os.path.join(root, "README.md")]
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, "docs")):
        dirnames.sort()
        files += [os.path.join(dirpath, n) for n in sorted(filenames) if n.endswith(".md")]
    return files


def links_in(path):
    """(line, target) for every inline link outside fenced code and code spans."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    # Blank out fenced blocks and code spans, keeping the line count.
    out, in_fence = [], False
    for line in text.split("\n"):
        if FENCE.match(line):
            in_fence = not in_fence
            out.append("")
        else:
            out.append("" if in_fence else re.sub(r"`[^`\n]*`", lambda m: " " * len(m.group(0)),
                                                  line))
    text = "\n".join(out)
    for m in LINK.finditer(text):
        yield text.count("\n", 0, m.start(1)) + 1, m.group(1)


def check_docs(root, problems):
    count = 0
    for path in markdown_files(root):
        rel = os.path.relpath(path, root)
        for line, target in links_in(path):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:, file:
                continue
            count += 1
            if target.startswith("#"):
                why = None if target[1:] in anchors_of(path) else \
                    f"no heading for {target} in {rel}"
            else:
                why = check_target(root, os.path.dirname(path), target)
            if why:
                problems.append(f"{rel}:{line}: [{target}]: {why}")
    return count


def check_tree(root, problems):
    count = 0
    docs = os.path.join(root, "docs")
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames
                             if d not in SKIP_DIRS and not d.startswith("bazel-"))
        if os.path.abspath(dirpath).startswith(os.path.abspath(docs)):
            continue  # docs/ itself: its links are checked above
        for name in sorted(filenames):
            if not name.endswith(TEXT_SUFFIXES) or name == "README.md" and dirpath == root:
                continue
            path = os.path.join(dirpath, name)
            try:
                with open(path, encoding="utf-8") as f:
                    lines = f.read().split("\n")
            except (UnicodeDecodeError, OSError):
                continue
            for i, line in enumerate(lines, 1):
                for m in POINTER.finditer(line):
                    count += 1
                    why = check_target(root, root, m.group(1) + (m.group(2) or ""))
                    if why:
                        problems.append(f"{os.path.relpath(path, root)}:{i}: "
                                        f"{m.group(0)}: {why}")
    return count


def top_level_folders(root):
    return sorted(d for d in os.listdir(root)
                  if os.path.isdir(os.path.join(root, d)) and not d.startswith((".", "bazel-"))
                  and d not in SKIP_DIRS)


def build_file(root, package):
    for name in ("BUILD.bazel", "BUILD"):
        path = os.path.join(root, package, name)
        if os.path.isfile(path):
            return path
    return None


def names_target(root, package, name, cache={}):
    """Whether `package`'s BUILD file names a target `name` (or `name` is a file in it)."""
    if os.path.exists(os.path.join(root, package, name)):
        return True
    build = build_file(root, package)
    if build is None:
        return False
    if build not in cache:
        with open(build, encoding="utf-8") as f:
            cache[build] = set(re.findall(r"\bname\s*=\s*\"([^\"]+)\"", f.read()))
    return name in cache[build]


def check_path(root, path):
    """None when `path` (relative to root) is a file, a folder or a target written as a path
    ("tests/netns_test"), else why not."""
    path = path.rstrip(".")
    if os.path.exists(os.path.join(root, path)):
        return None
    if re.fullmatch(r"[^/]+/[a-z0-9]{1,2}", path):
        return None  # prose, not a path: "examples/s" (a rate), "examples/5" (a fraction)
    package, _, name = path.rstrip("/").rpartition("/")
    if name and names_target(root, package, name):
        return None
    return f"no such file, folder or target: {path}"


def check_label(root, package, name):
    """None when the label //package[:name] resolves, else why not."""
    label = f"//{package}" + (f":{name}" if name else "")
    if package.endswith("..."):  # //pkg/... : every package under pkg
        folder = package[:-3].rstrip("/")
        return None if os.path.isdir(os.path.join(root, folder)) else \
            f"no such folder for {label}: {folder or '.'}"
    package = package.rstrip("/")
    if build_file(root, package) is None:
        return f"no BUILD file for {label} in {package or 'the root'}"
    name = name or package.rpartition("/")[2]
    if not names_target(root, package, name):
        return f"no target {name} in {package or 'the root'}'s BUILD file for {label}"
    return None


def check_mentions(root, problems):
    """Every path and label that README.md and docs/ mention, as check_path and check_label
    see them. Returns how many were checked."""
    # Not a link's target ("](docs/x.md)"): check_docs reads those, relative to their page.
    mention = re.compile(r"(?<![\w/.:@~$-])(?<!\]\()((?:" +
                         "|".join(re.escape(d) for d in top_level_folders(root)) +
                         r")/" + PATH_CHARS + r"*)")
    count = 0
    for path in markdown_files(root):
        rel = os.path.relpath(path, root)
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        for i, line in enumerate(lines, 1):
            for m in mention.finditer(line):
                if line[m.end():m.end() + 1] in NOT_CHECKED_AFTER:
                    continue
                count += 1
                why = check_path(root, m.group(1))
                if why:
                    problems.append(f"{rel}:{i}: {m.group(1)}: {why}")
            for m in LABEL.finditer(line):
                count += 1
                why = check_label(root, m.group(1), (m.group(2) or "").rstrip("."))
                if why:
                    problems.append(f"{rel}:{i}: {m.group(0)}: {why}")
    return count


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = argv[1]
    problems = []
    links = check_docs(root, problems)
    summary = f"{links} relative links in README.md and docs/"
    if "--tree" in argv[2:]:
        summary += f", {check_tree(root, problems)} pointers into docs/ in the tree"
        summary += f", {check_mentions(root, problems)} paths and labels in README.md and docs/"
    for p in problems:
        print(p)
    print(f"{summary}: {len(problems)} dead")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
