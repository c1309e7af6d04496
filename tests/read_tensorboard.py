"""Reads shardps' TensorBoard event files with the `tensorboard` package from PyPI, without
TensorFlow (run by //tests:tensorboard_python_test; usable by hand on a run directory's
tensorboard/ folder).

    read_tensorboard.py --logdir RUN_DIR/tensorboard

Each subdirectory of LOGDIR is one run (chief, evaluator), as `tensorboard --logdir LOGDIR`
shows them. For each run it
  * reads every event file's records with TensorBoard's own TFRecord reader (its pure-Python
    one, which checks both masked CRC-32Cs of every record) and the first record's
    file_version, and names any record that fails;
  * loads the run with TensorBoard's EventAccumulator, as the TensorBoard server does, and
    lists each scalar series as [step, value] pairs.

Prints one line `RESULT {json}`:
  {"runs": {"chief": {"files": [...], "records": N, "file_versions": [...],
                      "series": {"train/loss": [[step, value], ...], ...}}, ...},
   "errors": ["...", ...]}
and exits 1 when any record could not be read.
"""
import argparse
import json
import os
import sys

from tensorboard.backend.event_processing import event_accumulator
from tensorboard.compat.proto import event_pb2
from tensorboard.compat.tensorflow_stub import errors
from tensorboard.compat.tensorflow_stub import pywrap_tensorflow


def read_records(path, problems):
    """Every record of one file, with the CRC checks of TensorBoard's reader."""
    reader = pywrap_tensorflow.PyRecordReader_New(path.encode(), 0, b"", None)
    records = []
    while True:
        try:
            reader.GetNext()
        except errors.OutOfRangeError:
            return records
        except errors.DataLossError as e:
            problems.append("%s: record %d: %s" % (path, len(records), e.message))
            return records
        records.append(reader.record())


def read_run(run_dir, problems):
    files = sorted(f for f in os.listdir(run_dir) if f.startswith("events.out.tfevents."))
    run = {"files": files, "records": 0, "file_versions": []}
    for name in files:
        records = read_records(os.path.join(run_dir, name), problems)
        run["records"] += len(records)
        if records:
            first = event_pb2.Event.FromString(records[0])
            run["file_versions"].append(first.file_version)
    accumulator = event_accumulator.EventAccumulator(
        run_dir, size_guidance={event_accumulator.SCALARS: 0})  # 0: keep every point
    accumulator.Reload()
    run["series"] = {
        tag: [[e.step, e.value] for e in accumulator.Scalars(tag)]
        for tag in sorted(accumulator.Tags()["scalars"])
    }
    return run


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--logdir", required=True)
    args = parser.parse_args()
    problems = []
    runs = {}
    for name in sorted(os.listdir(args.logdir)):
        run_dir = os.path.join(args.logdir, name)
        if os.path.isdir(run_dir):
            runs[name] = read_run(run_dir, problems)
    for run, found in runs.items():
        print("%s: %d files, %d records, series %s" % (
            run, len(found["files"]), found["records"],
            ", ".join("%s (%d points)" % (t, len(p)) for t, p in found["series"].items())))
    for problem in problems:
        print("error: " + problem)
    print("RESULT " + json.dumps({"runs": runs, "errors": problems}))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
