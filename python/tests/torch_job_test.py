"""shardps.torch in a real job: a sync click model (dynamic and fixed tables, a dense head)
of two torch workers and a torch evaluator ends bit-identical run after run, also when each
batch comes through a DataLoader whose worker processes fork while the extension's gRPC and
follower threads run (which must not hang)."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

from cluster import Job

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "torch_worker.py")


def variables():
    out = subprocess.run([sys.executable, SCRIPT, "-", "--variables"], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout)


JOB = {
    "name": "torch-clicks", "model": "external", "dataset": "external",
    "examples_per_epoch": 512, "batch_size": 32, "epochs": 8, "mode": "sync",
    "optimizer": {"type": "adam", "learning_rate": 0.05},
    "embedding_optimizer": {"type": "adagrad", "learning_rate": 0.5},
    "partitioner": "fixed:2", "step_timeout_ms": 20000, "seed": 3,
}


class TorchJobTest(unittest.TestCase):
    def run_job(self, loader_workers=0):
        tmp = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        args = ("--loader_workers", str(loader_workers))
        job = Job(tmp, dict(JOB, variables=variables()), SCRIPT, (args, args), args)
        try:
            self.assertEqual(job.wait(timeout=240), 0, job.logs())
            versions = job.versions()
            evaluations = job.evaluations()
            self.assertEqual(job.outcome, "succeeded", job.logs())
            final = [e for e in evaluations if e[1]]
            self.assertEqual(len(final), 1, evaluations)
            return versions, final[0]
        finally:
            job.close()

    def test_sync_torch_job_is_bit_identical_and_learns(self):
        versions, final = self.run_job()
        # 8 epochs of 16 batches, each sync step done by 2 replicas: versions 0..63.
        self.assertEqual(sorted(versions), list(range(64)))
        self.assertEqual(final[0], 64)
        print(f"final evaluation: version {final[0]}, accuracy {final[3]}")
        self.assertGreater(final[3], 0.75, final)  # the planted clicks are learnable
        again = self.run_job()
        self.assertEqual(again, (versions, final))
        with_loader = self.run_job(loader_workers=2)
        self.assertEqual(with_loader, (versions, final))


if __name__ == "__main__":
    unittest.main()
