"""python_client_bench: shardps.Client (Python, over the C++ client) against the C++ client
itself, side by side in one run, on the same two ps daemons:

    bazel run //bench:python_client_bench -- [--reps N] [--rounds R] [--json]

1. Dense pull and push goodput of 1, 16 and 64 MiB variables (one shard on each ps): the
   median call of R alternating rounds of N calls each (after 2 untimed calls), Python's
   pulls into an `out=` array as the C++ loop pulls into its buffer. Target: Python / C++
   >= 0.9.
2. The p50 of a 4-byte pull, in R alternating blocks of 50 N calls. Target: Python <= 1.3x.
3. Two threads pulling 16 MiB at once over one thread (bytes per second of wall time), for
   Python and for C++: Python's ratio / C++'s ratio >= 0.9 (the GIL is released while a
   call waits).

The C++ side is bench/client_loop (a process of its own, the same calls). The last line is
the host's load and the CPU other processes used meanwhile (bench/host_stats.h); a run with
other processes busy is flagged BUSY and its ratios are not to be trusted.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

import numpy as np

ROOT = None  # the runfiles' workspace directory


def binary(path):
    return os.path.join(ROOT, path)


def cpp(ps, op, variable, reps, threads=1):
    out = subprocess.run([binary("bench/client_loop"), f"--ps={','.join(ps)}", f"--op={op}",
                          f"--variable={variable}", f"--reps={reps}", f"--threads={threads}"],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def python_loop(client, op, variable, size, reps, threads=1):
    """The same loop as client_loop's, in Python: per-call seconds of thread 0, wall time."""
    seconds = [[] for _ in range(threads)]

    def run(t):
        buffer = np.full(size, 1e-6, np.float32)
        for i in range(reps + 2):
            t0 = time.perf_counter()
            if op == "push":
                client.push(variable, buffer)
            else:
                client.pull(variable, out=buffer)
            if i >= 2:
                seconds[t].append(time.perf_counter() - t0)

    start = time.perf_counter()
    pool = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    return {"seconds": seconds[0], "wall_s": time.perf_counter() - start}


def host_sample():
    return subprocess.run([binary("bench/host_stats_tool"), "start", f"--pid={os.getpid()}"],
                          capture_output=True, text=True, check=True).stdout.strip()


def host_line(sample):
    return subprocess.run([binary("bench/host_stats_tool"), "line", f"--pid={os.getpid()}",
                           sample], capture_output=True, text=True, check=True).stdout.strip()


def main():
    global ROOT
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", required=True, help="the runfiles' workspace directory")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    ROOT = args.root
    os.environ.setdefault("TEST_SRCDIR", os.path.dirname(ROOT))
    os.environ.setdefault("TEST_WORKSPACE", os.path.basename(ROOT))
    sys.path.insert(0, os.path.join(ROOT, "python", "tests"))
    import shardps
    from cluster import PsCluster

    sample = host_sample()
    cluster = PsCluster(2)
    client = shardps.Client(cluster.addresses)
    sizes = {"1MiB": 1 << 18, "16MiB": 1 << 22, "64MiB": 1 << 24}
    sgd = {"type": "sgd", "learning_rate": 1e-12}
    client.create_variables(
        [shardps.Variable(name, (n,), initializer="zeros", optimizer=sgd)
         for name, n in sizes.items()] +
        [shardps.Variable("4B", (1,), initializer="zeros", optimizer=sgd)],
        partitioner="fixed:2")
    rows = []
    results = {}
    try:
        for name, n in sizes.items():
            for op in ("pull", "push"):
                c_calls, p_calls = [], []
                for _ in range(args.rounds):
                    c_calls += cpp(cluster.addresses, op, name, args.reps)["seconds"]
                    p_calls += python_loop(client, op, name, n, args.reps)["seconds"]
                c = 4 * n / statistics.median(c_calls) / 1e9
                p = 4 * n / statistics.median(p_calls) / 1e9
                rows.append((f"dense {op} {name}", f"{c:.2f} GB/s", f"{p:.2f} GB/s", p / c,
                             ">= 0.9"))
                results[f"{op}_{name}"] = {"cpp_gbps": c, "python_gbps": p, "ratio": p / c}
        c_calls, p_calls = [], []
        for _ in range(args.rounds):
            c_calls += cpp(cluster.addresses, "latency", "4B", 50 * args.reps)["seconds"]
            p_calls += python_loop(client, "pull", "4B", 1, 50 * args.reps)["seconds"]
        c, p = statistics.median(c_calls) * 1e6, statistics.median(p_calls) * 1e6
        rows.append(("4-byte pull p50", f"{c:.0f} us", f"{p:.0f} us", p / c, "<= 1.3"))
        results["latency_4B_p50_us"] = {"cpp": c, "python": p, "ratio": p / c}
        scaling = {}
        for side in ("cpp", "python"):
            thr = {}
            for threads in (1, 2):
                walls = []
                for _ in range(args.rounds):
                    if side == "cpp":
                        walls.append(cpp(cluster.addresses, "pull", "16MiB", args.reps,
                                         threads)["wall_s"])
                    else:
                        walls.append(python_loop(client, "pull", "16MiB", sizes["16MiB"],
                                                 args.reps, threads)["wall_s"])
                thr[threads] = threads * (args.reps + 2) * 4 * sizes["16MiB"] / \
                    statistics.median(walls) / 1e9
            scaling[side] = thr[2] / thr[1]
        rows.append(("2 threads / 1 (16 MiB pulls)", f"{scaling['cpp']:.2f}",
                     f"{scaling['python']:.2f}", scaling["python"] / scaling["cpp"], ">= 0.9"))
        results["two_threads"] = {"cpp_ratio": scaling["cpp"], "python_ratio": scaling["python"],
                                  "ratio": scaling["python"] / scaling["cpp"]}
    finally:
        client.close()
        cluster.close()
    host = host_line(sample)
    results["host"] = host
    table = [f"{'figure':<30} {'C++ client':>12} {'Python':>12} {'ratio':>7}  target"]
    for what, c, p, ratio, target in rows:
        table.append(f"{what:<30} {c:>12} {p:>12} {ratio:>7.3f}  {target}")
    table.append(host)
    print("\n".join(table), file=sys.stderr if args.json else sys.stdout)
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
