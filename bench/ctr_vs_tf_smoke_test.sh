#!/usr/bin/env bash
# bench/ctr_vs_tf.sh end to end without TensorFlow (--no_tf; CI never installs it): a tiny
# click job (scale 0.01, 80000 examples, 2 epochs: ~1 s even at 130 k examples/s, so that the
# evaluator, which polls the chief every 200 ms, looks while it trains; 20000 ended first once)
# with 1 and 2 workers, the daemons run by deploy/run_local.sh from the built binaries.
# Checks that each run trained to an AUC above chance, that its time-to-AUC curve has the
# evaluations taken while it trained (each with the job's time) in time order, and that the
# evaluator's records carry job_elapsed_s, and that the report splits a step (pull, compute,
# push) on both sides. Then a run of 2 workers with the shape flags (--ps=1,
# --batch, --bottom, --top, --steps_in_flight) reaches the job file and the cluster, and a bad
# flag value exits 2. Speed is never asserted.
set -uo pipefail
root="${TEST_SRCDIR:?}/${TEST_WORKSPACE:-shardps}"
out="${TEST_TMPDIR:?}/ctr_vs_tf"
cd "$root" || exit 1
fail() { echo "FAIL: $*" >&2; echo "---- output ----" >&2; cat "$out/table.txt" >&2; exit 1; }

mkdir -p "$out"
SHARDPS_BIN="$root" bench/ctr_vs_tf.sh --no_tf --scale=0.01 --examples=80000 --epochs=2 \
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
# The limit beside the clusters: the job in one process on 1 and 2 threads, its AUC above
# chance, and each cluster's examples/s as a fraction of it.
for t in 1 2; do
  line=$(grep -E "^1-process +- .* $t thread" "$out/table.txt") || fail "no one-process row for $t thread(s)"
  auc=$(awk '{print $5}' <<<"$line")
  awk -v a="$auc" 'BEGIN { exit !(a > 0.6 && a < 1) }' || fail "one process, $t thread(s): AUC $auc"
done
grep -qE "^1 worker\(s\): shardps examples/s [0-9.]+ of the one process'" "$out/table.txt" ||
  fail "no cluster/one-process ratio"
# Where a step's time goes, on both sides (the chief's last line, the one process' summary).
for w in 1 2; do
  grep -qE "^$w worker\(s\): a step on its worker: pull [0-9.]+ \+ compute [0-9.]+ \+ push [0-9.]+ ms; the one process .*: batch and reads [0-9.]+ \+ compute [0-9.]+ \+ update [0-9.]+ ms" \
    "$out/table.txt" || fail "no per-step split for $w worker(s)"
done

# The shape flags: one ps, a smaller model and batch, two steps in flight.
out2="$out/shape"
mkdir -p "$out2"
SHARDPS_BIN="$root" bench/ctr_vs_tf.sh --no_tf --scale=0.01 --examples=6000 --epochs=1 \
  --evals_per_epoch=1 --single_threads=none --workers=2 --ps=1 --batch=128 --bottom=32,16 --top=32 \
  --steps_in_flight=2 --out_dir="$out2" >"$out2/table.txt" 2>"$out2/stderr.txt" ||
  { cat "$out2/stderr.txt" >&2; fail "shape flags: exit $?"; }
job=$(find "$out2" -name job-2.json | head -1)
[ -n "$job" ] || fail "shape flags: no job-2.json"
for want in '"batch_size": 128' '"steps_in_flight": 2' '"partitioner": "fixed:1"' \
            'bottom=32,16;top=32;'; do
  grep -qF "$want" "$job" || fail "shape flags: $job lacks $want: $(cat "$job")"
done
run=$(dirname "$job")/shardps-2
if [ ! -f "$run/ps-0.log" ] || [ -e "$run/ps-1.log" ]; then fail "shape flags: not one ps in $run"; fi
grep -qE "^shardps +2 " "$out2/table.txt" || fail "shape flags: no table row"
for bad in --ps=0 --steps_in_flight=3 --bottom=64,x --backend=tpu --batch=-1 \
           --tf_setups=fused-min_size --partitioner=even --targets=high --single_threads=0; do
  bench/ctr_vs_tf.sh --no_tf "$bad" >/dev/null 2>"$out2/bad.txt"
  rc=$?
  [ "$rc" = 2 ] || fail "$bad: exit $rc, not 2"
  [ -s "$out2/bad.txt" ] || fail "$bad: no message"
done
echo "PASS"
cat "$out/table.txt"
