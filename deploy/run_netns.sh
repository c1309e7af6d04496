#!/usr/bin/env bash
# The main job as on separate hosts: like deploy/run_local.sh, but every task (chief, each ps,
# each worker, the evaluator) runs in its own network namespace PREFIX-TYPE-INDEX (pod name
# style, e.g. shardps-ps-1) with its own address on a private subnet, joined by veth pairs to
# one bridge PREFIX-br0. Each namespace gets /etc/netns/NAME/hosts (ip netns exec mounts it
# over /etc/hosts) with Kubernetes-style DNS names, PREFIX-TYPE-INDEX.PREFIX-TYPE.default.svc
# and the short pod name, and every daemon gets a TF_CONFIG of those names at port 2222, as a
# StatefulSet's pods do. Needs root (CAP_NET_ADMIN) and iproute2. The namespaces, links, hosts
# files and processes are removed at the end, on Ctrl-C or SIGTERM, and, left over from a run
# that was killed, by the next run with the same prefix before it starts.
#
#   deploy/run_netns.sh [JOB.json] [--workers N] [--ps N] [--run_dir DIR] [--keep]
#                       [--prefix NAME] [--subnet A.B.C] [--cleanup] [--tls on|off]
#                       [--python SCRIPT.py [--no_evaluator]]
#   --keep      leave the namespaces, bridge and hosts files up after the job (the daemons
#               stop); the next run or --cleanup removes them
#   --prefix    names of namespaces and links (default shardps; a-z0-9, at most 10 characters)
#   --subnet    the /24 the tasks live on (default 10.231.0: the bridge is .1, the tasks .2 up)
#   --cleanup   only remove what a run with this prefix left behind
#   --python    the workers and the evaluator are copies of SCRIPT.py, as with run_local.sh
#   --tls       on (default): mutual TLS, a certificate per daemon for its DNS names and
#               address, as with run_local.sh; off: plaintext
#   SHARDPS_BIN=DIR deploy/run_netns.sh ...   # prebuilt binaries in DIR/{ps_server,worker,...}
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
LAUNCHER=run_netns
source deploy/lib.sh

JOB=deploy/jobs/fashion_mlp.json
NUM_WORKERS=2
NUM_PS=2
RUN_DIR=""
KEEP=0
CLEANUP_ONLY=0
PREFIX=shardps
# 10.231.0.0/24: a private (RFC 1918) range that the usual neighbours leave alone — Docker
# takes 172.17+/16, Kubernetes services 10.96.0.0/12 and pods 10.244.0.0/16 (10.42/10.43 on
# k3s), home and office LANs mostly 192.168.x and 10.0-10.10. It is checked against this
# machine's addresses and routes before use.
SUBNET=10.231.0
PYTHON_SCRIPT=""
NO_EVALUATOR=""
TLS=on
while [ $# -gt 0 ]; do
  case "$1" in
    --workers) NUM_WORKERS="$2"; shift 2 ;;
    --ps) NUM_PS="$2"; shift 2 ;;
    --run_dir) RUN_DIR="$2"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --prefix) PREFIX="$2"; shift 2 ;;
    --subnet) SUBNET="$2"; shift 2 ;;
    --cleanup) CLEANUP_ONLY=1; shift ;;
    --python) PYTHON_SCRIPT="$2"; shift 2 ;;
    --no_evaluator) NO_EVALUATOR=1; shift ;;
    --tls) TLS="$2"; shift 2 ;;
    --tls=*) TLS="${1#--tls=}"; shift ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    -*) echo "run_netns.sh: unknown flag $1" >&2; exit 2 ;;
    *) JOB="$1"; shift ;;
  esac
done
check_count "$NUM_WORKERS"; check_count "$NUM_PS"
check_tls "$TLS"
check_python_flags "$PYTHON_SCRIPT" "$NO_EVALUATOR"
# A link name has at most 15 characters: PREFIX-v201 must fit.
if ! [[ "$PREFIX" =~ ^[a-z][a-z0-9]{0,9}$ ]]; then
  echo "run_netns.sh: --prefix takes a-z0-9 starting with a letter, at most 10 characters, got \"$PREFIX\"" >&2
  exit 2
fi
octet='(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])'
if ! [[ "$SUBNET" =~ ^$octet\.$octet\.$octet$ ]]; then
  echo "run_netns.sh: --subnet takes the first three numbers of a /24, e.g. 10.231.0, got \"$SUBNET\"" >&2
  exit 2
fi
if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null; then
  echo "run_netns.sh: needs root (CAP_NET_ADMIN) and iproute2's ip to make network namespaces" >&2
  exit 1
fi

BRIDGE="$PREFIX-br0"
STATE_DIR=/run/shardps-netns
mkdir -p "$STATE_DIR" || exit 1
# One live launcher per prefix: it holds this lock (fd 9, which no child inherits) until it
# exits, however it exits. A lock nobody holds means any namespace of the prefix is a leftover.
exec 9>"$STATE_DIR/$PREFIX.lock"
if ! flock -n 9; then
  echo "run_netns.sh: another run with --prefix $PREFIX is live (it holds $STATE_DIR/$PREFIX.lock); give this one another --prefix and --subnet" >&2
  exit 2
