#!/usr/bin/env bash
# bazel run //bench:python_client_bench -- [--reps N] [--rounds R] [--json]
# Runs bench/python_client_bench.py (its docstring says what it measures) with the Python of
# deploy/python_env.sh and the shardps package, ps and C++ loop from the runfiles.
set -euo pipefail
runfiles="${RUNFILES_DIR:-$0.runfiles}/shardps"
venv=$(cd "${BUILD_WORKSPACE_DIRECTORY:-$runfiles}" && deploy/python_env.sh)
PYTHONPATH="$runfiles/python" exec "$venv/bin/python" "$runfiles/bench/python_client_bench.py" \
  --root "$runfiles" "$@"
