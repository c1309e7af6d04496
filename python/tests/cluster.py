"""Real daemons for the Python tests: PsCluster, processes of //ps_server:ps from the
runfiles, each at a loopback address of its own (127.A.B.C, a free port), configured by
TF_CONFIG, stopped (SIGTERM, then SIGKILL) by close(); Job, a whole job of an external model:
those ps, the chief and a Python script as its workers and evaluator."""

import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time


def _runfiles():
    return os.path.join(os.environ["TEST_SRCDIR"], os.environ.get("TEST_WORKSPACE", "shardps"))


def _free_address():
    """A loopback address no other test process is likely to pick, and a free port on it."""
    host = f"127.{random.randint(1, 254)}.{random.randint(1, 254)}.{random.randint(1, 254)}"
    with socket.socket() as s:
        s.bind((host, 0))
        return f"{host}:{s.getsockname()[1]}"


class PsCluster:
    def __init__(self, num_ps, extra_flags=()):
        self.addresses = [_free_address() for _ in range(num_ps)]
        self.chief = _free_address()  # never started: the config of a real job has one
        self.logdir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        self.procs = []
        for i in range(num_ps):
            self.procs.append(self._start(i, extra_flags))
        self._wait_healthy()

    def tf_config(self, task_type="worker", index=0):
        cluster = {"chief": [self.chief], "ps": self.addresses}
        if task_type == "worker":
            cluster["worker"] = ["127.0.0.1:1"]
        return json.dumps({"cluster": cluster, "task": {"type": task_type, "index": index}})

    def _start(self, i, extra_flags):
        env = dict(os.environ, TF_CONFIG=json.dumps(
            {"cluster": {"chief": [self.chief], "ps": self.addresses},
             "task": {"type": "ps", "index": i}}))
        log = open(os.path.join(self.logdir, f"ps-{i}.log"), "wb")
        return subprocess.Popen([os.path.join(_runfiles(), "ps_server/ps"), *extra_flags],
                                env=env, stdout=log, stderr=subprocess.STDOUT)

    def restart(self, i, extra_flags=()):
        self.kill(i)
        self.procs[i] = self._start(i, extra_flags)
        self._wait_healthy()

    def kill(self, i):
        if self.procs[i].poll() is None:
            self.procs[i].send_signal(signal.SIGKILL)
            self.procs[i].wait()

    def _wait_healthy(self, timeout=30.0):
        deadline = time.monotonic() + timeout
        for i, address in enumerate(self.addresses):
            host, port = address.rsplit(":", 1)
            while True:
                if self.procs[i].poll() is not None:
                    raise RuntimeError(f"ps {i} exited {self.procs[i].returncode}:\n{self.logs()}")
                try:
                    with socket.create_connection((host, int(port)), timeout=1):
                        break
                except OSError:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"ps {i} not listening after {timeout} s:\n"
                                           f"{self.logs()}") from None
                    time.sleep(0.05)

    def logs(self):
        out = []
        for name in sorted(os.listdir(self.logdir)):
            with open(os.path.join(self.logdir, name), errors="replace") as f:
                out.append(f"--- {name}\n{f.read()}")
        return "\n".join(out)

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


