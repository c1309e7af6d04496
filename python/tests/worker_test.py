"""shardps.Worker and shardps.Evaluator against a real chief and ps: a sync job of an external
model computed by two Python workers ends bit-identical (the pulled parameters, version by
version, and the final model the Python evaluator reports) whether it runs plainly, with a
step that raises, or with a worker killed mid-job; each epoch's batches cover the data once."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import shardps
from cluster import PsCluster, _free_address, _runfiles

JOB = {
    "name": "numpy-softmax", "model": "external", "dataset": "external",
    "examples_per_epoch": 512, "batch_size": 32, "epochs": 3, "mode": "sync",
    "optimizer": {"type": "sgd", "learning_rate": 0.5}, "partitioner": "fixed:2",
    "step_timeout_ms": 10000, "seed": 11,
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
        cluster = {"chief": [self.chief], "ps": self.ps.addresses, "worker": self.workers,
                   "evaluator": [_free_address()]}
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
            self.worker_procs.append(self.start_task(cluster, "worker", i, log, args))
        self.eval_log = os.path.join(tmp, "evaluator.steps")
        self.evaluator_proc = self.start_task(cluster, "evaluator", 0, self.eval_log, ())
        self.cluster = cluster

    def start_task(self, cluster, kind, i, log, args):
        out = open(os.path.join(self.tmp, f"{kind}-{i}.log"), "ab")
        return subprocess.Popen(
            [sys.executable, os.path.join(HERE, "numpy_worker.py"), log, *args],
            env=dict(os.environ, TF_CONFIG=json.dumps(
                {"cluster": cluster, "task": {"type": kind, "index": i}})),
            stdout=out, stderr=subprocess.STDOUT)

    def wait(self, timeout=120):
        code = self.chief_proc.wait(timeout=timeout)
        for p in [*self.worker_procs, self.evaluator_proc]:
            p.wait(timeout=30)
        return code

    def evaluations(self):
        """The evaluator's lines: (version, consistent, final, digest, accuracy) and outcome."""
        with open(self.eval_log) as f:
            lines = [line.split() for line in f]
        self.outcome = lines[-1][1] if lines and lines[-1][0] == "outcome" else None
        return [(int(v), c == "True", f == "True", d, float(a))
                for v, c, f, d, a in (l for l in lines if l[0] != "outcome")]

    def logs(self):
        out = []
        for name in sorted(os.listdir(self.tmp)):
            if name.endswith(".log"):
                with open(os.path.join(self.tmp, name), errors="replace") as f:
                    out.append(f"--- {name}\n{f.read()[-3000:]}")
        return "\n".join(out) + "\n" + self.ps.logs()

    def lines(self):
        for log in self.worker_logs:
            if os.path.exists(log):
                with open(log) as f:
                    yield from (line.split() for line in f)

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
            job.batches()  # raises when a re-run step saw another batch
            return job.versions(), job
        finally:
            job.close()

    def final_evaluation(self, job):
        """The evaluator followed the job to its end and reported the final model, consistent
        and at the job's last version; returns (digest, accuracy)."""
        evaluations = job.evaluations()
        self.assertEqual(job.outcome, "succeeded", job.logs())
        final = [e for e in evaluations if e[2]]
        self.assertEqual(len(final), 1, evaluations)
        version, consistent, _, digest, accuracy = final[0]
        self.assertEqual((version, consistent), (24, True), evaluations)
        self.assertEqual(job.evaluator_proc.returncode, 0)
        return digest, accuracy

    def check_batches(self, batches):
        """Each epoch visits every example once, in batches of the job's size, shuffled anew."""
        size, examples = JOB["batch_size"], JOB["examples_per_epoch"]
        orders = []
        for epoch in range(JOB["epochs"]):
            order = []
            for b in range(examples // size):
                self.assertIn((epoch, b), batches)
                self.assertEqual(len(batches[(epoch, b)]), size)
                order += batches[(epoch, b)]
            self.assertEqual(sorted(order), list(range(examples)), f"epoch {epoch}")
            orders.append(order)
        self.assertNotEqual(orders[0], orders[1])
        self.assertEqual(batches[(1, 3)],
                         shardps.batch_indices(examples, JOB["seed"], 1, 3, size).tolist())

    def test_sync_job_is_bit_identical_plain_failed_step_and_killed_worker(self):
        plain, plain_job = self.run_job()
        # 3 epochs of 16 batches, each sync step done by 2 replicas: versions 0..23.
        self.assertEqual(sorted(plain), list(range(24)), plain)
        self.check_batches(plain_job.batches())
        final = self.final_evaluation(plain_job)
        self.assertGreater(final[1], 0.8)  # the planted classes are learnable
        again, job = self.run_job()
        self.assertEqual(again, plain)
        self.assertEqual(self.final_evaluation(job), final)
        failed, job = self.run_job(worker_args=(("--fail_step", "5"), ("--fail_step", "5")))
        self.assertEqual(failed, plain)
        self.assertEqual(self.final_evaluation(job), final)
        self.assertTrue(any(n.startswith("worker-") and ".failed-5" in n
                            for n in os.listdir(job.tmp)), "the planned failure never ran")
        # Worker 1 is slow, so worker 0 surely runs its 3 steps however late it started.
        killed, job = self.run_job(worker_args=(("--die_after", "3"), ("--step_sleep", "0.05")))
        self.assertEqual(killed, plain)
        self.assertEqual(self.final_evaluation(job), final)
        self.assertEqual(job.worker_procs[0].returncode, -signal.SIGKILL)


if __name__ == "__main__":
    unittest.main()
