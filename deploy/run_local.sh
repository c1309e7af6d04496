#!/usr/bin/env bash
# The main job (README command one): a local shardps cluster — chief, 2 ps, 2 workers and an
# evaluator, each its own process on free localhost ports — trains the MLP 784-256-128-10 on
# Fashion-MNIST with a live progress bar, prints the final test accuracy and stops every
# process at the end or on Ctrl-C.
#
#   deploy/run_local.sh [JOB.json] [--workers N] [--ps N]
#   SHARDPS_BIN=DIR deploy/run_local.sh ...   # prebuilt binaries in DIR/{ps_server,worker,...}
set -uo pipefail
cd "$(dirname "$0")/.."

JOB=deploy/jobs/fashion_mlp.json
NUM_WORKERS=2
NUM_PS=2
while [ $# -gt 0 ]; do
  case "$1" in
    --workers) NUM_WORKERS="$2"; shift 2 ;;
    --ps) NUM_PS="$2"; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    -*) echo "run_local.sh: unknown flag $1" >&2; exit 2 ;;
    *) JOB="$1"; shift ;;
  esac
done
if [ ! -r "$JOB" ]; then echo "run_local.sh: cannot read job file \"$JOB\"" >&2; exit 2; fi

if [ -n "${SHARDPS_BIN:-}" ]; then
  # Prebuilt binaries (a container image, a copy on a GPU host): no setup, no build.
  BIN="$SHARDPS_BIN"
else
  deploy/setup.sh || exit 1
  echo "building shardps (the first build takes a few minutes)..." >&2
  bazel build //ps_server:ps //worker:worker //coordinator:chief //evaluator:evaluator \
    //coordinator/cli:shardctl >&2 || exit 1
  BIN=bazel-bin
fi

RUN_DIR="runs/$(date +%Y%m%d-%H%M%S)"
mkdir -p "$RUN_DIR"

# A port nobody listens on, from a random start; each handed out once.
used_ports=" "
free_port() {
  local port=$(( 20000 + RANDOM % 30000 ))
  while true; do
    if [[ "$used_ports" != *" $port "* ]] && ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      used_ports+="$port "
      echo "$port"
      return
    fi
    port=$(( port + 1 ))
  done
}

list() {  # list N -> ["127.0.0.1:p1", ...]
  local out="" i
  for ((i = 0; i < $1; i++)); do
    out+="${out:+, }\"127.0.0.1:$(free_port)\""
  done
  echo "[$out]"
}
CHIEF_PORT=$(free_port)
CLUSTER="{\"chief\": [\"127.0.0.1:$CHIEF_PORT\"], \"ps\": $(list "$NUM_PS"), \"worker\": $(list "$NUM_WORKERS"), \"evaluator\": [\"127.0.0.1:$(free_port)\"]}"
tf_config() { echo "{\"cluster\": $CLUSTER, \"task\": {\"type\": \"$1\", \"index\": $2}}"; }

PIDS=()
cleanup() {
  trap - EXIT INT TERM
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  sleep 1
  for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  wait 2>/dev/null
}
trap cleanup EXIT
trap 'echo; echo "interrupted: stopping the cluster" >&2; exit 130' INT TERM

start() {  # start TYPE INDEX BINARY [FLAGS...]
  local type=$1 index=$2 bin=$3; shift 3
  TF_CONFIG="$(tf_config "$type" "$index")" "$bin" "$@" >"$RUN_DIR/$type-$index.log" 2>&1 &
  PIDS+=($!)
}

for ((i = 0; i < NUM_PS; i++)); do start ps "$i" "$BIN/ps_server/ps" --bind_host=127.0.0.1; done
for ((i = 0; i < NUM_WORKERS; i++)); do
  start worker "$i" "$BIN/worker/worker" --bind_host=127.0.0.1 --threads=1
done
start evaluator 0 "$BIN/evaluator/evaluator" --metrics_file="$RUN_DIR/metrics.jsonl"
start chief 0 "$BIN/coordinator/chief" --bind_host=127.0.0.1 --job="$JOB"
CHIEF_PID=${PIDS[-1]}

echo "cluster: chief 127.0.0.1:$CHIEF_PORT, $NUM_PS ps, $NUM_WORKERS workers, evaluator; logs in $RUN_DIR" >&2
echo "job: $JOB" >&2
for _ in $(seq 100); do
  "$BIN/coordinator/cli/shardctl" --chief="127.0.0.1:$CHIEF_PORT" status >/dev/null 2>&1 && break
  kill -0 "$CHIEF_PID" 2>/dev/null || break
  sleep 0.2
done
"$BIN/coordinator/cli/shardctl" --chief="127.0.0.1:$CHIEF_PORT" watch
rc=$?
if [ "$rc" -eq 130 ]; then
  echo "interrupted: stopping the cluster" >&2
  exit 130  # the EXIT trap stops every process
fi
wait "$CHIEF_PID" 2>/dev/null
echo "metrics: $RUN_DIR/metrics.jsonl; logs: $RUN_DIR/*.log" >&2
exit $rc
