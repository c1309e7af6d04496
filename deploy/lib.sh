# shellcheck shell=bash
# Shell pieces shared by the launchers deploy/run_local.sh and deploy/run_netns.sh (sourced,
# never run): the build, the per-daemon supervisor, stopping the supervisors, and following
# the job with shardctl. A launcher sets LAUNCHER (its name in messages), RUN_DIR and BIN, and
# defines tf_config TYPE INDEX (the TF_CONFIG of that task) before it calls supervise.

# shardps_build: sets BIN to the directory of the binaries; builds them unless SHARDPS_BIN
# names prebuilt ones (a container image, a copy on a GPU host).
shardps_build() {
  if [ -n "${SHARDPS_BIN:-}" ]; then
    BIN="$SHARDPS_BIN"
    return 0
  fi
  deploy/setup.sh || return 1
  echo "building shardps (the first build takes a few minutes)..." >&2
  bazel build //ps_server:ps //worker:worker //coordinator:chief //evaluator:evaluator \
    //coordinator/cli:shardctl >&2 || return 1
  # shellcheck disable=SC2034  # BIN is read by the launcher that sources this file
  BIN=bazel-bin
}

# check_python_flags SCRIPT NO_EVALUATOR: exits 2 when --no_evaluator comes without --python
# or the --python script cannot be read.
check_python_flags() {
  if [ -n "$2" ] && [ -z "$1" ]; then
    echo "$LAUNCHER.sh: --no_evaluator goes with --python (the main job's evaluator is the daemon)" >&2
    exit 2
  fi
  if [ -n "$1" ] && [ ! -r "$1" ]; then
    echo "$LAUNCHER.sh: cannot read --python script \"$1\"" >&2
    exit 2
  fi
}

# python_for SCRIPT: sets PYTHON to the Python that runs a --python script: $SHARDPS_PYTHON,
# or the virtualenv of deploy/python_env.sh --torch for a script that imports torch (Debian's
# PyTorch), of deploy/python_env.sh --shardps otherwise (made on first use).
python_for() {
  PYTHON="${SHARDPS_PYTHON:-}"
  if [ -n "$PYTHON" ]; then return 0; fi
  local flag=--shardps venv
  if grep -Eq '^\s*(import|from)\s+(torch|shardps\.torch)\b' "$1"; then flag=--torch; fi
  venv=$(deploy/python_env.sh "$flag") || return 1
  PYTHON="$venv/bin/python"
}

# check_count VALUE: exits 2 unless VALUE is a number 1..99 (--workers, --ps).
check_count() {
  if ! [[ "$1" =~ ^[1-9][0-9]?$ ]]; then
    echo "$LAUNCHER: --workers and --ps take a number 1..99, got \"$1\"" >&2; exit 2
  fi
}

# Exit codes (docs/exit-codes.md): 0 done, 1 error, 2 bad command line or config, 4 job
# failed or cancelled, 5 interrupted (restart me), 6 orphaned (no chief for too long).
exit_reason() {
  local rc=$1
  if [ "$rc" -gt 128 ]; then echo "killed by signal $((rc - 128))"; else echo "exit code $rc"; fi
}

SUPERVISORS=()
# supervise TYPE INDEX COMMAND...: runs the daemon (COMMAND, with TF_CONFIG set to tf_config
# TYPE INDEX), restarting it (1 s, doubling to 30 s between tries) whenever it dies in a way a
# restart can mend; a daemon that exits 0 (done), 2 (bad configuration), 4 (job failed) or 6
# (orphaned) stays down. Its pid goes to RUN_DIR/pids/TYPE-INDEX.pid, its output to
# RUN_DIR/TYPE-INDEX.log. File descriptor 9 (a launcher's lock) is not passed on.
supervise() {
  local type=$1 index=$2; shift 2
  local name="$type-$index" log="$RUN_DIR/$type-$index.log" delay=1 rc="" pid="" started=0
  (
    exec 9>&-
    trap 'kill -TERM "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; exit 0' TERM
    while true; do
      TF_CONFIG="$(tf_config "$type" "$index")" "$@" >>"$log" 2>&1 &
      pid=$!
      echo "$pid" >"$RUN_DIR/pids/$name.pid"
      started=$SECONDS
      wait "$pid" 2>/dev/null
      rc=$?
      case "$rc" in 0|2|4|6) exit "$rc" ;; esac
      if [ $((SECONDS - started)) -gt 60 ]; then delay=1; fi
      echo "$LAUNCHER: $name $(exit_reason "$rc"); restarting it in ${delay} s, as Kubernetes would (log: $log)" >&2
      sleep "$delay"
      delay=$(( delay * 2 > 30 ? 30 : delay * 2 ))
    done
  ) &
  SUPERVISORS+=($!)
}

