#!/usr/bin/env bash
# The main job (README command one): a local shardps cluster — chief, 2 ps, 2 workers and an
# evaluator, each its own process at its own loopback address — trains the MLP 784-256-128-10 on
# Fashion-MNIST with a live progress bar, prints the final test accuracy and stops every
# process at the end or on Ctrl-C. Every daemon runs under a supervisor that restarts it when
# it dies, as Kubernetes would, so a kill -9 of any ps, worker or the chief ends in a finished
# job; the job's checkpoints go to runs/<time>/checkpoints unless the job file names a dir.
#
#   deploy/run_local.sh [JOB.json] [--workers N] [--ps N] [--run_dir DIR] [--tls on|off]
#                       [--python SCRIPT.py [--no_evaluator]]
#   SHARDPS_BIN=DIR deploy/run_local.sh ...   # prebuilt binaries in DIR/{ps_server,worker,...}
#
# --python SCRIPT.py: each worker is a copy of SCRIPT.py (a shardps.Worker: docs/python.md),
# run by $SHARDPS_PYTHON, or by the Python of deploy/python_env.sh --torch for a script that
# imports torch and of deploy/python_env.sh --shardps otherwise, for a job of model
# "external" (JOB.json declares its variables), and so is the evaluator (TF_CONFIG's task type
# "evaluator": a shardps.Evaluator, writing $SHARDPS_METRICS_FILE) unless --no_evaluator.
#
# --tls on (default): every connection is mutual TLS, with a CA and a certificate per daemon
# (and one for shardctl) made by deploy/certs.sh in RUN_DIR/tls; off: plaintext (loopback only).
#
# Each daemon's pid is in RUN_DIR/pids/<type>-<index>.pid (try: kill -9 "$(cat .../ps-1.pid)").
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
LAUNCHER=run_local
source deploy/lib.sh

JOB=deploy/jobs/fashion_mlp.json
NUM_WORKERS=2
NUM_PS=2
RUN_DIR=""
PYTHON_SCRIPT=""
NO_EVALUATOR=""
TLS=on
while [ $# -gt 0 ]; do
  case "$1" in
    --workers) NUM_WORKERS="$2"; shift 2 ;;
    --ps) NUM_PS="$2"; shift 2 ;;
    --run_dir) RUN_DIR="$2"; shift 2 ;;
    --python) PYTHON_SCRIPT="$2"; shift 2 ;;
    --no_evaluator) NO_EVALUATOR=1; shift ;;
    --tls) TLS="$2"; shift 2 ;;
    --tls=*) TLS="${1#--tls=}"; shift ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    -*) echo "run_local.sh: unknown flag $1" >&2; exit 2 ;;
    *) JOB="$1"; shift ;;
  esac
done
if [ ! -r "$JOB" ]; then echo "run_local.sh: cannot read job file \"$JOB\"" >&2; exit 2; fi
check_count "$NUM_WORKERS"; check_count "$NUM_PS"
check_tls "$TLS"
check_python_flags "$PYTHON_SCRIPT" "$NO_EVALUATOR"
shardps_build || exit 1
if [ -n "$PYTHON_SCRIPT" ]; then python_for "$PYTHON_SCRIPT" || exit 1; fi

RUN_DIR="${RUN_DIR:-runs/$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$RUN_DIR/pids" || exit 1
# Absolute, as the daemons' data root (--data_root: every file they write is under it).
RUN_DIR="$(cd "$RUN_DIR" && pwd -P)"

# Each task at its own loopback address, 127.A.B.1, .2, ... in a /24 chosen at random per run,
# all on the standard port 2222 as pods have: no port is picked free, released and bound later
# by a daemon, so nothing races for one, and daemons listen on their loopback address alone
# (rpc ListenAddress). A /24 where something already answers (another run, a listener on every
# interface) is passed over.
PORT=2222
SUBNET=""
for ((try = 0; try < 50; try++)); do
  candidate="127.$(( 64 + RANDOM % 64 )).$(( RANDOM % 256 ))"
  if ! (exec 3<>"/dev/tcp/$candidate.1/$PORT") 2>/dev/null; then SUBNET=$candidate; break; fi
done
if [ -z "$SUBNET" ]; then
  echo "run_local.sh: something answers on port $PORT at every loopback address tried" >&2
  exit 1
fi
addr() { echo "$SUBNET.$1:$PORT"; }  # addr HOST_NUMBER
list() {  # list N FIRST -> ["127.A.B.FIRST:2222", ...]
  local out="" i
  for ((i = 0; i < $1; i++)); do out+="${out:+, }\"$(addr $(( $2 + i )))\""; done
  echo "[$out]"
}
CHIEF_ADDRESS=$(addr 1)
EVALUATOR="\"evaluator\": [\"$(addr 2)\"], "
if [ -n "$NO_EVALUATOR" ]; then EVALUATOR=""; fi
CLUSTER="{\"chief\": [\"$CHIEF_ADDRESS\"], $EVALUATOR\"ps\": $(list "$NUM_PS" 3), \"worker\": $(list "$NUM_WORKERS" $(( 3 + NUM_PS )))}"
tf_config() { echo "{\"cluster\": $CLUSTER, \"task\": {\"type\": \"$1\", \"index\": $2}}"; }

