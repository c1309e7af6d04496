#!/usr/bin/env bash
# The click model: shardps against TensorFlow's ParameterServerStrategy (issue 10 §6), on the
# same generated data and the same model, 2 ps, 1 and 2 async workers each; training
# examples/s, the time to train and the held-out AUC at the end, beside the planted model's
# (the ceiling). The table goes to stdout.
#
#   bench/ctr_vs_tf.sh [--scale=1] [--examples=300000] [--epochs=1] [--workers=1,2] [--no_tf]
#
# The data: synthetic_ctr preset criteo_like (13 dense features, 26 one-hot tables of
# Criteo-like sizes, 2x10^7 rows in all at --scale=1; smaller scales shrink every table), the
# training split of --examples and a held-out split of --examples/10 after it. The model:
# dlrm:bottom=64,16;top=64,32;dim=16;interaction=concat;pooling=sum; Adagrad, learning rate
# 0.05, initial accumulator 0.1, batch 256 per step; "fixed:2" shards for every variable.
# shardps runs as deploy/run_local.sh runs it (chief, 2 ps, the workers, an evaluator); the
# peer is bench/tf_peer/tf_ctr.py (TensorFlow from bench/tf_peer/venv.sh, made on first use
# unless --no_tf). The examples go to the peer through `ctr_tool export` (fixed-size records),
# generated once per run into the run directory.
set -euo pipefail
cd "$(dirname "$0")/.."

scale=1
examples=300000
epochs=1
workers_list="1,2"
use_tf=1
for arg in "$@"; do
  case "$arg" in
    --scale=*) scale="${arg#*=}" ;;
    --examples=*) examples="${arg#*=}" ;;
    --epochs=*) epochs="${arg#*=}" ;;
    --workers=*) workers_list="${arg#*=}" ;;
    --no_tf) use_tf=0 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "ctr_vs_tf.sh: unknown flag $arg" >&2; exit 2 ;;
  esac
done
test_examples=$((examples / 10))
spec="synthetic_ctr:preset=criteo_like,scale=${scale},seed=7"
model="dlrm:bottom=64,16;top=64,32;dim=16;interaction=concat;pooling=sum"
run_dir="runs/ctr_vs_tf-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$run_dir"
echo "ctr_vs_tf: building; run directory $run_dir" >&2
bazel build //data/ctr:ctr_tool >&2  # run_local.sh builds the daemons
bin=bazel-bin

python=""
if [ "$use_tf" = 1 ]; then
  python="$(bench/tf_peer/venv.sh)/bin/python"
  echo "ctr_vs_tf: exporting the examples for TensorFlow" >&2
  "$bin/data/ctr/ctr_tool" export --spec="$spec,examples=$examples" --out="$run_dir/train.bin" >&2
  "$bin/data/ctr/ctr_tool" export --spec="$spec,examples=$test_examples,offset=$examples" \
    --out="$run_dir/test.bin" >&2
fi

printf '%-10s %8s %10s %12s %9s %9s\n' system workers seconds examples/s AUC ceiling
IFS=, read -ra workers <<<"$workers_list"
declare -A rate auc
for w in "${workers[@]}"; do
  job="$run_dir/job-$w.json"
  cat >"$job" <<JSON
{"name": "ctrbench", "model": "$model",
 "dataset": "$spec,examples=$examples,test=$test_examples",
 "batch_size": 256, "epochs": $epochs,
 "optimizer": {"type": "adagrad", "learning_rate": 0.05, "initial_accumulator_value": 0.1},
 "mode": "async", "partitioner": "fixed:2", "seed": 5, "eval_every_steps": 1000000}
JSON
  out="$run_dir/shardps-$w.log"
  deploy/run_local.sh "$job" --workers "$w" --run_dir "$run_dir/shardps-$w" \
    >"$out" 2>&1 || { echo "shardps with $w workers failed; see $out" >&2; exit 1; }
  # "final test accuracy: 0.7081 (loss 0.5658, AUC 0.7807 (ceiling 0.8756)) after 1 epochs,
  #  1172 steps, 11.9 s, mode async"
  line=$(grep "final test accuracy" "$out" | tail -1)
  a=$(sed -n 's/.*AUC \([0-9.]*\).*/\1/p' <<<"$line")
  c=$(sed -n 's/.*ceiling \([0-9.]*\).*/\1/p' <<<"$line")
  s=$(sed -n 's/.* steps, \([0-9.]*\) s,.*/\1/p' <<<"$line")
  r=$(awk -v e="$examples" -v n="$epochs" -v s="$s" 'BEGIN { printf "%.0f", e * n / s }')
  rate[shardps-$w]=$r
  auc[shardps-$w]=$a
  printf '%-10s %8s %10s %12s %9s %9s\n' shardps "$w" "$s" "$r" "$a" "${c:--}"
  if [ "$use_tf" = 1 ]; then
    "$python" bench/tf_peer/tf_ctr.py --train "$run_dir/train.bin" --test "$run_dir/test.bin" \
      --workers "$w" --epochs "$epochs" --out "$run_dir/tf-$w.json" \
      --log_dir "$run_dir/tf-$w" >"$run_dir/tf-$w.log" 2>&1 ||
      { echo "TensorFlow with $w workers failed; see $run_dir/tf-$w.log" >&2; exit 1; }
    read -r s r a < <("$python" -c '
import json, sys
d = json.load(open(sys.argv[1]))
print("%.1f %.0f %.4f" % (d["train_seconds"], d["examples_per_s"], d["evals"][-1]["auc"]))' \
      "$run_dir/tf-$w.json")
    rate[tf-$w]=$r
    auc[tf-$w]=$a
    printf '%-10s %8s %10s %12s %9s %9s\n' tensorflow "$w" "$s" "$r" "$a" -
  fi
done
if [ "$use_tf" = 1 ]; then
  for w in "${workers[@]}"; do
    awk -v w="$w" -v a="${rate[shardps-$w]}" -v b="${rate[tf-$w]}" -v x="${auc[shardps-$w]}" \
        -v y="${auc[tf-$w]}" 'BEGIN {
      printf "%s worker(s): shardps/TensorFlow examples/s %.2fx (target >= 5x: %s); AUC %s vs %s (%s)\n",
        w, a / b, (a / b >= 5) ? "met" : "missed", x, y, (x >= y) ? "equal or better" : "lower" }'
  done
fi
