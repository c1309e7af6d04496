#!/usr/bin/env bash
# bench/ctr_vs_tf.sh end to end without TensorFlow (--no_tf; CI never installs it): a tiny
# click job (scale 0.01, 20000 examples, 2 epochs) with 1 and 2 workers, the daemons run by
# deploy/run_local.sh from the built binaries. Checks that each run trained to an AUC above
# chance, that its time-to-AUC curve has the evaluations taken while it trained (each with
# the job's time) in time order, and that the evaluator's records carry job_elapsed_s. Speed
# is never asserted.
set -uo pipefail
root="${TEST_SRCDIR:?}/${TEST_WORKSPACE:-shardps}"
out="${TEST_TMPDIR:?}/ctr_vs_tf"
cd "$root" || exit 1
fail() { echo "FAIL: $*" >&2; echo "---- output ----" >&2; cat "$out/table.txt" >&2; exit 1; }

mkdir -p "$out"
SHARDPS_BIN="$root" bench/ctr_vs_tf.sh --no_tf --scale=0.01 --examples=20000 --epochs=2 \
  --evals_per_epoch=2 --workers=1,2 --out_dir="$out" >"$out/table.txt" 2>"$out/stderr.txt" ||
  { cat "$out/stderr.txt" >&2; find "$out" -name '*.log' -exec tail -5 {} + >&2; fail "exit $?"; }

for w in 1 2; do
  line=$(grep -E "^shardps +$w " "$out/table.txt") || fail "no table row for $w worker(s)"
  auc=$(awk '{print $5}' <<<"$line")
  awk -v a="$auc" 'BEGIN { exit !(a > 0.6 && a < 1) }' || fail "$w worker(s): AUC $auc"
  curve=$(grep -E "^  shardps +$w worker" "$out/table.txt") || fail "no curve for $w worker(s)"
  # "0.4 s 0.6949, 0.8 s 0.6973, ...": at least the mid-run and final points, times ascending.
  points=$(grep -o '[0-9.]* s [0-9.]*' <<<"$curve" | awk '{print $1}')
  [ "$(wc -l <<<"$points")" -ge 3 ] || fail "$w worker(s): curve of fewer than 3 points: $curve"
  sort -n -c <<<"$points" || fail "$w worker(s): curve out of time order: $curve"
done
metrics=$(find "$out" -path '*shardps-1/metrics.jsonl' | head -1)
[ -n "$metrics" ] || fail "no metrics.jsonl"
grep -q '"job_elapsed_s": [0-9.]*[1-9]' "$metrics" || fail "no job_elapsed_s in $metrics"
grep -q "examples/s" "$out/table.txt" || fail "no header"
echo "PASS"
cat "$out/table.txt"
