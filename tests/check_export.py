"""Reads a shardps checkpoint and its export without shardps, with numpy and the reference
safetensors package only, and measures the exported model on the Fashion-MNIST test set
(run by //tests:export_python_test; usable by hand on any checkpoint of an MLP job).

    check_export.py --checkpoint CKPT --export MODEL.safetensors
                    [--export_slots FULL.safetensors] [--data_dir DIR]

CKPT is a job's checkpoint dir (its newest committed checkpoint is read, as `shardctl
export` does), one checkpoint's dir, or its manifest.json. MODEL is what `shardctl export
CKPT MODEL` wrote, FULL what `shardctl export CKPT FULL --slots` wrote. It checks:

  * every data file listed by the manifest against the manifest: size, CRC-32C of the whole
    file, of the header (8-byte length and JSON) and of every tensor's bytes, and the
    tensors' dtypes, shapes and offsets against the file's own header;
  * that the per-ps files, loaded with safetensors.numpy.load_file and stacked by the
    manifest's row ranges, equal the exported variables (and slots) bit for bit, and that
    the exports hold exactly those tensors and name the checkpoint in their metadata;
  * the model's test accuracy and mean cross-entropy: the forward pass of
    model/mlp/mlp_spec.h rebuilt in numpy (float32, x @ kernel + bias, ReLU after every
    hidden layer, arg-max, first on ties) on the test images scaled by 1/255 as float32.

Prints what it found, then one line `RESULT {json}` (accuracy, loss, examples, counts);
exits 1, naming each file, tensor or variable at fault, when any check fails.
"""
import argparse
import gzip
import json
import os
import struct
import sys

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file

DEFAULT_DATA_DIR = "/usr/share/datasets/fashion-mnist"


# CRC-32C (Castagnoli; reflected polynomial 0x82F63B78), byte by byte from a table: a few
# hundred ms per MiB, enough for a test checkpoint, and independent of shardps' own.
def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data):
    crc = 0xFFFFFFFF
    table = _CRC_TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283, "CRC-32C check value"


class Problems:
    """Collects what is wrong, so that one run names every fault."""

    def __init__(self):
        self.items = []

    def add(self, message):
        self.items.append(message)
        print(f"PROBLEM: {message}", flush=True)


def find_manifest(path):
    """The manifest.json that CKPT names (see the module doc)."""
    if os.path.isfile(path):
        return path
    own = os.path.join(path, "manifest.json")
    if os.path.isfile(own):
        return own
    committed = []
    for entry in os.listdir(path):
        if entry.startswith("ckpt-") and entry[5:].isdigit():
            manifest = os.path.join(path, entry, "manifest.json")
            if os.path.isfile(manifest):
                committed.append((int(entry[5:]), manifest))
    if not committed:
        raise SystemExit(f"check_export: {path}: no committed checkpoint (no manifest.json)")
    return max(committed)[1]


SAFETENSORS_DTYPES = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "I32": np.int32}


def check_files(manifest, ckpt_dir, problems):
    """Checks every data file against the manifest; returns how many tensors were checked."""
    tensors_checked = 0
    for entry in manifest["files"]:
        path = os.path.join(ckpt_dir, entry["file"])
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            problems.add(f"{path}: cannot read: {e}")
            continue
        if len(data) != entry["bytes"]:
            problems.add(f"{path}: {len(data)} bytes, manifest says {entry['bytes']}")
        if crc32c(data) != entry["crc32c"]:
            problems.add(f"{path}: crc32c {crc32c(data):#010x} of the file, manifest says "
                         f"{entry['crc32c']:#010x}")
        if len(data) < 8:
            problems.add(f"{path}: shorter than a safetensors header length")
            continue
        (header_len,) = struct.unpack("<Q", data[:8])
        if 8 + header_len > len(data):
            problems.add(f"{path}: header length {header_len} runs past the file's end")
            continue
        if crc32c(data[:8 + header_len]) != entry["header_crc32c"]:
            problems.add(f"{path}: header crc32c {crc32c(data[:8 + header_len]):#010x}, "
                         f"manifest says {entry['header_crc32c']:#010x}")
        try:
            header = json.loads(data[8:8 + header_len])
        except ValueError as e:
            problems.add(f"{path}: header is not JSON: {e}")
            continue
        body = data[8 + header_len:]
        for tensor in entry["tensors"]:
            name = tensor["name"]
            begin, end = tensor["data_offsets"]
            own = header.get(name)
            if own is None:
                problems.add(f"{path}: tensor '{name}' of the manifest is not in the file")
                continue
            if (own["dtype"], own["shape"], own["data_offsets"]) != (
                    tensor["dtype"], tensor["shape"], [begin, end]):
                problems.add(f"{path}: tensor '{name}': file says {own}, manifest says {tensor}")
            got = crc32c(body[begin:end])
            if got != tensor["crc32c"]:
                problems.add(f"{path}: tensor '{name}': crc32c {got:#010x} of its bytes, "
                             f"manifest says {tensor['crc32c']:#010x}")
            tensors_checked += 1
    return tensors_checked


