#!/usr/bin/env bash
# Fails on a dead relative link or anchor in README.md or docs/, on a path or Bazel label they
# mention that names nothing, and on a pointer into docs/ anywhere in the tree (a comment, an
# error message, a generated manifest) whose file or heading does not exist
# (docs/check_links.py says how each is read).
#
# The pointers live in files of every package, which this test does not declare as inputs:
# it finds the source tree through README.md's runfiles link and reads it there, and is
# tagged `external` so that Bazel never serves it from the cache. Where the runfiles are
# copies rather than links, it checks the declared README.md and docs/ alone (their links,
# not the paths they mention) and says so.
set -euo pipefail
here="$PWD"
root="$(dirname "$(readlink -f README.md)")"
if [ -f "$root/WORKSPACE" ] && [ -f "$root/docs/check_links.py" ]; then
  exec python3 docs/check_links.py "$root" --tree
fi
echo "links_test: the source tree is not reachable from the runfiles: README.md and docs/ only"
exec python3 docs/check_links.py "$here"
