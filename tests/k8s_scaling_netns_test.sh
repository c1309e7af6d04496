#!/usr/bin/env bash
# Scaling the Kubernetes StatefulSet form, simulated (no API server runs here): every pod is a
# network namespace with its own address, the headless Services' DNS names in its hosts file,
# and its daemon started by the real container entrypoint (deploy/k8s/entrypoint.sh) from the
# pod's HOSTNAME and the StatefulSets' environment (SHARDPS_NUM_PS=2, SHARDPS_NUM_WORKERS=2),
# as cluster.yaml's pods are. While an async job runs:
#   - the worker StatefulSet is scaled to 3: the new ordinal's pod (shardps-worker-2) joins the
#     job and takes steps; scaled back to 2, the highest pod gets SIGTERM, hands its steps back,
#     leaves and exits 0;
#   - the ps StatefulSet is scaled to 3 and `shardctl scale-ps 3` names the new pod's DNS name:
#     the job moves onto it; `shardctl scale-ps 2` moves it back and the highest ps exits 0
#     (docs/elastic.md's order for a scale down);
# the job then succeeds with every step done, and the chief exits 0.
# Needs root (CAP_NET_ADMIN) and iproute2: without them it is skipped, saying so (a test.xml
# whose one case is marked skipped, which deploy/test.sh counts as skipped).
set -uo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE:-shardps}"