def reassemble(manifest, ckpt_dir, problems):
    """{variable name or "variable/slot": whole array} from the per-ps files, by row ranges."""
    files = {}
    for entry in manifest["files"]:
        path = os.path.join(ckpt_dir, entry["file"])
        try:
            files[entry["file"]] = load_file(path)
        except Exception as e:  # the reference loader's own complaint, whatever its type
            problems.add(f"{path}: safetensors.numpy.load_file failed: {e}")
    whole = {}
    for var in manifest["variables"]:
        shape = tuple(var["shape"])
        for slot in [""] + list(var["slots"]):
            key = var["name"] if slot == "" else f"{var['name']}/{slot}"
            parts, next_row = [], 0
            for shard in var["shards"]:
                if shard["row_offset"] != next_row:
                    problems.add(f"{key}: shard {shard['name']} starts at row "
                                 f"{shard['row_offset']}, expected {next_row}")
                next_row = shard["row_offset"] + shard["rows"]
                tensor_name = shard["tensors"].get(slot)
                source = files.get(shard["file"], {}).get(tensor_name)
                if source is None:
                    problems.add(f"{key}: tensor '{tensor_name}' missing from {shard['file']}")
                    parts = None
                    break
                if len(source.shape) == 0 or source.shape[0] != shard["rows"]:
                    problems.add(f"{key}: tensor '{tensor_name}' in {shard['file']} has shape "
                                 f"{source.shape}, shard says {shard['rows']} rows")
                parts.append(source.reshape(shard["rows"], -1))
            if parts is None:
                continue
            rows = shape[0] if shape else 1
            if next_row != rows:
                problems.add(f"{key}: shards cover {next_row} rows of {rows}")
                continue
            whole[key] = np.concatenate(parts, axis=0).reshape(shape)
            if whole[key].dtype != SAFETENSORS_DTYPES.get(var["dtype"]):
                problems.add(f"{key}: {whole[key].dtype} in the files, manifest says {var['dtype']}")
    return whole


def compare_export(path, expected, manifest, with_slots, problems):
    """The export at `path` holds exactly `expected`, bit for bit; returns the tensor count."""
    got = load_file(path)
    if sorted(got) != sorted(expected):
        problems.add(f"{path}: tensors {sorted(got)}, expected {sorted(expected)}")
    same = 0
    for name, want in expected.items():
        have = got.get(name)
        if have is None:
            continue
        if have.dtype != want.dtype or have.shape != want.shape:
            problems.add(f"{path}: '{name}' is {have.dtype} {have.shape}, the per-ps files "
                         f"give {want.dtype} {want.shape}")
        elif have.tobytes() != want.tobytes():
            differ = int(np.count_nonzero(have.view(np.uint32) != want.view(np.uint32)))
            problems.add(f"{path}: '{name}': {differ} of {want.size} values differ from the "
                         f"per-ps files")
        else:
            same += 1
    with safe_open(path, framework="np") as f:
        metadata = f.metadata() or {}
    wanted = {"format": "shardps-export", "job_id": manifest["job_id"],
              "checkpoint_id": str(manifest["checkpoint_id"]),
              "steps_done": str(manifest["progress"]["steps_done"]),
              "with_slots": "true" if with_slots else "false"}
    for key, value in wanted.items():
        if metadata.get(key) != value:
            problems.add(f"{path}: metadata '{key}' is {metadata.get(key)!r}, expected {value!r}")
    return same


def read_idx(path):
    """An IDX file (gzipped or plain, told by its magic) as a numpy array of its shape."""
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    zero, dtype_code, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or dtype_code != 0x08:
        raise SystemExit(f"check_export: {path}: not an IDX file of unsigned bytes")
    dims = struct.unpack(f">{ndim}I", raw[4:4 + 4 * ndim])
    payload = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if payload.size != int(np.prod(dims)):
        raise SystemExit(f"check_export: {path}: {payload.size} bytes of data for shape {dims}")
    return payload.reshape(dims)


def find_data_file(data_dir, stem):
    for name in (f"{stem}.gz", stem):
        path = os.path.join(data_dir, name)
        if os.path.isfile(path):
            return path
    raise SystemExit(f"check_export: no {stem}[.gz] in {data_dir}")