class Job:
    """One run of `job` (a job file's dict) in `tmp`: 2 ps, the chief, a worker per entry of
    worker_args running `script` with LOG and those arguments, and the script as the evaluator
    (with evaluator_args), each TF_CONFIG's task. The script logs "<min_version> <digest>
    [...]" per step to LOG (tmp/worker-I.steps) and its evaluations to tmp/evaluator.steps:
    "<version> <final> <digest> <accuracy> [...]", then "outcome <how the job ended>"."""

    def __init__(self, tmp, job, script, worker_args=((), ()), evaluator_args=(), task_env=None):
        self.tmp = tmp
        self.task_env = dict(task_env or {})  # more environment for the workers and evaluator
        self.script = script
        self.ps = PsCluster(2)
        self.chief = _free_address()
        self.workers = [_free_address() for _ in worker_args]
        cluster = {"chief": [self.chief], "ps": self.ps.addresses, "worker": self.workers,
                   "evaluator": [_free_address()]}
        job_file = os.path.join(tmp, "job.json")
        with open(job_file, "w") as f:
            json.dump(dict(job, checkpoint={"dir": os.path.join(tmp, "checkpoints"),
                                            "every_steps": 8}), f)
        self.chief_log = open(os.path.join(tmp, "chief.log"), "wb")
        self.chief_proc = subprocess.Popen(
            [os.path.join(_runfiles(), "coordinator/chief"), f"--job={job_file}"],
            env=dict(os.environ, TF_CONFIG=json.dumps(
                {"cluster": cluster, "task": {"type": "chief", "index": 0}})),
            stdout=self.chief_log, stderr=subprocess.STDOUT)
        self.worker_logs = []
        self.worker_procs = []
        for i, args in enumerate(worker_args):
            log = os.path.join(tmp, f"worker-{i}.steps")
            self.worker_logs.append(log)
            self.worker_procs.append(self.start_task(cluster, "worker", i, log, args))
        self.eval_log = os.path.join(tmp, "evaluator.steps")
        self.evaluator_proc = self.start_task(cluster, "evaluator", 0, self.eval_log,
                                              evaluator_args)
        self.cluster = cluster

    def start_task(self, cluster, kind, i, log, args):
        out = open(os.path.join(self.tmp, f"{kind}-{i}.log"), "ab")
        # -X faulthandler: a task stuck at the end dumps every thread's Python stack into its
        # log when wait() aborts it.
        return subprocess.Popen(
            [sys.executable, "-X", "faulthandler", self.script, log, *args],
            env=dict(os.environ, **self.task_env, TF_CONFIG=json.dumps(
                {"cluster": cluster, "task": {"type": kind, "index": i}})),
            stdout=out, stderr=subprocess.STDOUT)

    def wait(self, timeout=120):
        """The chief's exit code once it and every task have exited; a task still running
        30 s after the chief is aborted (its stacks go to its log) and named in the error."""
        code = self.chief_proc.wait(timeout=timeout)
        tasks = [*(f"worker-{i}" for i in range(len(self.worker_procs))), "evaluator-0"]
        stuck = []
        deadline = time.monotonic() + 30
        for name, p in zip(tasks, [*self.worker_procs, self.evaluator_proc]):
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                stuck.append(name)
                p.send_signal(signal.SIGABRT)
                p.wait()
        if stuck:
            raise AssertionError(f"{', '.join(stuck)} still running 30 s after the chief "
                                 f"exited {code}\n{self.logs()}")
        return code

    def evaluations(self):
        """The evaluator's lines "<version> <final> <digest> <accuracy> [more...]" as tuples
        (version, final, digest, accuracy, [more...]); sets self.outcome."""
        with open(self.eval_log) as f:
            lines = [line.split() for line in f]
        self.outcome = lines[-1][1] if lines and lines[-1][0] == "outcome" else None
        return [(int(l[0]), l[1] == "True", l[2], float(l[3]), l[4:])
                for l in lines if l[0] != "outcome"]

    def logs(self):
        out = []
        for name in sorted(os.listdir(self.tmp)):
            if name.endswith(".log"):
                with open(os.path.join(self.tmp, name), errors="replace") as f:
                    out.append(f"--- {name}\n{f.read()[-6000:]}")
        return "\n".join(out) + "\n" + self.ps.logs()

    def wait_for_steps(self, n, timeout=60):
        deadline = time.monotonic() + timeout
        while sum(1 for _ in self.lines()) < n:
            if time.monotonic() > deadline:
                raise AssertionError(f"fewer than {n} steps after {timeout} s\n{self.logs()}")
            time.sleep(0.02)

    def lines(self):
        for log in self.worker_logs:
            if os.path.exists(log):
                with open(log) as f:
                    for line in f:
                        if line.startswith("push after"):
                            raise AssertionError(f"{log}: {line}")
                        yield line.split()

    def versions(self):
        """min_version -> parameter digest, over every worker's steps."""
        seen = {}
        for version, digest, *_ in self.lines():
            if seen.setdefault(int(version), digest) != digest:
                raise AssertionError(f"version {version} pulled with two values")
        return seen

    def batches(self):
        """(epoch, batch index) -> the example indices its steps saw (the same every time)."""
        seen = {}
        for _, _, epoch, batch, indices in self.lines():
            values = [int(i) for i in indices.split(",")]
            if seen.setdefault((int(epoch), int(batch)), values) != values:
                raise AssertionError(f"epoch {epoch} batch {batch} seen with two batches")
        return seen

    def close(self):
        for p in [self.chief_proc, *self.worker_procs, self.evaluator_proc]:
            if p.poll() is None:
                p.kill()
                p.wait()
        self.ps.close()
