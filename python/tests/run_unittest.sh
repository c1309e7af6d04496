#!/usr/bin/env bash
# Runs one Python test module (run_unittest.py) with the virtualenv's Python and the shardps
# package from the runfiles: SHARDPS_VENV's (deploy/python_env.sh), or with --torch
# SHARDPS_TORCH_VENV's (deploy/python_env.sh --torch, for shardps.torch and the examples).
# Without it every case is skipped, saying why.
#
#   run_unittest.sh [--torch] python/tests/X_test.py
set -euo pipefail
runfiles="${TEST_SRCDIR:?run me with bazel test}/${TEST_WORKSPACE:-shardps}"
var=SHARDPS_VENV
how="deploy/python_env.sh"
if [ "${1:-}" = "--torch" ]; then
  var=SHARDPS_TORCH_VENV
  how="deploy/python_env.sh --torch"
  shift
fi
venv="${!var:-}"
python=python3
if [ -n "$venv" ] && [ -x "$venv/bin/python" ]; then
  python="$venv/bin/python"
else
  export SHARDPS_SKIP_ALL="$var is not set (deploy/test.sh sets it to $how's virtualenv)"
fi
export PYTHONPATH="$runfiles/python"
exec "$python" "$runfiles/python/tests/run_unittest.py" "$runfiles/$1"