# TLS: a certificate per daemon for its address, with its role and index as a URI
# (spiffe://shardps/ROLE/INDEX), and one for shardctl (deploy/lib.sh's tls_setup, tls_env).
specs=("chief-0=IP:$SUBNET.1,URI:spiffe://shardps/chief/0"
       "evaluator-0=IP:$SUBNET.2,URI:spiffe://shardps/evaluator/0"
       "shardctl=URI:spiffe://shardps/admin/0")
for ((i = 0; i < NUM_PS; i++)); do
  specs+=("ps-$i=IP:$SUBNET.$(( 3 + i )),URI:spiffe://shardps/ps/$i")
done
for ((i = 0; i < NUM_WORKERS; i++)); do
  specs+=("worker-$i=IP:$SUBNET.$(( 3 + NUM_PS + i )),URI:spiffe://shardps/worker/$i")
done
tls_setup "$RUN_DIR/tls" "${specs[@]}" || exit 1

# shellcheck disable=SC2317  # reached through the traps below
cleanup() {
  trap - EXIT INT TERM
  stop_supervisors
}
trap cleanup EXIT
trap 'echo; echo "interrupted: stopping the cluster" >&2; exit 130' INT TERM

CHECKPOINT_DIR="$RUN_DIR/checkpoints"
# Every C++ daemon serves Prometheus /metrics on port 9100 of its own address, with its TLS
# (docs/observability.md).
METRICS_PORT=9100
# Two runs for TensorBoard: chief (training) and evaluator (docs/observability.md).
TENSORBOARD_DIR="$RUN_DIR/tensorboard"
for ((i = 0; i < NUM_PS; i++)); do
  tls_env "ps-$i"
  supervise ps "$i" env "${TLS_ENV[@]}" "$BIN/ps_server/ps" --data_root="$RUN_DIR" \
    --metrics_port="$METRICS_PORT"
done
for ((i = 0; i < NUM_WORKERS; i++)); do
  tls_env "worker-$i"
  if [ -n "$PYTHON_SCRIPT" ]; then
    supervise worker "$i" env "${TLS_ENV[@]}" SHARDPS_METRICS_PORT="$METRICS_PORT" \
      "$PYTHON" "$PYTHON_SCRIPT"
  else
    supervise worker "$i" env "${TLS_ENV[@]}" "$BIN/worker/worker" --threads=1 \
      --metrics_port="$METRICS_PORT"
  fi
done
tls_env evaluator-0
if [ -z "$PYTHON_SCRIPT" ]; then
  supervise evaluator 0 env "${TLS_ENV[@]}" "$BIN/evaluator/evaluator" --data_root="$RUN_DIR" \
    --metrics_port="$METRICS_PORT" \
    --metrics_file="$RUN_DIR/metrics.jsonl" \
    --tensorboard_dir="$TENSORBOARD_DIR/evaluator"
elif [ -n "$EVALUATOR" ]; then
  SHARDPS_METRICS_FILE="$RUN_DIR/metrics.jsonl" supervise evaluator 0 \
    env "${TLS_ENV[@]}" SHARDPS_METRICS_PORT="$METRICS_PORT" \
    SHARDPS_TENSORBOARD_DIR="$TENSORBOARD_DIR/evaluator" "$PYTHON" "$PYTHON_SCRIPT"
fi
tls_env chief-0
supervise chief 0 env "${TLS_ENV[@]}" "$BIN/coordinator/chief" --job="$JOB" \
  --checkpoint_dir="$CHECKPOINT_DIR" --data_root="$RUN_DIR" \
  --tensorboard_dir="$TENSORBOARD_DIR/chief" --metrics_port="$METRICS_PORT"
CHIEF_SUPERVISOR=${SUPERVISORS[-1]}

echo "cluster: chief $CHIEF_ADDRESS, $NUM_PS ps, $NUM_WORKERS workers${PYTHON_SCRIPT:+ running $PYTHON_SCRIPT}${EVALUATOR:+, evaluator}, TLS $TLS; logs in $RUN_DIR" >&2
echo "job: $JOB; checkpoints in $CHECKPOINT_DIR (unless the job file names a dir)" >&2
tls_env shardctl
SHARDCTL=(env "${TLS_ENV[@]}" "$BIN/coordinator/cli/shardctl" --chief="$CHIEF_ADDRESS")
follow_job "$CHIEF_SUPERVISOR" "${SHARDCTL[@]}"
echo "metrics: $RUN_DIR/metrics.jsonl; logs: $RUN_DIR/*.log; checkpoints: $CHECKPOINT_DIR" >&2
exit "$JOB_RC"
