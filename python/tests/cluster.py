"""Real ps daemons for the Python tests: processes of //ps_server:ps from the runfiles, each
at a loopback address of its own (127.A.B.C, a free port), configured by TF_CONFIG, stopped
(SIGTERM, then SIGKILL) by close()."""

import json
import os
import random
import signal
import socket
import subprocess
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
