#!/usr/bin/env bash
# Runs every test (README command two): installs what is missing, builds everything, runs
# all tests but the GPU ones (tag `gpu`; run those with --test_tag_filters=gpu on a machine
# with a GPU), and ends with a line "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
deploy/setup.sh || exit 1

log=$(mktemp)
bazel test //... "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}

passed=$(grep -cE '^//[^ ]+ +(\(cached\) )?PASSED' "$log" || true)
failed=$(grep -cE '^//[^ ]+ +(\(cached\) )?(FAILED|TIMEOUT|FLAKY|INCOMPLETE|FAILED TO BUILD|NO STATUS)' "$log" || true)
rm -f "$log"
# A build failure before any test ran still counts as a failure.
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
echo "${passed} passed, ${failed} failed"
exit "$rc"