fi
SUPERVISOR_FILE="$STATE_DIR/$PREFIX.supervisors"

# Removes every namespace, link and hosts directory named PREFIX-..., every process in those
# namespaces and the supervisors a killed launcher of this prefix left running.
remove_network() {
  local pid ns link
  if [ -r "$SUPERVISOR_FILE" ]; then
    # Only a process that is still one of ours (pids get reused).
    while read -r pid; do
      if { tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | grep -q "run_netns.sh"; then
        kill -KILL "$pid" 2>/dev/null
      fi
    done <"$SUPERVISOR_FILE"
    rm -f "$SUPERVISOR_FILE"
  fi
  for ns in $(ip netns list | awk '{print $1}' | grep "^$PREFIX-"); do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
    ip netns delete "$ns" 2>/dev/null
  done
  rm -rf /etc/netns/"$PREFIX"-*
  # Deleting one end of a veth pair deletes both; the namespace ends went with their namespace.
  for link in $(ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 | grep "^$PREFIX-"); do
    ip link delete "$link" 2>/dev/null
  done
}

remove_network
if [ "$CLEANUP_ONLY" -eq 1 ]; then
  echo "run_netns: removed what runs with --prefix $PREFIX left behind" >&2
  exit 0
fi
if [ ! -r "$JOB" ]; then echo "run_netns.sh: cannot read job file \"$JOB\"" >&2; exit 2; fi
if ip -4 -o addr show | grep -q " $SUBNET\.[0-9]*/" || ip -4 route show | grep -q "^$SUBNET\."; then
  echo "run_netns.sh: $SUBNET.0/24 is already in use on this machine (ip addr, ip route); pick another --subnet" >&2
  exit 2
fi

shardps_build || exit 1
BIN="$(cd "$BIN" && pwd -P)" || exit 1
if [ -n "$PYTHON_SCRIPT" ]; then
  python_for "$PYTHON_SCRIPT" || exit 1
  PYTHON_SCRIPT="$(realpath "$PYTHON_SCRIPT")"
fi
JOB="$(realpath "$JOB")"
RUN_DIR="${RUN_DIR:-runs/$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$RUN_DIR/pids" || exit 1
RUN_DIR="$(cd "$RUN_DIR" && pwd -P)"

# shellcheck disable=SC2317  # reached through the traps below
cleanup() {
  trap - EXIT INT TERM
  stop_supervisors
  rm -f "$SUPERVISOR_FILE"
  if [ "$KEEP" -eq 1 ]; then
    echo "run_netns: kept the namespaces ($PREFIX-*) and $BRIDGE; remove them with: deploy/run_netns.sh --cleanup --prefix $PREFIX" >&2
  else
    remove_network
  fi
}
trap cleanup EXIT
trap 'echo; echo "interrupted: stopping the cluster" >&2; exit 130' INT TERM

# The tasks in address order: TYPE INDEX, at SUBNET.2, SUBNET.3, ...
TASKS=("chief 0")
for ((i = 0; i < NUM_PS; i++)); do TASKS+=("ps $i"); done
for ((i = 0; i < NUM_WORKERS; i++)); do TASKS+=("worker $i"); done
if [ -z "$NO_EVALUATOR" ]; then TASKS+=("evaluator 0"); fi
PORT=2222
pod() { echo "$PREFIX-$1-$2"; }                           # pod (and namespace) name
dns() { echo "$PREFIX-$1-$2.$PREFIX-$1.default.svc"; }   # headless service DNS name

ip link add "$BRIDGE" type bridge || exit 1
ip addr add "$SUBNET.1/24" dev "$BRIDGE" && ip link set "$BRIDGE" up || exit 1
hosts=$'127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n'
n=2
for task in "${TASKS[@]}"; do
  read -r type index <<<"$task"
  hosts+="$SUBNET.$n"$'\t'"$(dns "$type" "$index") $(pod "$type" "$index")"$'\n'
  n=$((n + 1))
done
n=2
for task in "${TASKS[@]}"; do
  read -r type index <<<"$task"
  ns=$(pod "$type" "$index")
  { ip netns add "$ns" &&
    ip link add "$PREFIX-v$n" type veth peer name eth0 netns "$ns" &&
    ip link set "$PREFIX-v$n" master "$BRIDGE" up &&
    ip -n "$ns" addr add "$SUBNET.$n/24" dev eth0 &&
    ip -n "$ns" link set eth0 up &&
    ip -n "$ns" link set lo up &&
    mkdir -p "/etc/netns/$ns" &&
    printf '%s' "$hosts" >"/etc/netns/$ns/hosts"; } || {
    echo "run_netns.sh: could not set up namespace $ns" >&2; exit 1; }
  n=$((n + 1))
done

list() {  # list TYPE N -> ["dns-0:2222", ...]
  local out="" i
  for ((i = 0; i < $2; i++)); do out+="${out:+, }\"$(dns "$1" "$i"):$PORT\""; done
  echo "[$out]"
}
CHIEF="$(dns chief 0):$PORT"
EVALUATOR=", \"evaluator\": $(list evaluator 1)"
if [ -n "$NO_EVALUATOR" ]; then EVALUATOR=""; fi
CLUSTER="{\"chief\": [\"$CHIEF\"], \"ps\": $(list ps "$NUM_PS"), \"worker\": $(list worker "$NUM_WORKERS")$EVALUATOR}"
tf_config() { echo "{\"cluster\": $CLUSTER, \"task\": {\"type\": \"$1\", \"index\": $2}}"; }

# TLS: a certificate per daemon for the names it is dialled by (its DNS names) and its
# address, with its role and index as a URI, and one for shardctl (deploy/lib.sh).
specs=("shardctl=URI:spiffe://shardps/admin/0")
n=2
for task in "${TASKS[@]}"; do
  read -r type index <<<"$task"
  specs+=("$type-$index=DNS:$(dns "$type" "$index"),DNS:$(pod "$type" "$index"),IP:$SUBNET.$n,URI:spiffe://shardps/$type/$index")
  n=$((n + 1))
done
tls_setup "$RUN_DIR/tls" "${specs[@]}" || exit 1

# supervise in the task's namespace with its TLS files, noting each supervisor for the cleanup
# of a launcher killed with SIGKILL.
supervise_in_ns() {
  local type=$1 index=$2; shift 2
  tls_env "$type-$index"
  supervise "$type" "$index" ip netns exec "$(pod "$type" "$index")" env "${TLS_ENV[@]}" "$@"
  echo "${SUPERVISORS[-1]}" >>"$SUPERVISOR_FILE"
}

CHECKPOINT_DIR="$RUN_DIR/checkpoints"
# Every C++ daemon serves Prometheus /metrics on port 9100 of its own address, with its TLS
# (docs/observability.md).
METRICS_PORT=9100
# Two runs for TensorBoard: chief (training) and evaluator (docs/observability.md).
TENSORBOARD_DIR="$RUN_DIR/tensorboard"
# Daemons bind 0.0.0.0:2222 in their namespace (no --bind_host), as in a pod.
for ((i = 0; i < NUM_PS; i++)); do
  supervise_in_ns ps "$i" "$BIN/ps_server/ps" --data_root="$RUN_DIR" \
    --metrics_port="$METRICS_PORT"
done
for ((i = 0; i < NUM_WORKERS; i++)); do
  if [ -n "$PYTHON_SCRIPT" ]; then
    supervise_in_ns worker "$i" "$PYTHON" "$PYTHON_SCRIPT"
  else
    supervise_in_ns worker "$i" "$BIN/worker/worker" --threads=1 --metrics_port="$METRICS_PORT"
  fi
done
if [ -z "$PYTHON_SCRIPT" ]; then
  supervise_in_ns evaluator 0 "$BIN/evaluator/evaluator" --data_root="$RUN_DIR" \
    --metrics_port="$METRICS_PORT" \
    --metrics_file="$RUN_DIR/metrics.jsonl" \
    --tensorboard_dir="$TENSORBOARD_DIR/evaluator"
elif [ -z "$NO_EVALUATOR" ]; then
  SHARDPS_METRICS_FILE="$RUN_DIR/metrics.jsonl" supervise_in_ns evaluator 0 "$PYTHON" "$PYTHON_SCRIPT"
fi
supervise_in_ns chief 0 "$BIN/coordinator/chief" --job="$JOB" \
  --checkpoint_dir="$CHECKPOINT_DIR" --data_root="$RUN_DIR" \
  --tensorboard_dir="$TENSORBOARD_DIR/chief" --metrics_port="$METRICS_PORT"
CHIEF_SUPERVISOR=${SUPERVISORS[-1]}

echo "cluster: chief $CHIEF ($SUBNET.2), $NUM_PS ps, $NUM_WORKERS workers${PYTHON_SCRIPT:+ running $PYTHON_SCRIPT}${EVALUATOR:+, evaluator}, TLS $TLS, each in its own network namespace ($PREFIX-*, bridge $BRIDGE, $SUBNET.0/24); logs in $RUN_DIR" >&2
echo "job: $JOB; checkpoints in $CHECKPOINT_DIR (unless the job file names a dir)" >&2
# shardctl runs in the chief's namespace and reaches it by its DNS name, as `kubectl exec`
# into the chief's pod would; a launcher killed with SIGKILL leaves no shardctl behind there
# (the next run's cleanup ends every process in the namespaces).
tls_env shardctl
SHARDCTL=(ip netns exec "$(pod chief 0)" env "${TLS_ENV[@]}" "$BIN/coordinator/cli/shardctl"
          --chief="$CHIEF")
follow_job "$CHIEF_SUPERVISOR" "${SHARDCTL[@]}"
echo "metrics: $RUN_DIR/metrics.jsonl; logs: $RUN_DIR/*.log; checkpoints: $CHECKPOINT_DIR" >&2
exit "$JOB_RC"