WATCH_PID=""
# stop_supervisors: stops shardctl watch (follow_job's), every supervisor and its daemon
# (SIGTERM, then SIGKILL after 1 s).
stop_supervisors() {
  if [ -n "$WATCH_PID" ]; then kill -TERM "$WATCH_PID" 2>/dev/null; fi
  # Supervisors first, so that nothing is restarted; each stops its daemon.
  for pid in "${SUPERVISORS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  sleep 1
  for f in "$RUN_DIR"/pids/*.pid; do [ -e "$f" ] && kill -KILL "$(cat "$f")" 2>/dev/null; done
  for pid in "${SUPERVISORS[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  wait 2>/dev/null
}

# follow_job CHIEF_SUPERVISOR SHARDCTL...: waits for the chief to answer, shows the job with
# `shardctl watch` (following a restarted chief while its supervisor runs) and waits for the
# chief to end. Sets JOB_RC: watch's exit code, or the chief's when watch saw success and the
# chief did not exit 0. Exits 130 on Ctrl-C (the launcher's EXIT trap stops every process).
follow_job() {
  local chief_supervisor=$1; shift
  local rc chief_rc
  for _ in $(seq 100); do
    "$@" status >/dev/null 2>&1 9>&- && break
    kill -0 "$chief_supervisor" 2>/dev/null || break
    sleep 0.2
  done
  while true; do
    # In the background and waited for: a signal to the launcher (SIGTERM) runs its trap at
    # once, where a foreground child would hold the trap until the child ends.
    "$@" watch 9>&- &
    WATCH_PID=$!
    wait "$WATCH_PID"
    rc=$?
    if [ "$rc" -eq 130 ]; then
      echo "interrupted: stopping the cluster" >&2
      exit 130
    fi
    # The chief may be restarting (killed, or interrupted): follow it again while its
    # supervisor still runs; it resumes the job from its checkpoint directory.
    if [ "$rc" -eq 3 ] && kill -0 "$chief_supervisor" 2>/dev/null; then
      echo "$LAUNCHER: the chief is unreachable; waiting for it to come back..." >&2
      sleep 2
      continue
    fi
    break
  done
  wait "$chief_supervisor" 2>/dev/null
  chief_rc=$?
  if [ "$rc" -eq 0 ] && [ "$chief_rc" -ne 0 ]; then rc=$chief_rc; fi
  # shellcheck disable=SC2034  # JOB_RC is read by the launcher that sources this file
  JOB_RC=$rc
}

# TLS for a launcher's cluster (docs/security.md). check_tls VALUE: on or off, else exit 2.
check_tls() {
  if [ "$1" != on ] && [ "$1" != off ]; then
    echo "$LAUNCHER.sh: --tls must be on or off, got \"$1\"" >&2
    exit 2
  fi
}
# tls_setup DIR NAME=SANS...: with TLS=on, a CA and a certificate per NAME in DIR
# (deploy/certs.sh); TLS_DIR is DIR, absolute.
TLS_DIR=""
tls_setup() {
  mkdir -p "$1" || return 1
  TLS_DIR="$(cd "$1" && pwd)"
  shift
  if [ "$TLS" = on ]; then deploy/certs.sh "$TLS_DIR" "$@"; fi
}
# tls_env NAME: sets TLS_ENV to the `env` assignments that give a process NAME's files and
# mutual TLS (rpc/tls.h reads them: C++ daemons and Python scripts alike); with TLS=off, the
# daemons' leave to serve plaintext beyond loopback (the binding rule, docs/security.md).
TLS_ENV=()
tls_env() {
  # shellcheck disable=SC2034  # TLS_ENV is read by the launcher that sources this file
  TLS_ENV=("SHARDPS_INSECURE=true")
  if [ "$TLS" = on ]; then
    # shellcheck disable=SC2034  # TLS_ENV is read by the launcher that sources this file
    TLS_ENV=("SHARDPS_TLS_CA_FILE=$TLS_DIR/ca.crt" "SHARDPS_TLS_CERT_FILE=$TLS_DIR/$1.crt"
             "SHARDPS_TLS_KEY_FILE=$TLS_DIR/$1.key" "SHARDPS_TLS_CLIENT_AUTH=true")
  fi
}
