#!/usr/bin/env bash
# Time to accuracy: shardps against TensorFlow's ParameterServerStrategy on the same job
# (Fashion-MNIST, MLP 784-256-128-10, Adam 1e-3, batch 256 per worker, 2 ps, 10 epochs), and
# shardps' single process as the limit. Builds the benchmark, makes TensorFlow's virtualenv
# (bench/tf_peer/venv.sh: tensorflow-cpu and numpy from PyPI, under ~/.cache/shardps/tf-venv)
# unless --no_tf, and runs every configuration --runs times in alternating rounds: about 35
# minutes for "all" (3 runs; TensorFlow at 1/10/20/50 steps per function) on this 2-core VM.
# docs/tensorflow-comparison.md has the rules (interpolated times to targets fixed before
# the runs, busy runs left out, the one-process limit beside). A quick look:
#
#   bench/time_to_accuracy.sh --runs=1 --epochs=2 --configs=tf:1,async:1,sync:1
#   bench/time_to_accuracy.sh [--runs=N] [--configs=LIST] [--epochs=E] [--json] [--no_tf]
#
# Every other flag goes to the benchmark (bazel-bin/bench/time_to_accuracy --help lists
# them). The table goes to stdout; with --json, one JSON object does and the table goes to
# stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

use_tf=1
args=()
for arg in "$@"; do
  case "$arg" in
    --no_tf) use_tf=0 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) args+=("$arg") ;;
  esac
done

echo "time_to_accuracy: building..." >&2
bazel build //bench:time_to_accuracy >&2

tf_args=()
if [ "$use_tf" = 1 ]; then
  venv=$(bench/tf_peer/venv.sh)
  tf_args=("--tf_python=$venv/bin/python")
fi
exec bazel-bin/bench/time_to_accuracy "${tf_args[@]}" "${args[@]}"
