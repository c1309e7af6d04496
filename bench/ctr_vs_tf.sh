#!/usr/bin/env bash
# The click model: shardps against TensorFlow's ParameterServerStrategy, on the same
# generated data and the same model, 2 ps, 1 and 2 async workers each: training
# examples/s, the held-out AUC at the end beside the planted model's (the ceiling), and the
# time each system takes to reach a given AUC. The tables go to stdout.
#
#   bench/ctr_vs_tf.sh [--scale=1] [--examples=300000] [--epochs=2] [--evals_per_epoch=2]
#                      [--workers=1,2] [--ps=2] [--batch=256] [--bottom=64,16] [--top=64,32]
#                      [--backend=cpu] [--steps_in_flight=0] [--no_tf] [--out_dir=runs]
#
# --ps, --batch, --bottom and --top change both sides alike (the defaults are below); --backend
# (cpu, gpu or auto; TensorFlow's side runs on the CPU) and --steps_in_flight (0: the job's
# default, 2 with one worker and 1 with several; or 1 or 2) are the shardps job's.
# Each run goes to a new directory under --out_dir. With SHARDPS_BIN=DIR the binaries are
# taken from DIR (as bazel-bin lays them out) and nothing is built (bench:ctr_vs_tf_smoke_test).
#
# The data: synthetic_ctr preset criteo_like (13 dense features, 26 one-hot tables of
# Criteo-like sizes, 2x10^7 rows in all at --scale=1; smaller scales shrink every table), the
# training split of --examples and a held-out split of --examples/10 after it. The model:
# dlrm:bottom=64,16;top=64,32;dim=16;interaction=concat;pooling=sum; Adagrad, learning rate
# 0.05, initial accumulator 0.1, batch 256 per step; "fixed:<ps>" shards for every variable.
# shardps runs as deploy/run_local.sh runs it (chief, the ps, the workers, an evaluator); the
# peer is bench/tf_peer/tf_ctr.py (TensorFlow from bench/tf_peer/venv.sh, made on first use
# unless --no_tf). The examples go to the peer through `ctr_tool export` (fixed-size records),
# generated once per run into the run directory.
#
# Both sides evaluate the held-out split --evals_per_epoch times an epoch: TensorFlow's clock
# stops for each evaluation; shardps' evaluator runs beside the training on the same cores,
# and each of its evaluations carries the job's time when it read the ps (job_elapsed_s in
# metrics.jsonl). Neither side writes checkpoints while it trains (shardps writes its final
# one after the clock stops). Time to AUC: the target is the lower of the two systems' best
# AUC in the run, so both reach it; each system's time is that of its first evaluation at or
# above it.
set -euo pipefail
cd "$(dirname "$0")/.."

scale=1
examples=300000
epochs=2
evals_per_epoch=2
workers_list="1,2"
backend=cpu
num_ps=2
steps_in_flight=0
batch=256
bottom=64,16
top=64,32
use_tf=1
out_dir=runs
for arg in "$@"; do
  case "$arg" in
    --scale=*) scale="${arg#*=}" ;;
    --examples=*) examples="${arg#*=}" ;;
    --epochs=*) epochs="${arg#*=}" ;;
    --evals_per_epoch=*) evals_per_epoch="${arg#*=}" ;;
    --workers=*) workers_list="${arg#*=}" ;;
    --backend=*) backend="${arg#*=}" ;;
    --ps=*) num_ps="${arg#*=}" ;;
    --steps_in_flight=*) steps_in_flight="${arg#*=}" ;;
    --batch=*) batch="${arg#*=}" ;;
    --bottom=*) bottom="${arg#*=}" ;;
    --top=*) top="${arg#*=}" ;;
    --no_tf) use_tf=0 ;;
    --out_dir=*) out_dir="${arg#*=}" ;;
    -h|--help) sed -n '2,35p' "$0"; exit 0 ;;
    *) echo "ctr_vs_tf.sh: unknown flag $arg" >&2; exit 2 ;;
  esac
