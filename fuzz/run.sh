#!/usr/bin/env bash
# Runs one fuzz target for longer than CI does: builds it with --config=clang-asan (in the
# clang stage's output base, as deploy/test.sh does) and runs libFuzzer for SECONDS (default
# 600) from a working corpus that persists between runs (seeded from fuzz/corpus/TARGET/),
# with the target's -max_len from fuzz/BUILD.bazel. Ends with the executions run and the
# crashes found; each crashing input is in WORK/artifacts/ (replay it with the same binary
# and the input's path; once fixed, add it to fuzz/corpus/TARGET/).
#
# Usage: fuzz/run.sh TARGET [SECONDS]      e.g. fuzz/run.sh manifest_fuzzer 300
#   SHARDPS_FUZZ_WORK  the working corpora's folder (default ~/.cache/shardps/fuzz)
#   SHARDPS_FUZZ_JOBS  parallel libFuzzer processes (default 1)
# Extra libFuzzer flags go in SHARDPS_FUZZ_FLAGS (e.g. "-only_ascii=1").
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: fuzz/run.sh TARGET [SECONDS] (targets: $(sed -n 's/^    name = "\(.*_fuzzer\)",$/\1/p' fuzz/BUILD.bazel | tr '\n' ' '))" >&2
  exit 2
fi
target=$1 seconds=${2:-600}
if ! grep -q "name = \"$target\"," fuzz/BUILD.bazel || [[ "$target" != *_fuzzer ]]; then
  echo "fuzz/run.sh: no fuzz target $target in fuzz/BUILD.bazel" >&2
  exit 2
fi
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
  echo "fuzz/run.sh: SECONDS must be a positive integer, got $seconds" >&2
  exit 2
fi
bazel=(bazel "--output_base=$(bazel info output_base)-clang")
flags=(--config=clang-asan --symlink_prefix=/)
"${bazel[@]}" build "${flags[@]}" "//fuzz:$target" >&2
binary="$("${bazel[@]}" info "${flags[@]}" bazel-bin 2>/dev/null)/fuzz/$target"
# -max_len: the 4th argument of the target's CI run.
max_len=$("${bazel[@]}" query --noshow_progress --output=build "//fuzz:${target}_fuzz_test" \
            2>/dev/null | tr -d '\n ' | sed -E 's/.*args=\[([^]]*)\].*/\1/' |
          awk -F, '{gsub(/"/, "", $4); print $4}')
work="${SHARDPS_FUZZ_WORK:-$HOME/.cache/shardps/fuzz}/$target"
mkdir -p "$work/corpus" "$work/artifacts"
cp -Rn "fuzz/corpus/$target"/. "$work/corpus"/
chmod -R u+w "$work/corpus"
log="$work/last_run.log"
jobs=${SHARDPS_FUZZ_JOBS:-1}
parallel=()
# Several jobs run as child processes, each logging to fuzz-N.log in the working folder.
if [ "$jobs" -gt 1 ]; then parallel=(-jobs="$jobs" -workers="$jobs"); fi
rm -f "$work"/fuzz-*.log
before=$(find "$work/artifacts" -type f | wc -l)
echo "fuzz/run.sh: $target for ${seconds}s, -max_len=$max_len, corpus $work/corpus" >&2
# shellcheck disable=SC2086  # SHARDPS_FUZZ_FLAGS holds several flags
(cd "$work" && "$binary" -max_total_time="$seconds" -max_len="$max_len" -timeout=10 \
  -print_final_stats=1 -artifact_prefix="$work/artifacts/" "${parallel[@]}" \
  ${SHARDPS_FUZZ_FLAGS:-} "$work/corpus") 2>&1 | tee "$log" | grep -E '^(#[0-9]+ +(INITED|DONE|pulse)|==[0-9]+==|SUMMARY|stat::)' >&2 || true
logs=("$log")
if [ "$jobs" -gt 1 ]; then logs=("$work"/fuzz-*.log); fi
executions=$(cat "${logs[@]}" | awk '/^stat::number_of_executed_units/ {s += $2} END {print s + 0}')
crashes=$(( $(find "$work/artifacts" -type f | wc -l) - before ))
echo "$target: $executions executions, $crashes new crashing inputs (in $work/artifacts)"
[ "$crashes" -eq 0 ]
