#!/usr/bin/env bash
# The main job across network namespaces (deploy/run_netns.sh: one host per task, names
# resolved through /etc/hosts, a bridge between them) against the same job on loopback
# (deploy/run_local.sh), alternated in one run so that both see the same machine:
#
#   bench/netns_vs_loopback.sh [--pairs N] [JOB.json]      (root: run_netns.sh needs it)
#
# Prints each run's training time, steps/s and final test accuracy, each pair's ratio of netns
# to loopback steps/s and their median, and the ratio of the medians, and the host's load and
# the CPU other processes used meanwhile. Figures come from each launcher's closing line
# ("final test accuracy: A (loss L) after E epochs, S steps, T s, mode M").
set -euo pipefail
cd "$(dirname "$0")/.."
PAIRS=2
JOB=deploy/jobs/fashion_mlp.json
while [ $# -gt 0 ]; do
  case "$1" in
    --pairs) PAIRS="$2"; shift 2 ;;
    --pairs=*) PAIRS="${1#--pairs=}"; shift ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    -*) echo "netns_vs_loopback.sh: unknown flag $1" >&2; exit 2 ;;
    *) JOB="$1"; shift ;;
  esac
done
[[ "$PAIRS" =~ ^[1-9][0-9]*$ ]] || { echo "netns_vs_loopback.sh: --pairs must be >= 1" >&2; exit 2; }
[ -r "$JOB" ] || { echo "netns_vs_loopback.sh: cannot read job file \"$JOB\"" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "netns_vs_loopback.sh: needs root (network namespaces)" >&2; exit 2; }

if [ -n "${SHARDPS_BIN:-}" ]; then
  BIN="$SHARDPS_BIN"
else
  bazel build //bench:host_stats_tool >&2  # the launchers build the daemons
  BIN=bazel-bin
fi
# The host's load and the CPU that other processes use while this runs (bench/host_stats.h).
HOST_START=$("$BIN/bench/host_stats_tool" start --pid=$$)
OUT=$(mktemp -d /tmp/netns_vs_loopback.XXXXXX)
declare -a LOCAL_SPS NETNS_SPS RATIOS
run() {  # run NAME LAUNCHER: prints "seconds steps accuracy"
  local name=$1 launcher=$2 log="$OUT/$1.log" line
  # Both plaintext, as the figures before TLS were: the comparison is of the network.
  "$launcher" "$JOB" --run_dir "$OUT/$name" --tls off >"$log" 2>&1 </dev/null || {
    echo "netns_vs_loopback.sh: $launcher failed; its output: $log" >&2; exit 1; }
  line=$(grep -a "final test accuracy:" "$log" | tail -1)
  [ -n "$line" ] || { echo "netns_vs_loopback.sh: no final accuracy in $log" >&2; exit 1; }
  sed -E 's/.*accuracy: ([0-9.]+) .*, ([0-9]+) steps, ([0-9.]+) s,.*/\3 \2 \1/' <<<"$line"
}
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

printf '%-8s %4s %10s %8s %9s\n' launch pair "train s" "steps/s" accuracy
for ((p = 1; p <= PAIRS; p++)); do
  # Alternate which goes first, so that neither always gets the warmer machine.
  order=(local netns); ((p % 2 == 0)) && order=(netns local)
  for kind in "${order[@]}"; do
    launcher=deploy/run_local.sh; [ "$kind" = netns ] && launcher=deploy/run_netns.sh
    read -r secs steps acc < <(run "$kind-$p" "$launcher")
    sps=$(awk -v s="$steps" -v t="$secs" 'BEGIN {printf "%.1f", s / t}')
    if [ "$kind" = local ]; then LOCAL_SPS+=("$sps"); else NETNS_SPS+=("$sps"); fi
    printf '%-8s %4d %10s %8s %9s\n' "$kind" "$p" "$secs" "$sps" "$acc"
  done
  # The pair's own ratio: both runs close in time, so the machine's drift cancels most.
  RATIOS+=("$(awk -v a="${NETNS_SPS[-1]}" -v b="${LOCAL_SPS[-1]}" 'BEGIN {printf "%.3f", a / b}')")
done
echo "netns/loopback steps/s per pair: ${RATIOS[*]}; median $(median "${RATIOS[@]}")"
l=$(median "${LOCAL_SPS[@]}"); n=$(median "${NETNS_SPS[@]}")
echo "median steps/s: loopback $l, netns $n; netns/loopback $(awk -v a="$n" -v b="$l" 'BEGIN {printf "%.3f", a / b}')"
"$BIN/bench/host_stats_tool" line --pid=$$ "$HOST_START"
echo "logs: $OUT"
