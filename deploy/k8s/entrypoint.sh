#!/usr/bin/env bash
# The container entrypoint of shardps' Kubernetes forms (deploy/k8s/): derives TF_CONFIG from
# the pod, then execs the daemon of the pod's role with the container's arguments.
#
#   shardps-entrypoint [DAEMON ARGS...]      e.g. args: [--long_lived]
#
# TF_CONFIG already set and not empty (Kubeflow's TFJob writes it): kept as it is; the role is
# SHARDPS_ROLE, else TF_CONFIG's task.type. Otherwise it is made from:
#
#   role        SHARDPS_ROLE (chief, ps, worker, evaluator), else the hostname: a StatefulSet
#               pod `shardps-<role>-<ordinal>`, or with JOBSET_NAME a JobSet pod
#               `<jobset>-<role>-<job index>-<pod index>`
#   index       SHARDPS_TASK_INDEX, else JOB_COMPLETION_INDEX (an Indexed Job's, so a JobSet
#               pod's), else the hostname's ordinal (StatefulSet) or pod index (JobSet)
#   cluster     1 chief, SHARDPS_NUM_PS ps (>= 1), SHARDPS_NUM_WORKERS workers (>= 1), and with
#               SHARDPS_EVALUATOR=1 one evaluator (0 or unset: none), each at
#                 StatefulSets: shardps-<role>-<i>.shardps-<role>.<namespace>.svc:<port>
#                 JobSet (JOBSET_NAME set): <jobset>-<role>-0-<i>.<subdomain>.<namespace>.svc:<port>
#               (one Job per replicated job, so job index 0; subdomain SHARDPS_SUBDOMAIN,
#               default the JobSet's name, as JobSet's network.subdomain)
#   namespace   POD_NAMESPACE (the downward API's metadata.namespace), default "default"
#   port        SHARDPS_PORT, default 2222
#
# TLS (rpc/tls.h, docs/security.md): the daemon's flags in the container's args (deploy/k8s
# gives --tls_cert_file and the rest, or --insecure), or SHARDPS_TLS_CERT_FILE,
# SHARDPS_TLS_KEY_FILE, SHARDPS_TLS_CA_FILE, SHARDPS_TLS_CLIENT_AUTH, SHARDPS_TLS_REFRESH_S and
# SHARDPS_INSECURE in the environment, which reach the daemon (or script) as they are; the
# daemon checks them and exits 2 naming a bad one.
#
# The daemon is SHARDPS_BIN_DIR/<role> (default /usr/local/bin); for a worker or evaluator with
# SHARDPS_PYTHON_SCRIPT set, `SHARDPS_PYTHON (python3) SCRIPT ARGS...`. With SHARDPS_ENTRYPOINT_DRY_RUN=1
# it prints `TF_CONFIG=<json>` and `EXEC <daemon> <args...>` (each %q-quoted) on stdout and
# exits 0 instead of exec'ing (tests/k8s_manifests_test). A bad variable prints one line naming
# it and exits 2, the daemons' code for a bad configuration (docs/exit-codes.md), so that a
# Job's podFailurePolicy fails the job instead of retrying it.
set -euo pipefail

die() {
  echo "shardps-entrypoint: $*" >&2
  exit 2
}

# A non-negative decimal integer without leading zeros (as an ordinal or index is written).
is_index() { [[ "$1" =~ ^(0|[1-9][0-9]{0,5})$ ]]; }
is_role() { [[ "$1" =~ ^(chief|ps|worker|evaluator)$ ]]; }
# An RFC 1123 label, as Kubernetes requires of namespaces and Service names.
is_label() { [[ "$1" =~ ^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$ ]]; }

host="${HOSTNAME:-$(hostname)}"
role="${SHARDPS_ROLE:-}"
if [ -n "$role" ] && ! is_role "$role"; then
  die "SHARDPS_ROLE=\"$role\": must be chief, ps, worker or evaluator"