def parse_hidden(model):
    """Hidden widths of "softmax" or "mlp:256,128" (coordinator's model text)."""
    if model == "softmax":
        return []
    if not model.startswith("mlp:"):
        raise SystemExit(f"check_export: model {model!r} is not an MLP")
    return [int(w) for w in model[4:].split(",")]


def evaluate(params, job_name, hidden, images, labels, num_classes, problems):
    """Accuracy and mean cross-entropy of model.h's MLP with `params` (export names)."""
    x = images.reshape(images.shape[0], -1)
    # Exactly the C++ reader's features: each byte's float32 x / 255.
    scale = np.arange(256, dtype=np.float32) / np.float32(255)
    h = scale[x]
    dims = [x.shape[1]] + hidden + [num_classes]
    for k in range(len(dims) - 1):
        kernel = params.get(f"{job_name}/dense_{k}/kernel")
        bias = params.get(f"{job_name}/dense_{k}/bias")
        if kernel is None or bias is None:
            problems.add(f"layer dense_{k} of {job_name} is not in the export")
            return None, None
        if kernel.shape != (dims[k], dims[k + 1]) or bias.shape != (dims[k + 1],):
            problems.add(f"dense_{k}: kernel {kernel.shape}, bias {bias.shape}; model.h "
                         f"expects ({dims[k]}, {dims[k + 1]}) and ({dims[k + 1]},)")
            return None, None
        h = h @ kernel + bias
        if k + 1 < len(dims) - 1:
            h = np.maximum(h, np.float32(0))
    assert h.dtype == np.float32, h.dtype
    predictions = np.argmax(h, axis=1)  # the first of equal maxima, as the backends do
    accuracy = float(np.count_nonzero(predictions == labels)) / labels.shape[0]
    logits = h.astype(np.float64)
    top = logits.max(axis=1, keepdims=True)
    log_norm = np.log(np.exp(logits - top).sum(axis=1)) + top[:, 0]
    loss = float(np.mean(log_norm - logits[np.arange(labels.shape[0]), labels]))
    return accuracy, loss


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--export", required=True)
    parser.add_argument("--export_slots")
    parser.add_argument("--data_dir", help="default: the job's data_dir, else " + DEFAULT_DATA_DIR)
    args = parser.parse_args()

    manifest_path = find_manifest(args.checkpoint)
    ckpt_dir = os.path.dirname(manifest_path)
    with open(manifest_path) as f:
        manifest = json.load(f)
    job = manifest["job"]
    print(f"checkpoint {manifest['checkpoint_id']} of job {manifest['job_id']} "
          f"({manifest['progress']['steps_done']}/{manifest['progress']['total_steps']} steps, "
          f"final {manifest['final']}): {manifest_path}")
    problems = Problems()

    tensors_checked = check_files(manifest, ckpt_dir, problems)
    print(f"crc32c: {len(manifest['files'])} files, {tensors_checked} tensors checked")

    whole = reassemble(manifest, ckpt_dir, problems)
    variables = {v["name"]: whole[v["name"]] for v in manifest["variables"] if v["name"] in whole}
    same = compare_export(args.export, variables, manifest, False, problems)
    print(f"{args.export}: {same} of {len(variables)} variables equal the per-ps files")
    same_with_slots = 0
    if args.export_slots:
        same_with_slots = compare_export(args.export_slots, whole, manifest, True, problems)
        print(f"{args.export_slots}: {same_with_slots} of {len(whole)} tensors equal the "
              f"per-ps files")

    data_dir = args.data_dir or job.get("data_dir") or DEFAULT_DATA_DIR
    images = read_idx(find_data_file(data_dir, "t10k-images-idx3-ubyte"))
    labels = read_idx(find_data_file(data_dir, "t10k-labels-idx1-ubyte")).astype(np.int64)
    accuracy, loss = evaluate(load_file(args.export), job.get("name", "job"),
                              parse_hidden(job["model"]), images, labels, 10, problems)
    if accuracy is not None:
        print(f"numpy forward pass ({job['model']}, float32) on {labels.shape[0]} test "
              f"examples: accuracy {accuracy:.4f}, loss {loss:.6f}")
    result = {
        "checkpoint_id": manifest["checkpoint_id"],
        "final": manifest["final"],
        "steps_done": manifest["progress"]["steps_done"],
        "files": len(manifest["files"]),
        "tensors_crc_checked": tensors_checked,
        "variables": len(variables),
        "variables_equal": same,
        "tensors_with_slots": len(whole),
        "tensors_with_slots_equal": same_with_slots,
        "examples": int(labels.shape[0]),
        "accuracy": accuracy,
        "loss": loss,
        "problems": len(problems.items),
    }
    print("RESULT " + json.dumps(result), flush=True)
    return 1 if problems.items else 0


if __name__ == "__main__":
    sys.exit(main())
