"""The PyTorch examples in short forms, through the launcher (deploy/run_local.sh --python: 2
ps, the chief, 2 workers and the script's evaluator), with their accuracy and AUC checks:
examples/fashion_cnn.py learns, examples/movielens_two_tower.py reaches the held-out AUC of
the same model and optimizer rule trained in one process, and each example's job file
declares exactly what its model has (shardps.torch.declare)."""

import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

from cluster import _runfiles


def example(name):
    return os.path.join(_runfiles(), "examples", name)


class ExamplesTest(unittest.TestCase):
    def short_job(self, name, **changes):
        with open(example(name + ".json")) as f:
            job = json.load(f)
        job.update(changes)
        path = os.path.join(tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR")), "job.json")
        with open(path, "w") as f:
            json.dump(job, f)
        return path, job

    def launch(self, job_file, script):
        root = _runfiles()
        run_dir = os.path.join(os.path.dirname(job_file), "run")
        env = dict(os.environ, SHARDPS_BIN=root, SHARDPS_PYTHON=sys.executable,
                   PYTHONPATH=os.path.join(root, "python"))
        result = subprocess.run([os.path.join(root, "deploy/run_local.sh"), job_file,
                                 "--python", script, "--run_dir", run_dir],
                                cwd=root, env=env, capture_output=True, text=True, timeout=600)
        logs = ""
        for n in sorted(os.listdir(run_dir)):
            if n.endswith(".log"):
                with open(os.path.join(run_dir, n), errors="replace") as f:
                    logs += f"--- {n}\n" + f.read()[-3000:]
        output = result.stdout + result.stderr + logs
        self.assertEqual(result.returncode, 0, output)
        final = [l for l in result.stdout.splitlines() if l.startswith("final test accuracy")]
        self.assertEqual(len(final), 1, output)
        print(final[0])
        return final[0], output

    def declared(self, script):
        out = subprocess.run([sys.executable, example(script), "--variables"],
                             capture_output=True, text=True, check=True,
                             env=dict(os.environ, PYTHONPATH=os.path.join(_runfiles(), "python")))
        return json.loads(out.stdout)

    def assert_declares_the_model(self, name):
        with open(example(name + ".json")) as f:
            job = json.load(f)
        model = self.declared(name + ".py")
        self.assertEqual([(v["name"], v["shape"]) for v in job["variables"]],
                         [(v["name"], v["shape"]) for v in model])
        for got, want in zip(job["variables"], model):
            for bound in ("minval", "maxval"):
                if bound in want["initializer"]:
                    self.assertAlmostEqual(got["initializer"][bound], want["initializer"][bound],
                                           places=8)

    def test_fashion_cnn_learns(self):
        self.assert_declares_the_model("fashion_cnn")
        # 25,600 examples, one epoch: 400 batches of 64, 200 sync steps (about 30 s).
        job_file, _ = self.short_job("fashion_cnn", examples_per_epoch=25600, epochs=1,
                                     eval_every_steps=1000)
        final, output = self.launch(job_file, example("fashion_cnn.py"))
        accuracy = float(re.search(r"final test accuracy: ([0-9.]+)", final).group(1))
        self.assertGreater(accuracy, 0.78, output)

    def test_movielens_two_tower_matches_one_process(self):
        if not os.environ.get("SHARDPS_MOVIELENS_DIR"):
            self.skipTest("SHARDPS_MOVIELENS_DIR is not set (deploy/test.sh sets it to "
                          "data/movielens/prepare.sh's directory)")
        self.assert_declares_the_model("movielens_two_tower")
        # The whole example (5 epochs, 1570 sync steps: about 30 s on 2 cores).
        job_file, job = self.short_job("movielens_two_tower", eval_every_steps=10000)
        final, output = self.launch(job_file, example("movielens_two_tower.py"))
        got = float(re.search(r"AUC ([0-9.]+)", final).group(1))
        out = subprocess.run([sys.executable, example("movielens_two_tower.py"), "--reference",
                              "--job", job_file], capture_output=True, text=True, check=True,
                             env=dict(os.environ, PYTHONPATH=os.path.join(_runfiles(), "python")))
        reference = json.loads(out.stdout)
        print(f"held-out AUC: shardps {got:.4f}, one process {reference['auc']:.4f}")
        self.assertGreater(got, 0.75, output)
        self.assertLess(abs(got - reference["auc"]), 0.005, (got, reference, output))


if __name__ == "__main__":
    unittest.main()
