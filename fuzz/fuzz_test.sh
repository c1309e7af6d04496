#!/usr/bin/env bash
# The CI run of one fuzz target (fuzz/fuzz.bzl's NAME_fuzz_test, run by the clang stage of
# deploy/test.sh): libFuzzer for a fixed number of executions with a fixed seed, starting
# from a copy of the target's seed corpus (the inputs it finds go to the copy, never to the
# tree). Fails on a crash, a sanitizer report, a leak or an input slower than 10 s; the input
# at fault is kept in the test's undeclared outputs (bazel-testlogs/fuzz/NAME_fuzz_test/
# test.outputs/): add it to fuzz/corpus/NAME/ as a regression case once the bug is fixed.
#
# Usage: fuzz_test.sh FUZZER CORPUS_DIR RUNS MAX_LEN
set -euo pipefail
fuzzer=$1 corpus=$2 runs=$3 max_len=$4
work="${TEST_TMPDIR:-$(mktemp -d)}/corpus"
artifacts="${TEST_UNDECLARED_OUTPUTS_DIR:-${TEST_TMPDIR:-/tmp}}/"
mkdir -p "$work"
cp -R "$corpus"/. "$work"/
chmod -R u+w "$work"
exec "$fuzzer" -runs="$runs" -seed=1 -max_len="$max_len" -timeout=10 -print_final_stats=1 \
  -artifact_prefix="$artifacts" "$work"
