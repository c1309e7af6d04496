#!/usr/bin/env bash
# Runs one Python test module (run_unittest.py) with the virtualenv's Python and the shardps
# package from the runfiles. Without SHARDPS_VENV every case is skipped, saying why.
set -euo pipefail
runfiles="${TEST_SRCDIR:?run me with bazel test}/${TEST_WORKSPACE:-shardps}"
python=python3
if [ -n "${SHARDPS_VENV:-}" ] && [ -x "$SHARDPS_VENV/bin/python" ]; then
  python="$SHARDPS_VENV/bin/python"
else
  export SHARDPS_SKIP_ALL="SHARDPS_VENV is not set (deploy/test.sh sets it to deploy/python_env.sh's virtualenv)"
fi
export PYTHONPATH="$runfiles/python"
exec "$python" "$runfiles/python/tests/run_unittest.py" "$runfiles/$1"
