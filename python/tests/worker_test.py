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
from cluster import Job, _free_address

JOB = {
    "name": "numpy-softmax", "model": "external", "dataset": "external",
    "examples_per_epoch": 512, "batch_size": 32, "epochs": 3, "mode": "sync",
    "optimizer": {"type": "sgd", "learning_rate": 0.5}, "partitioner": "fixed:2",
    "step_timeout_ms": 10000, "seed": 11,
    "variables": [{"name": "w", "shape": [8, 2]}, {"name": "b", "shape": [2]}],
}
HERE = os.path.dirname(os.path.abspath(__file__))


def parse_metrics(path):
    """A Prometheus text file as {"name{labels}": value} (comments left out)."""
    out = {}
    with open(path) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
    return out


class WorkerTest(unittest.TestCase):
    def run_job(self, worker_args=((), ()), after_start=None):
        tmp = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        job = Job(tmp, JOB, os.path.join(HERE, "numpy_worker.py"), worker_args)
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
        final = [e for e in evaluations if e[1]]
        self.assertEqual(len(final), 1, evaluations)
        version, _, digest, accuracy, (consistent,) = final[0]
        self.assertEqual((version, consistent), (24, "True"), evaluations)
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

        # A ps killed and restarted empty mid-job: the steps in flight fail (PsStateLost in
        # Python, caught by `with step`), the chief rolls back to its last checkpoint, and the
        # job ends with the same parameters at every version.
        def kill_a_ps(job):
            job.wait_for_steps(20)
            # A checkpoint to roll back to must be committed first (under load the first one
            # can still be on its way at 20 steps).
            deadline = time.monotonic() + 60
            while "committed at step" not in open(os.path.join(job.tmp, "chief.log"),
                                                  errors="replace").read():
                self.assertLess(time.monotonic(), deadline, job.logs())
                time.sleep(0.02)
            job.ps.restart(1)
        lost, job = self.run_job(worker_args=((), ("--step_sleep", "0.02")),
                                 after_start=kill_a_ps)
        self.assertEqual(lost, plain)
        self.assertEqual(self.final_evaluation(job), final)
        with open(os.path.join(job.tmp, "chief.log"), errors="replace") as f:
            self.assertRegex(f.read(), r"rolled back to checkpoint \d+", job.logs())

    def test_worker_and_evaluator_serve_metrics_and_write_tensorboard_events(self):
        """As the daemons do: each task's /metrics (scraped by the task itself over HTTP when
        the job ends) counts the steps it ran and the evaluations it made, and the evaluator
        writes TensorBoard events whose last accuracy is the final evaluation's."""
        tmp = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        port = int(_free_address().rsplit(":", 1)[1])  # each task binds it on its own address
        scrapes = [os.path.join(tmp, f"worker-{i}.metrics") for i in range(2)]
        eval_scrape = os.path.join(tmp, "evaluator.metrics")
        tensorboard_dir = os.path.join(tmp, "tensorboard")
        job = Job(tmp, JOB, os.path.join(HERE, "numpy_worker.py"),
                  [("--scrape", path) for path in scrapes], ("--scrape", eval_scrape),
                  task_env={"SHARDPS_METRICS_PORT": str(port),
                            "SHARDPS_TENSORBOARD_DIR": tensorboard_dir})
        try:
            self.assertEqual(job.wait(), 0, job.logs())
            digest, accuracy = self.final_evaluation(job)
            steps_logged = [0, 0]
            for i, log in enumerate(job.worker_logs):
                with open(log) as f:
                    steps_logged[i] = sum(1 for _ in f)
            self.assertEqual(sum(steps_logged), 48)  # 3 epochs of 16 steps, 2 replicas each
            for i, path in enumerate(scrapes):
                metrics = parse_metrics(path)
                self.assertEqual(metrics['shardps_worker_steps_total{outcome="ok"}'],
                                 steps_logged[i], path)
                self.assertEqual(metrics["shardps_worker_examples_total"], 32 * steps_logged[i])
                self.assertEqual(
                    metrics['shardps_worker_step_phase_seconds_count{phase="push"}'],
                    steps_logged[i])
            evals = parse_metrics(eval_scrape)
            self.assertEqual(evals["shardps_evaluator_evaluations_total"],
                             len(job.evaluations()))
            self.assertAlmostEqual(evals["shardps_evaluator_accuracy"], accuracy, places=6)
            events = [name for name in os.listdir(tensorboard_dir) if "tfevents" in name]
            self.assertEqual(len(events), 1, os.listdir(tensorboard_dir))
            try:
                from tensorboard.backend.event_processing import event_accumulator
            except ImportError:
                self.skipTest("the tensorboard package is not installed (deploy/python_env.sh)")
            acc = event_accumulator.EventAccumulator(tensorboard_dir)
            acc.Reload()
            series = acc.Scalars("eval/accuracy")
            self.assertEqual(len(series), len(job.evaluations()))
            self.assertAlmostEqual(series[-1].value, accuracy, places=6)
        finally:
            job.close()

    def test_a_worker_that_joins_and_leaves_keeps_the_sync_job_bit_identical(self):
        """Elastic workers (docs/elastic.md): a third shardps.Worker, whose TF_CONFIG names
        only itself of the workers (TFJob's sparse form), joins the running sync job, takes
        replicas, and on SIGTERM leaves and exits 0; the job's parameters, version by
        version, equal a plain run's."""
        slow = ("--step_sleep", "0.15")
        plain, _ = self.run_job(worker_args=(slow, slow))
        tmp = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        job = Job(tmp, JOB, os.path.join(HERE, "numpy_worker.py"), (slow, slow))
        try:
            job.wait_for_steps(4)
            cluster = dict(job.cluster, worker={"2": _free_address()})
            log = os.path.join(tmp, "worker-2.steps")
            job.worker_logs.append(log)
            extra = job.start_task(cluster, "worker", 2, log, slow)
            deadline = time.monotonic() + 60
            while not (os.path.exists(log) and sum(1 for _ in open(log)) >= 2):
                self.assertLess(time.monotonic(), deadline, job.logs())
                self.assertIsNone(extra.poll(), job.logs())
                time.sleep(0.05)
            extra.send_signal(signal.SIGTERM)
            self.assertEqual(extra.wait(timeout=60), 0, job.logs())
            self.assertEqual(job.wait(), 0, job.logs())
            with open(os.path.join(tmp, "chief.log"), errors="replace") as f:
                chief_log = f.read()
            self.assertIn("worker 2 at", chief_log)
            self.assertIn("left (", chief_log)
            self.assertEqual(job.versions(), plain)
        finally:
            job.close()

    def test_a_step_that_always_raises_fails_the_job_clearly(self):
        tmp = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        args = ("--always_fail_step", "5")
        job = Job(tmp, JOB, os.path.join(HERE, "numpy_worker.py"), (args, args))
        try:
            code = job.wait()
            self.assertNotEqual(code, 0, job.logs())
            with open(os.path.join(tmp, "chief.log"), errors="replace") as f:
                log = f.read()
            self.assertIn("FAILED", log, job.logs())
            self.assertIn("step 5 always fails", log, job.logs())
            job.evaluations()
            self.assertEqual(job.outcome, "job_failed", job.logs())
        finally:
            job.close()

    def test_each_class_refuses_the_other_tasks_config(self):
        cluster = {"chief": [_free_address()], "ps": [_free_address()],
                   "worker": [_free_address()], "evaluator": [_free_address()]}

        def config(kind):
            return json.dumps({"cluster": cluster, "task": {"type": kind, "index": 0}})
        with self.assertRaisesRegex(shardps.InvalidArgument,
                                    "shardps.Worker is a \"worker\" task, not \"evaluator\" "
                                    r"\(the job's evaluator runs shardps.Evaluator"):
            shardps.Worker(config("evaluator"))
        with self.assertRaisesRegex(shardps.InvalidArgument,
                                    "shardps.Evaluator is an \"evaluator\" task, not "
                                    "\"worker\""):
            shardps.Evaluator(config("worker"))
        self.assertEqual(shardps.task(config("evaluator")), ("evaluator", 0))

    def test_a_worker_whose_chief_is_gone_stops_orphaned(self):
        """No chief answers (nothing listens at its address): after orphan_timeout without a
        call from it, steps() ends and stop_reason says the worker was orphaned, as the worker
        daemon exits "orphaned" after --orphan_timeout_s. A bad timeout is refused."""
        cluster = {"chief": [_free_address()], "ps": [_free_address()],
                   "worker": [_free_address()]}
        config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 0}})
        with self.assertRaisesRegex(shardps.InvalidArgument, "orphan_timeout must be >= 0"):
            shardps.Worker(config, orphan_timeout=-1)
        start = time.monotonic()
        with shardps.Worker(config, orphan_timeout=1.0, leave_on_sigterm=False) as worker:
            self.assertEqual(list(worker.steps()), [])
            self.assertIn("orphaned", worker.stop_reason)
        self.assertGreaterEqual(time.monotonic() - start, 1.0)
        self.assertLess(time.monotonic() - start, 10.0)

    def test_ctrl_c_interrupts_a_worker_waiting_for_steps(self):
        """SIGINT while shardps.Worker waits for the chief's next step: KeyboardInterrupt
        within about a second (no chief here ever leases one)."""
        tmp = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        cluster = {"chief": [_free_address()], "ps": [_free_address()],
                   "worker": [_free_address()]}
        proc = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "numpy_worker.py"), os.path.join(tmp, "log")],
            env=dict(os.environ, TF_CONFIG=json.dumps(
                {"cluster": cluster, "task": {"type": "worker", "index": 0}})),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            time.sleep(1.0)  # serving and waiting
            self.assertIsNone(proc.poll(), proc.stdout.read() if proc.poll() is not None else "")
            start = time.monotonic()
            proc.send_signal(signal.SIGINT)
            out, _ = proc.communicate(timeout=10)
            self.assertLess(time.monotonic() - start, 2.0)
            self.assertIn(b"KeyboardInterrupt", out)
            self.assertNotEqual(proc.returncode, 0)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


if __name__ == "__main__":
    unittest.main()
