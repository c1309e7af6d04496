"""python_vs_cpp: C++ workers against PyTorch workers (shardps.torch) on the same launcher
and cluster shape (2 ps, 2 workers, an evaluator), alternating runs:

    bench/python/python_vs_cpp.sh [--workload mlp|movielens] [--rounds R] [--epochs E]

mlp (default): the main job's MLP 784-256-128-10, deploy/jobs/fashion_mlp.json, against the
same job with model "external" (torch_mlp.json) trained by torch_mlp.py; the metric is the
test accuracy, target 0.880 (time <= 1.4x the C++ workers', final accuracy within 0.005).
movielens: the C++ DLRM worker (embeddings dim 16 summed, concat, top MLP 64) against
examples/movielens_two_tower.py, a job of the same shape (sync, batch 128 per worker, Adagrad
0.1 in TensorFlow's form, fixed:2, 5 epochs); the metric is the held-out AUC, target 0.75
(aim: at least half the C++ worker's speed). The models differ, so both the training time
and the time to the target are reported.

Per run: the time to the target (the job's elapsed time at the first evaluation at or above
it), the final metric and the training time; then the medians and Python / C++. The last
line is the host's load and other processes' CPU.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def run(job, epochs, script, python, bin_dir):
    tmp = tempfile.mkdtemp(prefix="python_vs_cpp-")
    with open(job) as f:
        spec = json.load(f)
    spec["epochs"] = epochs
    job_file = os.path.join(tmp, "job.json")
    with open(job_file, "w") as f:
        json.dump(spec, f)
    args = [os.path.join(ROOT, "deploy/run_local.sh"), job_file, "--run_dir",
            os.path.join(tmp, "run")]
    if script:
        args += ["--python", script]
    env = dict(os.environ, SHARDPS_BIN=bin_dir, SHARDPS_PYTHON=python)
    out = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(args)} exited {out.returncode}:\n{out.stderr[-3000:]}")
    final = re.search(r"final test accuracy: .* after .*, ([0-9.]+) s, mode", out.stdout)
    with open(os.path.join(tmp, "run", "metrics.jsonl")) as f:
        evals = [json.loads(line) for line in f]
    return evals[-1], float(final.group(1)), evals


def time_to(evals, target, metric):
    for e in evals:
        if e[metric] >= target and e.get("job_elapsed_s", 0) > 0:
            return e["job_elapsed_s"]
    return float("nan")


def movielens_dlrm_job(epochs, bin_dir):
    """The C++ DLRM worker's job of the two-tower example's shape, on MovieLens converted to
    ctrbin with its schema's vocabularies (as tests/movielens_training_test does)."""
    source = os.environ.get("SHARDPS_MOVIELENS_DIR") or \
        os.path.expanduser("~/.cache/shardps/movielens-100k")
    data_dir = tempfile.mkdtemp(prefix="movielens-ctrbin-")
    for split in ("train", "test"):
        subprocess.run([os.path.join(bin_dir, "data/ctr/ctr_tool"), "convert",
                        f"--in={source}/{split}.tsv", f"--out={data_dir}/{split}.ctrbin",
                        f"--schema={source}/schema.json"], check=True, capture_output=True)
    with open(os.path.join(ROOT, "examples/movielens_two_tower.json")) as f:
        two_tower = json.load(f)
    job = {k: two_tower[k] for k in ("batch_size", "mode", "optimizer", "embedding_optimizer",
                                     "partitioner", "seed", "eval_every_steps")}
    job.update(name="movielens-dlrm", model="dlrm:top=64;dim=16;interaction=concat;pooling=sum",
               dataset="movielens", epochs=epochs, backend="cpu", data_dir=data_dir)
    path = os.path.join(tempfile.mkdtemp(prefix="movielens-dlrm-"), "job.json")
    with open(path, "w") as f:
        json.dump(job, f)
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", choices=("mlp", "movielens"), default="mlp")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=None, help="10 (mlp), 5 (movielens)")
    parser.add_argument("--target", type=float, default=None, help="0.88 (mlp), 0.75 (AUC)")
    parser.add_argument("--bin", default=os.path.join(ROOT, "bazel-bin"))
    parser.add_argument("--host_stats", required=True)
    args = parser.parse_args()
    mlp = args.workload == "mlp"
    epochs = args.epochs or (10 if mlp else 5)
    target = args.target or (0.88 if mlp else 0.75)
    metric = "accuracy" if mlp else "auc"
    if mlp:
        cpp_job = os.path.join(ROOT, "deploy/jobs/fashion_mlp.json")
        torch_job, script = os.path.join(HERE, "torch_mlp.json"), os.path.join(HERE, "torch_mlp.py")
    else:
        cpp_job = movielens_dlrm_job(epochs, args.bin)
        torch_job = os.path.join(ROOT, "examples/movielens_two_tower.json")
        script = os.path.join(ROOT, "examples/movielens_two_tower.py")
    sample = subprocess.run([args.host_stats, "start", f"--pid={os.getpid()}"],
                            capture_output=True, text=True, check=True).stdout.strip()
    rows = {"C++ workers": [], "PyTorch workers": []}
    for r in range(args.rounds):
        for name in rows:
            if name == "C++ workers":
                last, seconds, evals = run(cpp_job, epochs, None, sys.executable, args.bin)
            else:
                last, seconds, evals = run(torch_job, epochs, script, sys.executable, args.bin)
            t = time_to(evals, target, metric)
            rows[name].append((t, last[metric], seconds))
            print(f"round {r + 1} {name}: time to {metric} {target} {t:.1f} s, final "
                  f"{metric} {last[metric]:.4f}, training {seconds:.1f} s", flush=True)
    med = {n: [statistics.median(v[i] for v in runs) for i in range(3)]
           for n, runs in rows.items()}
    c, p = med["C++ workers"], med["PyTorch workers"]
    print(f"\n{args.workload}, {epochs} epochs, {args.rounds} rounds (medians)")
    print(f"{'':<18} {'time to ' + str(target):>14} {'final ' + metric:>15} "
          f"{'training s':>11}")
    for n, (t, a, s) in med.items():
        print(f"{n:<18} {t:>13.1f}s {a:>15.4f} {s:>11.1f}")
    print(f"{'Python / C++':<18} {p[0] / c[0]:>13.2f}x {p[1] - c[1]:>+15.4f} "
          f"{p[2] / c[2]:>10.2f}x   " +
          ("targets: <= 1.4x, within 0.005" if mlp else "aim: speed >= 0.5 of the C++ worker's"))
    print(subprocess.run([args.host_stats, "line", f"--pid={os.getpid()}", sample],
                         capture_output=True, text=True, check=True).stdout.strip())


if __name__ == "__main__":
    main()
