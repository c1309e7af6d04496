#!/usr/bin/env bash
# Runs shellcheck over every shell script of the source tree: the tracked files named *.sh and
# those whose first line names bash or sh (.ci/run). A finding fails the test; a deliberate
# exception is a `# shellcheck disable=SCnnnn  # why` line in the script itself.
#
# The scripts live in every package and are not declared as inputs: the test finds the source
# tree through its own runfiles link (as //:docs_links_test does) and is tagged `external`, so
# that Bazel never serves it from the cache.
set -euo pipefail
root="$(cd "$(dirname "$(readlink -f tools/shellcheck_test.sh)")/.." && pwd)"
if [ ! -f "$root/WORKSPACE" ]; then
  echo "shellcheck_test: the source tree is not reachable from the runfiles" >&2
  exit 1
fi
command -v shellcheck >/dev/null ||
  { echo "shellcheck_test: shellcheck is not installed (deploy/setup.sh installs it)" >&2; exit 1; }

cd "$root"
scripts=()
while IFS= read -r -d '' file; do
  case "$file" in
    *.sh) scripts+=("$file") ;;
    *) if head -n1 "$file" 2>/dev/null | grep -qE '^#!.*\b(ba)?sh\b'; then scripts+=("$file"); fi ;;
  esac
done < <(if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
           git -C "$root" ls-files -z
         else
           find . -path ./.git -prune -o -path './bazel-*' -prune -o -type f -print0 |
             sed -z 's|^\./||'
         fi)
[ "${#scripts[@]}" -gt 0 ] || { echo "shellcheck_test: no shell scripts found under $root" >&2; exit 1; }
echo "shellcheck $(shellcheck --version | sed -n 's/^version: //p') over ${#scripts[@]} scripts"
shellcheck -x "${scripts[@]}"
echo "no findings"
