"""Builds the shardps wheel from the package's files (stdlib only; run by //python:wheel).

usage: build_wheel.py --out DIST/shardps-V-TAG.whl FILE...   (FILEs under .../shardps/)
"""

import base64
import hashlib
import os
import sys
import zipfile


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def main(argv):
    if len(argv) < 3 or argv[0] != "--out":
        sys.exit(__doc__)
    out, files = argv[1], argv[2:]
    base = os.path.basename(out)[: -len(".whl")]
    name, version, python_tag, abi_tag, platform_tag = base.split("-")
    dist_info = f"{name}-{version}.dist-info"
    entries = []
    for path in sorted(files):
        relative = "shardps/" + path.split("/shardps/", 1)[1]
        with open(path, "rb") as f:
            entries.append((relative, f.read()))
    metadata = (f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                "Summary: shardps' Python package: train your own model on shardps' ps\n"
                "Requires-Python: >=3.11,<3.12\nRequires-Dist: numpy\n").encode()
    wheel = (f"Wheel-Version: 1.0\nGenerator: shardps build_wheel.py\nRoot-Is-Purelib: false\n"
             f"Tag: {python_tag}-{abi_tag}-{platform_tag}\n").encode()
    entries += [(f"{dist_info}/METADATA", metadata), (f"{dist_info}/WHEEL", wheel)]
    record = "\n".join([record_line(n, d) for n, d in entries] +
                       [f"{dist_info}/RECORD,,", ""]).encode()
    entries.append((f"{dist_info}/RECORD", record))
    # Fixed times and modes: the same files make the same wheel, byte for byte.
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for relative, data in entries:
            info = zipfile.ZipInfo(relative, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if relative.endswith(".so") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)


if __name__ == "__main__":
    main(sys.argv[1:])
