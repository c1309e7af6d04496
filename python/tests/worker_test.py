"""shardps.Worker against a real chief and ps: a sync job of an external model computed by two
Python workers ends bit-identical (the pulled parameters, version by version) whether it
runs plainly, with a step that raises, or with a worker killed mid-job."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

from cluster import PsCluster, _free_address, _runfiles

JOB = {
    "name": "numpy-softmax", "model": "external", "dataset": "external",
    "examples_per_epoch": 512, "batch_size": 32, "epochs": 3, "mode": "sync",
    "optimizer": {"type": "sgd", "learning_rate": 0.5}, "partitioner": "fixed:2",
    "step_timeout_ms": 10000,
    "variables": [{"name": "w", "shape": [8, 2]}, {"name": "b", "shape": [2]}],
}
HERE = os.path.dirname(os.path.abspath(__file__))


class Job:
    """One run: 2 ps, the chief (running JOB) and 2 numpy workers; returns their logs."""

    def __init__(self, tmp, worker_args=((), ())):
        self.tmp = tmp
        self.ps = PsCluster(2)
        self.chief = _free_address()
        self.workers = [_free_address() for _ in worker_args]
        cluster = {"chief": [self.chief], "ps": self.ps.addresses, "worker": self.workers}
        job_file = os.path.join(tmp, "job.json")
        with open(job_file, "w") as f:
            json.dump(JOB, f)
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
            self.worker_procs.append(self.start_worker(cluster, i, log, args))
        self.cluster = cluster

    def start_worker(self, cluster, i, log, args):
        out = open(os.path.join(self.tmp, f"worker-{i}.log"), "ab")
        return subprocess.Popen(
            [sys.executable, os.path.join(HERE, "numpy_worker.py"), log, *args],
            env=dict(os.environ, TF_CONFIG=json.dumps(
                {"cluster": cluster, "task": {"type": "worker", "index": i}})),
            stdout=out, stderr=subprocess.STDOUT)

    def wait(self, timeout=120):
        code = self.chief_proc.wait(timeout=timeout)
        for p in self.worker_procs:
            p.wait(timeout=30)
        return code

    def logs(self):
        out = []
        for name in sorted(os.listdir(self.tmp)):
            if name.endswith(".log"):
                with open(os.path.join(self.tmp, name), errors="replace") as f:
                    out.append(f"--- {name}\n{f.read()[-3000:]}")
        return "\n".join(out) + "\n" + self.ps.logs()

    def versions(self):
        """min_version -> parameter digest, over every worker's steps."""
        seen = {}
        for log in self.worker_logs:
            if not os.path.exists(log):
                continue
            with open(log) as f:
                for line in f:
                    version, digest = line.split()
                    if seen.setdefault(int(version), digest) != digest:
                        raise AssertionError(f"version {version} pulled with two values")
        return seen

    def close(self):
        for p in [self.chief_proc, *self.worker_procs]:
            if p.poll() is None:
                p.kill()
                p.wait()
        self.ps.close()


class WorkerTest(unittest.TestCase):
    def run_job(self, worker_args=((), ()), after_start=None):
        tmp = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        job = Job(tmp, worker_args)
        try:
            if after_start is not None:
                after_start(job)
            code = job.wait()
            self.assertEqual(code, 0, job.logs())
            with open(os.path.join(tmp, "chief.log"), errors="replace") as f:
                self.assertIn("SUCCEEDED", f.read(), job.logs())
            return job.versions(), job
        finally:
            job.close()

    def test_sync_job_is_bit_identical_plain_failed_step_and_killed_worker(self):
        plain, _ = self.run_job()
        # 3 epochs of 16 batches, each sync step done by 2 replicas: versions 0..23.
        self.assertEqual(sorted(plain), list(range(24)), plain)
        again, _ = self.run_job()
        self.assertEqual(again, plain)
        failed, job = self.run_job(worker_args=(("--fail_step", "5"), ("--fail_step", "5")))
        self.assertEqual(failed, plain)
        self.assertTrue(any(n.startswith("worker-") and ".failed-5" in n
                            for n in os.listdir(job.tmp)), "the planned failure never ran")
        # Worker 1 is slow, so worker 0 surely runs its 3 steps however late it started.
        killed, job = self.run_job(worker_args=(("--die_after", "3"), ("--step_sleep", "0.05")))
        self.assertEqual(killed, plain)
        self.assertEqual(job.worker_procs[0].returncode, -signal.SIGKILL)


if __name__ == "__main__":
    unittest.main()
