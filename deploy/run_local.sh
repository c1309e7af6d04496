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
for n in "$NUM_WORKERS" "$NUM_PS"; do
  if ! [[ "$n" =~ ^[1-9][0-9]?$ ]]; then
    echo "run_local.sh: --workers and --ps take a number 1..99, got \"$n\"" >&2; exit 2
  fi
done

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

# Exit codes (README "Exit codes"): 0 done, 1 error, 2 bad command line or config, 4 job
# failed or cancelled, 5 interrupted (restart me), 6 orphaned (no chief for too long).
exit_reason() {
  local rc=$1
  if [ "$rc" -gt 128 ]; then echo "killed by signal $((rc - 128))"; else echo "exit code $rc"; fi
}

SUPERVISORS=()
# supervise TYPE INDEX BINARY [FLAGS...]: runs the daemon, restarting it (1 s, doubling to
# 30 s between tries) whenever it dies in a way a restart can mend; a daemon that exits 0
# (done), 2 (bad configuration), 4 (job failed) or 6 (orphaned) stays down.
supervise() {
  local type=$1 index=$2 bin=$3; shift 3
  local name="$type-$index" log="$RUN_DIR/$type-$index.log" delay=1 rc="" pid="" started=0
  (
    trap 'kill -TERM "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; exit 0' TERM
    while true; do
      TF_CONFIG="$(tf_config "$type" "$index")" "$bin" "$@" >>"$log" 2>&1 &
      pid=$!
      echo "$pid" >"$RUN_DIR/pids/$name.pid"
      started=$SECONDS
      wait "$pid" 2>/dev/null
      rc=$?
      case "$rc" in 0|2|4|6) exit "$rc" ;; esac
      if [ $((SECONDS - started)) -gt 60 ]; then delay=1; fi
      echo "run_local: $name $(exit_reason "$rc"); restarting it in ${delay} s, as Kubernetes would (log: $log)" >&2
      sleep "$delay"
      delay=$(( delay * 2 > 30 ? 30 : delay * 2 ))
    done
  ) &
  SUPERVISORS+=($!)
}

cleanup() {
  trap - EXIT INT TERM
  # Supervisors first, so that nothing is restarted; each stops its daemon.
  for pid in "${SUPERVISORS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  sleep 1
  for f in "$RUN_DIR"/pids/*.pid; do [ -e "$f" ] && kill -KILL "$(cat "$f")" 2>/dev/null; done
  for pid in "${SUPERVISORS[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  wait 2>/dev/null
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
for _ in $(seq 100); do
  "${SHARDCTL[@]}" status >/dev/null 2>&1 && break
  kill -0 "$CHIEF_SUPERVISOR" 2>/dev/null || break
  sleep 0.2
done
while true; do
  "${SHARDCTL[@]}" watch
  rc=$?
  if [ "$rc" -eq 130 ]; then
    echo "interrupted: stopping the cluster" >&2
    exit 130  # the EXIT trap stops every process
  fi
  # The chief may be restarting (killed, or interrupted): follow it again while its
  # supervisor still runs; it resumes the job from its checkpoint directory.
  if [ "$rc" -eq 3 ] && kill -0 "$CHIEF_SUPERVISOR" 2>/dev/null; then
    echo "run_local: the chief is unreachable; waiting for it to come back..." >&2
    sleep 2
    continue
  fi
  break
done
wait "$CHIEF_SUPERVISOR" 2>/dev/null
chief_rc=$?
echo "metrics: $RUN_DIR/metrics.jsonl; logs: $RUN_DIR/*.log; checkpoints: $CHECKPOINT_DIR" >&2
if [ "$rc" -eq 0 ] && [ "$chief_rc" -ne 0 ]; then rc=$chief_rc; fi
exit $rc