done
case "$backend" in
  cpu|gpu|auto) ;;
  *) echo "ctr_vs_tf.sh: --backend takes cpu, gpu or auto, got \"$backend\"" >&2; exit 2 ;;
esac
for layers in "$bottom" "$top"; do
  if ! [[ "$layers" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]]; then
    echo "ctr_vs_tf.sh: --bottom and --top take layer widths like 64,16, got \"$layers\"" >&2
    exit 2
  fi
done
if ! [[ "$num_ps" =~ ^[1-9][0-9]?$ && "$batch" =~ ^[1-9][0-9]*$ && "$steps_in_flight" =~ ^[012]$ ]]; then
  echo "ctr_vs_tf.sh: --ps takes 1..99, --batch a positive number, --steps_in_flight 0, 1 or 2" >&2
  exit 2
fi
for n in "$scale" "$examples" "$epochs" "$evals_per_epoch"; do
  if ! [[ "$n" =~ ^[0-9]+([.][0-9]+)?$ ]]; then
    echo "ctr_vs_tf.sh: not a number: $n" >&2
    exit 2
  fi
done
test_examples=$((examples / 10))
steps_per_epoch=$(((examples + batch - 1) / batch))
eval_every=$(((steps_per_epoch + evals_per_epoch - 1) / evals_per_epoch))
spec="synthetic_ctr:preset=criteo_like,scale=${scale},seed=7"
model="dlrm:bottom=$bottom;top=$top;dim=16;interaction=concat;pooling=sum"
mkdir -p "$out_dir"
run_dir="$(cd "$out_dir" && pwd)/ctr_vs_tf-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$run_dir"
if [ -n "${SHARDPS_BIN:-}" ]; then
  bin="$SHARDPS_BIN"
else
  echo "ctr_vs_tf: building; run directory $run_dir" >&2
  bazel build //data/ctr:ctr_tool //bench:host_stats_tool >&2  # run_local.sh builds the daemons
  bin=bazel-bin
fi
# The host's load and the CPU that other processes use while this runs (bench/host_stats.h).
host_start=$("$bin/bench/host_stats_tool" start --pid=$$)

python=python3
if [ "$use_tf" = 1 ]; then
  python="$(bench/tf_peer/venv.sh)/bin/python"
  echo "ctr_vs_tf: exporting the examples for TensorFlow" >&2
  "$bin/data/ctr/ctr_tool" export --spec="$spec,examples=$examples" --out="$run_dir/train.bin" >&2
  "$bin/data/ctr/ctr_tool" export --spec="$spec,examples=$test_examples,offset=$examples" \
    --out="$run_dir/test.bin" >&2
fi

IFS=, read -ra workers <<<"$workers_list"
for w in "${workers[@]}"; do
  job="$run_dir/job-$w.json"
  cat >"$job" <<JSON
{"name": "ctrbench", "model": "$model",
 "dataset": "$spec,examples=$examples,test=$test_examples",
 "batch_size": $batch, "epochs": $epochs, "backend": "$backend",
 "optimizer": {"type": "adagrad", "learning_rate": 0.05, "initial_accumulator_value": 0.1},
 "mode": "async", "steps_in_flight": $steps_in_flight, "partitioner": "fixed:$num_ps", "seed": 5, "eval_every_steps": $eval_every,
 "checkpoint": {"dir": "$run_dir/shardps-$w-checkpoints", "every_steps": 100000000}}
JSON
  echo "ctr_vs_tf: shardps, $w worker(s)" >&2
  deploy/run_local.sh "$job" --workers "$w" --ps "$num_ps" --run_dir "$run_dir/shardps-$w" \
    >"$run_dir/shardps-$w.log" 2>&1 ||
    { echo "shardps with $w workers failed; see $run_dir/shardps-$w.log" >&2; exit 1; }
  if [ "$use_tf" = 1 ]; then
    echo "ctr_vs_tf: TensorFlow, $w worker(s)" >&2
    "$python" bench/tf_peer/tf_ctr.py --train "$run_dir/train.bin" --test "$run_dir/test.bin" \
      --workers "$w" --ps "$num_ps" --batch_size "$batch" --bottom "$bottom" --top "$top" \
      --epochs "$epochs" --evals_per_epoch "$evals_per_epoch" \
      --out "$run_dir/tf-$w.json" --log_dir "$run_dir/tf-$w" >"$run_dir/tf-$w.log" 2>&1 ||
      { echo "TensorFlow with $w workers failed; see $run_dir/tf-$w.log" >&2; exit 1; }
  fi