skip() {
  echo "*** SKIPPED: $1. The Kubernetes scaling simulation did NOT run."
  if [ -n "${XML_OUTPUT_FILE:-}" ]; then
    cat >"$XML_OUTPUT_FILE" <<XML
<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="1" failures="0" disabled="0" skipped="1" errors="0" name="AllTests">
  <testsuite name="K8sScalingNetnsTest" tests="1" failures="0" disabled="0" skipped="1" errors="0">
    <testcase name="PodsJoinAndLeaveAsStatefulSetsScale" status="run" result="skipped"
              classname="K8sScalingNetnsTest">
      <skipped message="$1"/>
    </testcase>
  </testsuite>
</testsuites>
XML
  fi
  exit 0
}
fail() {
  echo "FAIL: $*"
  for f in "$RUN"/*.log; do echo "--- $(basename "$f") ---"; tail -n 25 "$f"; done
  exit 1
}

[ "$(id -u)" -eq 0 ] || skip "not root (network namespaces need CAP_NET_ADMIN)"
command -v ip >/dev/null || skip "no iproute2 ip"
PREFIX="k8s$(printf '%04x' $((RANDOM % 65536)))"
ip netns add "$PREFIX-probe" 2>/dev/null || skip "ip netns add fails here"
ip netns delete "$PREFIX-probe"

# A /24 of 10.232..10.239 that nothing on this machine uses.
SUBNET=""
for _ in $(seq 20); do
  candidate="10.$((232 + RANDOM % 8)).$((RANDOM % 256))"
  if ! ip -4 -o addr show | grep -q " $candidate\." &&
    ! ip -4 route show | grep -q "^$candidate\."; then
    SUBNET="$candidate"
    break
  fi
done
[ -n "$SUBNET" ] || skip "no free /24 in 10.232.0.0/13"

RUN="$TEST_TMPDIR/k8s_scaling"
rm -rf "$RUN" && mkdir -p "$RUN/bin" "$RUN/ckpt" || exit 1
ln -s "$root/coordinator/chief" "$RUN/bin/chief"
ln -s "$root/ps_server/ps" "$RUN/bin/ps"
ln -s "$root/worker/worker" "$RUN/bin/worker"
ENTRYPOINT="$root/deploy/k8s/entrypoint.sh"
SHARDCTL="$root/coordinator/cli/shardctl"
NAMESPACE="$PREFIX"  # the Kubernetes namespace: in the DNS names
BRIDGE="$PREFIX-br"

cleanup() {
  local ns pid
  for ns in $(ip netns list | awk '{print $1}' | grep "^$PREFIX-"); do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
    ip netns delete "$ns" 2>/dev/null
  done
  rm -rf /etc/netns/"$PREFIX"-*
  ip link delete "$BRIDGE" 2>/dev/null
  true
}
trap cleanup EXIT

# Every pod the StatefulSets may have, at SUBNET.2, .3, ...: the headless Services resolve
# each pod's name once it exists.
PODS=(chief-0 ps-0 ps-1 ps-2 worker-0 worker-1 worker-2)
dns() { echo "shardps-$1.shardps-${1%-*}.$NAMESPACE.svc"; }  # dns ROLE-I
if ! { ip link add "$BRIDGE" type bridge && ip addr add "$SUBNET.1/24" dev "$BRIDGE" &&
       ip link set "$BRIDGE" up; }; then
  fail "bridge $BRIDGE"
fi
hosts=$'127.0.0.1\tlocalhost\n'
n=2
for pod in "${PODS[@]}"; do
  hosts+="$SUBNET.$n"$'\t'"$(dns "$pod") shardps-$pod"$'\n'
  n=$((n + 1))
done
n=2
for pod in "${PODS[@]}"; do
  ns="$PREFIX-$pod"
  { ip netns add "$ns" &&
    ip link add "$PREFIX-v$n" type veth peer name eth0 netns "$ns" &&
    ip link set "$PREFIX-v$n" master "$BRIDGE" up &&
    ip -n "$ns" addr add "$SUBNET.$n/24" dev eth0 &&
    ip -n "$ns" link set eth0 up && ip -n "$ns" link set lo up &&
    mkdir -p "/etc/netns/$ns" && printf '%s' "$hosts" >"/etc/netns/$ns/hosts"; } ||
    fail "namespace $ns"
  n=$((n + 1))
done

# An async job long enough to scale in: every worker's step takes 3 ms more.
cat >"$RUN/job.json" <<'JSON'
{"name": "k8s", "model": "mlp:64", "batch_size": 64, "mode": "async", "seed": 7,
 "backend": "cpu", "optimizer": {"type": "sgd", "learning_rate": 0.05},
 "partitioner": "min_size:4096:ps", "steps": 6000,
 "checkpoint": {"every_steps": 1000, "keep": 2}}
JSON

declare -A PIDS
# start POD ARGS...: the pod's container: the entrypoint with the StatefulSet's environment.
start() {
  local pod=$1
  shift
  ip netns exec "$PREFIX-$pod" env -i PATH="$PATH" HOSTNAME="shardps-$pod" \
    POD_NAMESPACE="$NAMESPACE" SHARDPS_NUM_PS=2 SHARDPS_NUM_WORKERS=2 \
    SHARDPS_BIN_DIR="$RUN/bin" SHARDPS_INSECURE=1 \
    "$ENTRYPOINT" "$@" >"$RUN/$pod.log" 2>&1 &
  PIDS[$pod]=$!
}
# stop POD SIG: its exit code.
stop() {
  kill "-$2" "${PIDS[$1]}" 2>/dev/null
  wait "${PIDS[$1]}"
}
CHIEF="$(dns chief-0):2222"
shardctl() { ip netns exec "$PREFIX-chief-0" "$SHARDCTL" --chief="$CHIEF" --insecure "$@"; }
# py EXPR: EXPR of `s`, the status (shardctl status --json), printed; nothing when the chief
# does not answer.
py() {
  shardctl status --json 2>/dev/null |
    python3 -c "import json, sys; s = json.load(sys.stdin); print($1)" 2>/dev/null
}
# wait_for DESCRIPTION COMMAND...: until the command succeeds (60 s).
wait_for() {
  local what=$1 i
  shift
  for ((i = 0; i < 600; i++)); do
    if "$@"; then return 0; fi
    sleep 0.1
  done
  fail "timed out waiting for $what"
}

for pod in ps-0 ps-1; do start "$pod" --data_root="$RUN"; done
for pod in worker-0 worker-1; do start "$pod" --threads=1 --test_only_delay_before_push_ms=3; done
start chief-0 --job="$RUN/job.json" --checkpoint_dir="$RUN/ckpt" --data_root="$RUN"
steps_at_least() { [ "$(py "int(s['steps_done'])")" -ge "$1" ] 2>/dev/null; }
wait_for "the job to train" steps_at_least 200

# The worker StatefulSet scaled to 3: ordinal 2 joins and takes steps.
start worker-2 --threads=1 --test_only_delay_before_push_ms=3
worker2_works() {
  [ "$(py "[w['source'] + ' ' + w['steps_done'] for w in s['workers'] if w['index'] == 2]")" \
    != "[]" ] 2>/dev/null &&
    [ "$(py "sum(int(w['steps_done']) for w in s['workers'] if w['index'] == 2 and
                 w['source'] == 'joined')")" -gt 0 ] 2>/dev/null
}
wait_for "worker-2 to join and take steps" worker2_works
# Scaled back to 2: the highest ordinal gets SIGTERM, leaves, exits 0.
stop worker-2 TERM
rc=$?
[ "$rc" -eq 0 ] || fail "worker-2 exited $rc on SIGTERM, not 0"
grep -q "left the job" "$RUN/worker-2.log" || fail "worker-2 did not say it left"
echo "worker-2 joined, took steps, left on SIGTERM (exit 0)"

# The ps StatefulSet scaled to 3, then the job moved onto the new pod.
start ps-2 --data_root="$RUN"
out=$(shardctl scale-ps 3 \
  --ps_addresses="$(dns ps-0):2222,$(dns ps-1):2222,$(dns ps-2):2222" 2>&1) ||
  fail "scale-ps 3: $out"
echo "$out"
echo "$out" | grep -q "from 2 to 3 ps" || fail "scale-ps 3 said: $out"
[ "$(py "len(s['ps'])")" = 3 ] || fail "the job's status lists $(py "len(s['ps'])") ps, not 3"
steps_after_scale=$(py "int(s['steps_done'])")
wait_for "steps on 3 ps" steps_at_least $((steps_after_scale + 200))
# Scale down in docs/elastic.md's order: scale-ps first, the ps hands off and exits 0.
out=$(shardctl scale-ps 2 2>&1) || fail "scale-ps 2: $out"
echo "$out"
echo "$out" | grep -q "from 3 to 2 ps" || fail "scale-ps 2 said: $out"
wait "${PIDS[ps-2]}"
rc=$?
[ "$rc" -eq 0 ] || fail "the removed ps-2 exited $rc, not 0"
echo "ps-2 took a third of the job, handed it back, exited 0"

wait "${PIDS[chief-0]}"
rc=$?
[ "$rc" -eq 0 ] || fail "the chief exited $rc"
grep -q "SUCCEEDED" "$RUN/chief-0.log" || fail "the job did not succeed"
final=$(find "$RUN/ckpt" -maxdepth 1 -name 'ckpt-*' | sort | tail -n 1)
python3 -c "import json, sys; m = json.load(open(sys.argv[1]));
assert m['progress']['steps_done'] == 6000 and m['final'], m['progress']" "$final/manifest.json" ||
  fail "the final checkpoint $final is not the final one at step 6000"
echo "PASS: the job succeeded across a worker and a ps StatefulSet scaled up and down"
