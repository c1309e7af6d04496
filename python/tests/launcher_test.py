"""deploy/run_local.sh --python: the launcher starts the ps, the chief and two copies of
examples/numpy_linear.py as the workers and the evaluator, and a short job of it ends
SUCCEEDED with the launcher's usual final line and the test accuracy the script's evaluator
reported; a script that cannot be read is a bad command line (exit 2)."""

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

from cluster import _runfiles


class LauncherTest(unittest.TestCase):
    def launch(self, job, script, run_dir, extra=(), launcher="run_local.sh"):
        root = _runfiles()
        env = dict(os.environ, SHARDPS_BIN=root, SHARDPS_PYTHON=sys.executable,
                   PYTHONPATH=os.path.join(root, "python"))
        return subprocess.run(
            [os.path.join(root, "deploy", launcher), job,
             *(["--python", script] if script else []), "--run_dir", run_dir, *extra],
            cwd=root, env=env, capture_output=True, text=True, timeout=300)

    def test_a_short_numpy_linear_job_succeeds(self):
        self.run_short_job()

    def test_the_namespace_launcher_runs_the_script_in_pods(self):
        if os.geteuid() != 0 or shutil.which("ip") is None:
            self.skipTest("needs root and iproute2 (network namespaces)")
        prefix = f"py{random.randint(0, 99999999):08d}"
        subnet = f"10.239.{random.randint(0, 255)}"
        self.run_short_job("run_netns.sh", ["--prefix", prefix, "--subnet", subnet])

    def run_short_job(self, launcher="run_local.sh", extra=()):
        tmp = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        root = _runfiles()
        with open(os.path.join(root, "examples/numpy_linear.json")) as f:
            job = json.load(f)
        job.update(examples_per_epoch=12800, epochs=1)  # 100 worker steps
        job_file = os.path.join(tmp, "job.json")
        with open(job_file, "w") as f:
            json.dump(job, f)
        run_dir = os.path.join(tmp, "run")
        result = self.launch(job_file, os.path.join(root, "examples/numpy_linear.py"), run_dir,
                             extra, launcher)
        logs = "".join(open(os.path.join(run_dir, n), errors="replace").read()[-2000:]
                       for n in sorted(os.listdir(run_dir)) if n.endswith(".log"))
        output = result.stdout + result.stderr + logs
        self.assertEqual(result.returncode, 0, output)
        self.assertIn("SUCCEEDED", result.stdout, output)
        self.assertRegex(result.stderr, r"workers running \S*/examples/numpy_linear\.py", output)
        # The script's evaluator scored the final model on the test split and the chief has
        # it (the same run gives 0.778 on every machine: the job is sync).
        final = [l for l in result.stdout.splitlines() if "final test accuracy" in l]
        self.assertEqual(len(final), 1, output)
        self.assertIn("after 1 epoch, 100 steps", final[0], output)
        accuracy = float(final[0].split("final test accuracy: ")[1].split()[0])
        self.assertGreater(accuracy, 0.72, output)
        with open(os.path.join(run_dir, "metrics.jsonl")) as f:
            records = [json.loads(line) for line in f]
        self.assertTrue(records[-1]["final"], records[-1])
        self.assertAlmostEqual(records[-1]["accuracy"], accuracy, places=4)
        for name in ("worker-0", "worker-1", "evaluator-0"):  # each ran the script
            self.assertTrue(os.path.exists(os.path.join(run_dir, f"{name}.log")), output)

    def test_certificates_rotated_mid_job_are_served_without_a_restart(self):
        """Every daemon's certificate is made again (same CA, new keys) while the job runs,
        with the files read every second: the job ends SUCCEEDED, no daemon restarted, and
        the ps serves the new certificate."""
        if shutil.which("openssl") is None:
            self.skipTest("needs openssl")
        tmp = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        root = _runfiles()
        with open(os.path.join(root, "examples/numpy_linear.json")) as f:
            job = json.load(f)
        job.update(examples_per_epoch=51200, epochs=1)  # 400 worker steps
        job_file = os.path.join(tmp, "job.json")
        with open(job_file, "w") as f:
            json.dump(job, f)
        run_dir = os.path.join(tmp, "run")
        env = dict(os.environ, SHARDPS_BIN=root, SHARDPS_PYTHON=sys.executable,
                   PYTHONPATH=os.path.join(root, "python"), SHARDPS_TLS_REFRESH_S="1")
        launcher = subprocess.Popen(
            [os.path.join(root, "deploy", "run_local.sh"), job_file, "--python",
             os.path.join(root, "examples/numpy_linear.py"), "--run_dir", run_dir],
            cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        tls = os.path.join(run_dir, "tls")
        try:
            # Once the job has started (the chief logs its first steps), rotate.
            chief_log = os.path.join(run_dir, "chief-0.log")
            deadline = time.time() + 120
            while time.time() < deadline and launcher.poll() is None:
                if os.path.exists(chief_log) and "steps" in open(chief_log).read():
                    break
                time.sleep(0.2)
            self.assertIsNone(launcher.poll(), "the job ended before the rotation")
            old = self.fingerprint(os.path.join(tls, "ps-0.crt"))
            specs = []
            for name in sorted(os.listdir(tls)):
                if name.endswith(".sans"):
                    with open(os.path.join(tls, name)) as f:
                        specs.append(f"{name[:-5]}={f.read()}")
                    os.remove(os.path.join(tls, name))  # makes certs.sh issue it again
            subprocess.run([os.path.join(root, "deploy", "certs.sh"), tls, *specs], check=True)
            new = self.fingerprint(os.path.join(tls, "ps-0.crt"))
            self.assertNotEqual(old, new)
            with open(os.path.join(tls, "ps-0.sans")) as f:
                ps_ip = [s[3:] for s in f.read().split(",") if s.startswith("IP:")][0]
            served = None
            deadline = time.time() + 30
            while time.time() < deadline and served != new and launcher.poll() is None:
                time.sleep(0.5)
                served = self.served_fingerprint(f"{ps_ip}:2222", tls)
            self.assertEqual(served, new, "the ps still serves its old certificate")
            stdout, stderr = launcher.communicate(timeout=240)
        finally:
            if launcher.poll() is None:
                launcher.terminate()
                launcher.communicate(timeout=60)
        output = stdout + stderr
        self.assertEqual(launcher.returncode, 0, output)
        self.assertIn("SUCCEEDED", stdout, output)
        self.assertNotIn("restarting", stderr, output)

    @staticmethod
    def fingerprint(path):
        out = subprocess.run(["openssl", "x509", "-in", path, "-noout", "-fingerprint",
                              "-sha256"], capture_output=True, text=True, check=True)
        return out.stdout.strip().split("=", 1)[1]

    @staticmethod
    def served_fingerprint(address, tls):
        """The fingerprint of the certificate served at `address` (mutual TLS: as shardctl)."""
        hello = subprocess.run(
            ["openssl", "s_client", "-connect", address, "-CAfile", f"{tls}/ca.crt",
             "-cert", f"{tls}/shardctl.crt", "-key", f"{tls}/shardctl.key", "-alpn", "h2"],
            # The server's HTTP/2 frames follow the handshake in the output: not UTF-8.
            input="", capture_output=True, text=True, errors="replace", timeout=10)
        pem = hello.stdout[hello.stdout.find("-----BEGIN CERTIFICATE-----"):
                           hello.stdout.find("-----END CERTIFICATE-----") + 25]
        if not pem.startswith("-----BEGIN"):
            return None
        out = subprocess.run(["openssl", "x509", "-noout", "-fingerprint", "-sha256"],
                             input=pem, capture_output=True, text=True)
        return out.stdout.strip().split("=", 1)[1] if out.returncode == 0 else None

    def test_an_unreadable_script_is_a_bad_command_line(self):
        root = _runfiles()
        result = self.launch(os.path.join(root, "examples/numpy_linear.json"),
                             "/nonexistent/script.py", tempfile.mkdtemp())
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertIn('cannot read --python script "/nonexistent/script.py"', result.stderr)

    def test_no_evaluator_goes_with_python(self):
        root = _runfiles()
        result = self.launch(os.path.join(root, "examples/numpy_linear.json"), "",
                             tempfile.mkdtemp(), extra=["--no_evaluator"])
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertIn("--no_evaluator goes with --python", result.stderr)


if __name__ == "__main__":
    unittest.main()
