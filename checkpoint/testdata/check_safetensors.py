"""Checks a safetensors file written by shardps with the reference implementation, and
writes one for shardps to read back (run by checkpoint:safetensors_python_test).

    check_safetensors.py IN_FILE OUT_FILE

IN_FILE must hold exactly the tensors and metadata that safetensors_python_test.cc writes;
OUT_FILE gets the tensors that the test expects from Python. Exits non-zero, saying what
differs, on any mismatch.
"""
import sys

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file, save_file


def expected_from_shardps():
    return {
        "dense/kernel": (np.arange(12, dtype=np.float32) * 0.5 - 1.0).reshape(3, 4),
        "dense/bias": np.array([1.0 / 3.0, -2.5e-300], dtype=np.float64),
        "global_step": np.array(1234567890123, dtype=np.int64),
        "empty": np.zeros((0, 5), dtype=np.float32),
        "mask": np.array([True, False, True], dtype=np.bool_),
        "half": np.array([1.5, -0.25], dtype=np.float16),
        "ids": np.array([[1, -2], [3, -4]], dtype=np.int32),
        "bytes": np.array([0, 1, 254, 255], dtype=np.uint8),
    }


def from_python():
    return {
        "py/matrix": np.arange(6, dtype=np.float32).reshape(2, 3) / 4.0,
        "py/scalar": np.array(-7, dtype=np.int64),
        "py/doubles": np.array([np.pi, -0.0, 1e308], dtype=np.float64),
        "py/empty": np.zeros((2, 0), dtype=np.float32),
    }


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    in_file, out_file = argv[1], argv[2]
    got = load_file(in_file)
    want = expected_from_shardps()
    problems = []
    if sorted(got) != sorted(want):
        problems.append(f"tensors {sorted(got)}, expected {sorted(want)}")
    for name, expected in want.items():
        if name not in got:
            continue
        actual = got[name]
        if actual.dtype != expected.dtype or actual.shape != expected.shape:
            problems.append(f"{name}: {actual.dtype} {actual.shape}, expected "
                            f"{expected.dtype} {expected.shape}")
        elif actual.tobytes() != expected.tobytes():
            problems.append(f"{name}: values {actual!r}, expected {expected!r}")
    with safe_open(in_file, framework="np") as f:
        metadata = f.metadata()
    if metadata != {"job_id": "interop-1", "note": "written by shardps"}:
        problems.append(f"metadata {metadata!r}")
    if problems:
        print("check_safetensors: " + "; ".join(problems), file=sys.stderr)
        return 1
    save_file(from_python(), out_file, metadata={"writer": "python"})
    print(f"check_safetensors: {len(got)} tensors of {in_file} match; wrote {out_file}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