fi

if [ -n "${TF_CONFIG:-}" ]; then
  # Kept as written (TFJob's). Only the task type is read, for the daemon to run.
  if [[ "$TF_CONFIG" =~ \"type\"[[:space:]]*:[[:space:]]*\"([a-z]+)\" ]]; then
    config_role="${BASH_REMATCH[1]}"
  else
    config_role=""
  fi
  if [ -z "$role" ]; then
    [ -n "$config_role" ] || die "TF_CONFIG has no task.type and SHARDPS_ROLE is not set"
    role="$config_role"
    is_role "$role" || die "TF_CONFIG: task.type \"$role\" is not chief, ps, worker or evaluator"
  elif [ -n "$config_role" ] && [ "$config_role" != "$role" ]; then
    die "SHARDPS_ROLE=\"$role\" but TF_CONFIG's task.type is \"$config_role\""
  fi
  tf_config="$TF_CONFIG"
else
  jobset="${JOBSET_NAME:-}"
  if [ -n "$jobset" ] && ! is_label "$jobset"; then
    die "JOBSET_NAME=\"$jobset\": must be a DNS label (a JobSet's name)"
  fi
  # What the hostname says, when it has the expected form.
  host_role="" host_index=""
  if [ -n "$jobset" ]; then
    if [[ "$host" =~ ^${jobset}-(chief|ps|worker|evaluator)-([0-9]+)-([0-9]+)$ ]]; then
      host_role="${BASH_REMATCH[1]}"
      [ "${BASH_REMATCH[2]}" = 0 ] ||
        die "hostname \"$host\": job index ${BASH_REMATCH[2]}, but each replicated job must have replicas: 1"
      host_index="${BASH_REMATCH[3]}"
    fi
  elif [[ "$host" =~ ^shardps-(chief|ps|worker|evaluator)-([0-9]+)$ ]]; then
    host_role="${BASH_REMATCH[1]}"
    host_index="${BASH_REMATCH[2]}"
  fi
  if [ -z "$role" ]; then
    [ -n "$host_role" ] ||
      die "SHARDPS_ROLE is not set and the hostname \"$host\" is not shardps-<role>-<ordinal>${jobset:+ or $jobset-<role>-0-<index>}"
    role="$host_role"
  fi

  if [ -n "${SHARDPS_TASK_INDEX:-}" ]; then
    index="$SHARDPS_TASK_INDEX" index_var="SHARDPS_TASK_INDEX"
  elif [ -n "${JOB_COMPLETION_INDEX:-}" ]; then
    index="$JOB_COMPLETION_INDEX" index_var="JOB_COMPLETION_INDEX"
  elif [ -n "$host_index" ] && [ "$host_role" = "$role" ]; then
    index="$host_index" index_var="the ordinal of the hostname \"$host\""
  else
    die "no task index: SHARDPS_TASK_INDEX and JOB_COMPLETION_INDEX are not set and the hostname \"$host\" is not that of a $role pod"
  fi
  is_index "$index" || die "$index_var: \"$index\" is not a task index (0, 1, ...)"

  count() {  # count VAR MIN WHAT: the variable's value, checked to be an integer >= MIN
    local name="$1" min="$2" value="${!1:-}"
    [ -n "$value" ] || die "$name is not set (the number of $3 tasks)"
    if ! [[ "$value" =~ ^[1-9][0-9]{0,3}$ ]] || [ "$value" -lt "$min" ]; then
      die "$name=\"$value\": must be an integer $min..9999"
    fi
    echo "$value"
  }
  num_ps=$(count SHARDPS_NUM_PS 1 ps) || exit 2
  num_workers=$(count SHARDPS_NUM_WORKERS 1 worker) || exit 2
  case "${SHARDPS_EVALUATOR:-0}" in
    0) num_evaluators=0 ;;
    1) num_evaluators=1 ;;
    *) die "SHARDPS_EVALUATOR=\"${SHARDPS_EVALUATOR}\": must be 0 or 1" ;;
  esac
  namespace="${POD_NAMESPACE:-default}"
  is_label "$namespace" || die "POD_NAMESPACE=\"$namespace\": must be a DNS label (a namespace)"
  port="${SHARDPS_PORT:-2222}"
  if ! [[ "$port" =~ ^[1-9][0-9]{0,4}$ ]] || [ "$port" -gt 65535 ]; then
    die "SHARDPS_PORT=\"$port\": must be 1..65535"
  fi
  subdomain="${SHARDPS_SUBDOMAIN:-$jobset}"
  if [ -n "$jobset" ] && ! is_label "$subdomain"; then
    die "SHARDPS_SUBDOMAIN=\"$subdomain\": must be a DNS label"
  fi

  declare -A tasks=([chief]=1 [ps]="$num_ps" [worker]="$num_workers" [evaluator]="$num_evaluators")
  [ "${tasks[$role]}" -gt 0 ] || die "SHARDPS_ROLE=evaluator but SHARDPS_EVALUATOR is not 1"
  if [[ "$role" =~ ^(worker|ps)$ ]] && [ "$index" -ge "${tasks[$role]}" ]; then
    # A StatefulSet scaled up past SHARDPS_NUM_WORKERS (SHARDPS_NUM_PS): the new ordinal's own
    # TF_CONFIG lists the tasks of its role up to itself. A worker joins the chief's job; a ps
    # waits for `shardctl scale-ps` to move the job onto it (docs/elastic.md).
    tasks[$role]=$((index + 1))
  fi
  [ "$index" -lt "${tasks[$role]}" ] ||
    die "$index_var: task index $index is out of range for ${tasks[$role]} $role task(s)"

  address() {  # address ROLE I
    if [ -n "$jobset" ]; then
      echo "$jobset-$1-0-$2.$subdomain.$namespace.svc:$port"
    else
      echo "shardps-$1-$2.shardps-$1.$namespace.svc:$port"
    fi
  }
  cluster=""
  for r in chief ps worker evaluator; do
    [ "${tasks[$r]}" -gt 0 ] || continue
    list=""
    for ((i = 0; i < tasks[$r]; i++)); do list+="${list:+, }\"$(address "$r" "$i")\""; done
    cluster+="${cluster:+, }\"$r\": [$list]"
  done
  tf_config="{\"cluster\": {$cluster}, \"task\": {\"type\": \"$role\", \"index\": $index},"
  tf_config+=" \"rpc_layer\": \"grpc\", \"environment\": \"cloud\"}"
fi

daemon="${SHARDPS_BIN_DIR:-/usr/local/bin}/$role"
# A worker or evaluator of a job whose model is the user's: their script (a shardps.Worker and
# shardps.Evaluator: docs/python.md) with the container's arguments, run by SHARDPS_PYTHON.
if [ -n "${SHARDPS_PYTHON_SCRIPT:-}" ] && [[ "$role" =~ ^(worker|evaluator)$ ]]; then
  daemon="${SHARDPS_PYTHON:-python3}"
  set -- "$SHARDPS_PYTHON_SCRIPT" "$@"
fi
if [ "${SHARDPS_ENTRYPOINT_DRY_RUN:-0}" = 1 ]; then
  echo "TF_CONFIG=$tf_config"
  line="EXEC $(printf '%q' "$daemon")"
  for arg in "$@"; do line+=" $(printf '%q' "$arg")"; done
  echo "$line"
  exit 0
fi
[ -x "$daemon" ] || command -v "$daemon" >/dev/null ||
  { echo "shardps-entrypoint: no daemon at $daemon (SHARDPS_BIN_DIR, SHARDPS_PYTHON)" >&2; exit 1; }
export TF_CONFIG="$tf_config"
exec "$daemon" "$@"