done

# The tables, from shardps' logs and metrics and TensorFlow's result files.
"$python" - "$run_dir" "$examples" "$epochs" "$use_tf" "${workers[@]}" <<'PY'
import json, re, sys

run_dir, examples, epochs, use_tf = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
workers = sys.argv[5:]

def shardps(w):
  # "final test accuracy: 0.8068 (loss 0.4406, AUC 0.7416 (ceiling 0.8764)) after 1 epoch,
  #  1172 steps, 8.0 s, mode async"
  line = [l for l in open(f"{run_dir}/shardps-{w}.log") if "final test accuracy" in l][-1]
  seconds = float(re.search(r" steps, ([0-9.]+) s,", line).group(1))
  auc = float(re.search(r"AUC ([0-9.]+)", line).group(1))
  ceiling = re.search(r"ceiling ([0-9.]+)", line)
  curve = []
  for l in open(f"{run_dir}/shardps-{w}/metrics.jsonl"):
    r = json.loads(l)
    if r.get("job_elapsed_s", 0) > 0 and "auc" in r:
      curve.append((r["job_elapsed_s"], r["auc"]))
  curve.append((seconds, auc))
  return {"seconds": seconds, "rate": examples * epochs / seconds, "auc": auc,
          "ceiling": ceiling.group(1) if ceiling else "-", "curve": sorted(curve)}

def tensorflow(w):
  d = json.load(open(f"{run_dir}/tf-{w}.json"))
  return {"seconds": d["train_seconds"], "rate": d["examples_per_s"],
          "auc": d["evals"][-1]["auc"], "ceiling": "-",
          "curve": [(e["train_seconds"], e["auc"]) for e in d["evals"]]}

def time_to(curve, target):
  return next((t for t, a in curve if a >= target - 1e-12), None)

print("%-10s %8s %10s %12s %9s %9s" % ("system", "workers", "seconds", "examples/s", "AUC", "ceiling"))
results = {}
for w in workers:
  results[("shardps", w)] = shardps(w)
  if use_tf:
    results[("tensorflow", w)] = tensorflow(w)
  for system in ("shardps", "tensorflow"):
    r = results.get((system, w))
    if r:
      print("%-10s %8s %10.1f %12.0f %9.4f %9s" % (system, w, r["seconds"], r["rate"], r["auc"], r["ceiling"]))
print()
print("time-to-AUC curves (training seconds, held-out AUC):")
for (system, w), r in results.items():
  print("  %-10s %s worker(s): %s" % (system, w, ", ".join("%.1f s %.4f" % p for p in r["curve"])))
if use_tf:
  print()
  for w in workers:
    s, t = results[("shardps", w)], results[("tensorflow", w)]
    ratio = s["rate"] / t["rate"]
    print("%s worker(s): shardps/TensorFlow examples/s %.2fx (target >= 5x: %s); final AUC %.4f vs %.4f (%s)"
          % (w, ratio, "met" if ratio >= 5 else "missed", s["auc"], t["auc"],
             "equal or better" if s["auc"] >= t["auc"] else "lower"))
    target = min(max(a for _, a in s["curve"]), max(a for _, a in t["curve"]))
    ts, tt = time_to(s["curve"], target), time_to(t["curve"], target)
    print("%s worker(s): time to AUC %.4f (the lower best): shardps %.1f s, TensorFlow %.1f s: %.2fx"
          % (w, target, ts, tt, tt / ts))
PY
"$bin/bench/host_stats_tool" line --pid=$$ "$host_start"
