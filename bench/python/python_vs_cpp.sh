#!/usr/bin/env bash
# bench/python/python_vs_cpp.sh [--rounds R] [--epochs E] [--target ACC]: the main job's MLP
# through C++ workers and through PyTorch workers, alternating (python_vs_cpp.py says what
# it prints). Builds the daemons, runs with the torch virtualenv (deploy/python_env.sh --torch).
set -euo pipefail
cd "$(dirname "$0")/../.."
deploy/setup.sh
bazel build //ps_server:ps //worker:worker //coordinator:chief //evaluator:evaluator \
  //coordinator/cli:shardctl //bench:host_stats_tool //data/ctr:ctr_tool >&2
venv=$(deploy/python_env.sh --torch)
exec "$venv/bin/python" bench/python/python_vs_cpp.py --host_stats bazel-bin/bench/host_stats_tool "$@"
