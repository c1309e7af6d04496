#!/usr/bin/env bash
# The main job (README command one): a local shardps cluster — chief, 2 ps, 2 workers and an
# evaluator, each its own process on free localhost ports — trains the MLP 784-256-128-10 on
# Fashion-MNIST with a live progress bar, prints the final test accuracy and stops every
# process at the end or on Ctrl-C. Every daemon runs under a supervisor that restarts it when
# it dies, as Kubernetes would, so a kill -9 of any ps, worker or the chief ends in a finished
# job; the job's checkpoints go to runs/<time>/checkpoints unless the job file names a dir.
#
#   deploy/run_local.sh [JOB.json] [--workers N] [--ps N] [--run_dir DIR]
#   SHARDPS_BIN=DIR deploy/run_local.sh ...   # prebuilt binaries in DIR/{ps_server,worker,...}
#
# Each daemon's pid is in RUN_DIR/pids/<type>-<index>.pid (try: kill -9 "$(cat .../ps-1.pid)").
set -uo pipefail
cd "$(dirname "$0")/.."
LAUNCHER=run_local
source deploy/lib.sh

JOB=deploy/jobs/fashion_mlp.json
NUM_WORKERS=2
NUM_PS=2
RUN_DIR=""
while [ $# -gt 0 ]; do
  case "$1" in
    --workers) NUM_WORKERS="$2"; shift 2 ;;
    --ps) NUM_PS="$2"; shift 2 ;;
    --run_dir) RUN_DIR="$2"; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    -*) echo "run_local.sh: unknown flag $1" >&2; exit 2 ;;
    *) JOB="$1"; shift ;;
  esac
done
if [ ! -r "$JOB" ]; then echo "run_local.sh: cannot read job file \"$JOB\"" >&2; exit 2; fi
check_count "$NUM_WORKERS"; check_count "$NUM_PS"
shardps_build || exit 1

RUN_DIR="${RUN_DIR:-runs/$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$RUN_DIR/pids" || exit 1

# A port nobody listens on, from a random start; each handed out once. (A daemon binds it a
# moment later; on the rare collision with another program, the daemon exits 1 and its
# supervisor below tries again, but keeps the address: peers know it from TF_CONFIG.)
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

cleanup() {
  trap - EXIT INT TERM
  stop_supervisors
}
trap cleanup EXIT
trap 'echo; echo "interrupted: stopping the cluster" >&2; exit 130' INT TERM

CHECKPOINT_DIR="$RUN_DIR/checkpoints"
for ((i = 0; i < NUM_PS; i++)); do supervise ps "$i" "$BIN/ps_server/ps" --bind_host=127.0.0.1; done
for ((i = 0; i < NUM_WORKERS; i++)); do
  supervise worker "$i" "$BIN/worker/worker" --bind_host=127.0.0.1 --threads=1
done
supervise evaluator 0 "$BIN/evaluator/evaluator" --metrics_file="$RUN_DIR/metrics.jsonl"
supervise chief 0 "$BIN/coordinator/chief" --bind_host=127.0.0.1 --job="$JOB" \
  --checkpoint_dir="$CHECKPOINT_DIR"
CHIEF_SUPERVISOR=${SUPERVISORS[-1]}

echo "cluster: chief 127.0.0.1:$CHIEF_PORT, $NUM_PS ps, $NUM_WORKERS workers, evaluator; logs in $RUN_DIR" >&2
echo "job: $JOB; checkpoints in $CHECKPOINT_DIR (unless the job file names a dir)" >&2
SHARDCTL=("$BIN/coordinator/cli/shardctl" --chief="127.0.0.1:$CHIEF_PORT")
follow_job "$CHIEF_SUPERVISOR" "${SHARDCTL[@]}"
echo "metrics: $RUN_DIR/metrics.jsonl; logs: $RUN_DIR/*.log; checkpoints: $CHECKPOINT_DIR" >&2
exit "$JOB_RC"
