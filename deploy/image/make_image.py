#!/usr/bin/env python3
"""Writes shardps' container images (OCI) from files on this machine; deploy/image/build.sh runs it.

No base image: each image's root filesystem is exactly the daemons, the libraries `ldd` says
they load (with the dynamic loader, and the links that lead to each), bash, env and hostname
for the entrypoint, the Fashion-MNIST files the job file reads by default, the job files, and
the copyright files of the Debian packages those come from. Two images, sharing their first
layer byte for byte (so a store or registry holds it once):

    NAME:TAG       layer 1: that root filesystem (no CUDA library)
    NAME:TAG-gpu   layer 1, plus layer 2: /usr/local/lib/shardps/ with the CUDA plugin
                   (libshardps_cuda.so) and the CUDA libraries it links (cudart, cuBLAS,
                   cuBLASLt); the driver's libcuda.so.1 comes from the node at run time

Output, in --out:
    oci/                       an OCI image layout holding both images (tags TAG, TAG-gpu):
                               skopeo copy oci:OUT/oci:TAG docker://REGISTRY/NAME:TAG
    NAME-TAG.tar, NAME-TAG-gpu.tar
                               one archive per image: an OCI layout plus Docker's
                               manifest.json (as `docker save` writes since Docker 25), which
                               `podman load`, `docker load`, `kind load image-archive` and
                               `ctr images import` all read
    NAME-TAG[-gpu].files.txt   the image's files, sizes and sources
    images.json                names, digests and sizes, for build.sh and the tests

Layers are deterministic: files in path order, owner root, modes normalized, times set to
--mtime (build.sh passes the commit's time), gzip without a name or time.

Only Python's standard library; needs ldd (libc-bin) and, for the copyright files, dpkg.
"""

import argparse
import datetime
import glob
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zlib

# The daemons and the CLI: where Bazel puts them -> where the image has them.
BINARIES = {
    "ps_server/ps": "/usr/local/bin/ps",
    "worker/worker": "/usr/local/bin/worker",
    "coordinator/chief": "/usr/local/bin/chief",
    "evaluator/evaluator": "/usr/local/bin/evaluator",
    "coordinator/cli/shardctl": "/usr/local/bin/shardctl",
}
PLUGIN = "model/cuda_plugin/libshardps_cuda.so"
# The plugin and the CUDA libraries, together: the plugin's RUNPATH starts with $ORIGIN, and the
# plugin loader looks in <dir of the executable>/../lib/shardps (compute/cuda_plugin_loader.h).
GPU_LIB_DIR = "/usr/local/lib/shardps"
ENTRYPOINT = "/usr/local/bin/shardps-entrypoint"
JOBS_DIR = "/etc/shardps/jobs"  # deploy/k8s mounts its ConfigMap over it
# What deploy/k8s/entrypoint.sh runs: `#!/usr/bin/env bash`, and `hostname` when bash has not
# set HOSTNAME. sh is bash, for `podman run IMAGE sh` and anything that calls /bin/sh.
TOOLS = ["/usr/bin/bash", "/usr/bin/env", "/usr/bin/hostname"]
DATA_DIR = "/usr/share/datasets/fashion-mnist"  # Debian's dataset-fashion-mnist
PORT = 2222

MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER = {"gzip": "application/vnd.oci.image.layer.v1.tar+gzip",
               "none": "application/vnd.oci.image.layer.v1.tar"}


def fail(message):
    print(f"make_image: {message}", file=sys.stderr)
    sys.exit(1)


class Layer:
    """One layer's files, by path in the image: ("file", source, mode), ("link", target),
    ("dir", mode) or ("bytes", data, mode)."""

    def __init__(self, name, base=None):
        self.name = name
        self.entries = {}
        self.base = base  # paths a lower layer has already; not repeated here

    def _put(self, path, entry):
        path = os.path.normpath(path)
        if not path.startswith("/"):
            fail(f"{self.name}: path {path} is not absolute")
        if self.base is not None and path in self.base.entries:
            if self.base.entries[path] != entry:
                fail(f"{self.name}: {path} differs from the lower layer's")
            return
        ancestor = os.path.dirname(path)
        while ancestor != "/":
            for layer in (self, self.base):
                if layer is not None and layer.entries.get(ancestor, ("",))[0] == "link":
                    fail(f"{self.name}: {path} is under the link {ancestor}")
            ancestor = os.path.dirname(ancestor)
        old = self.entries.get(path)
        if old is not None and old != entry:
            fail(f"{self.name}: {path} added twice, as {old} and {entry}")
        self.entries[path] = entry
        parent = os.path.dirname(path)
        if parent != "/" and parent not in self.entries and (
                self.base is None or parent not in self.base.entries):
            self._put(parent, ("dir", 0o755))

    def add_dir(self, path, mode=0o755):
        self._put(path, ("dir", mode))

    def add_file(self, path, source, mode=None):
        if not os.path.isfile(source):
            fail(f"{self.name}: {source} (for {path}) is not a file")
        if mode is None:
            mode = 0o755 if os.access(source, os.X_OK) else 0o644
        self._put(path, ("file", os.path.realpath(source), mode))

    def add_bytes(self, path, data, mode=0o644):
        self._put(path, ("bytes", data, mode))

    def add_link(self, path, target):
        self._put(path, ("link", target))

    def add_host_path(self, host_path, depth=0):
        """host_path as this machine has it: each symbolic link on the way (/lib64 ->
        usr/lib64, /usr/lib64/ld-linux-x86-64.so.2 -> /lib/...) and the file itself."""
        if depth > 40:
            fail(f"{self.name}: too many levels of links at {host_path}")
        parts = os.path.normpath(host_path).strip("/").split("/")
        current = "/"
        for i, part in enumerate(parts):
            current = os.path.join(current, part)
            if os.path.islink(current):
                target = os.readlink(current)
                self.add_link(current, target)
                resolved = os.path.normpath(os.path.join(os.path.dirname(current), target))
                rest = parts[i + 1:]
                self.add_host_path(os.path.join(resolved, *rest) if rest else resolved, depth + 1)
                return
        if os.path.isdir(current):
            self.add_dir(current)
        else:
            self.add_file(current, current)

    def file_bytes(self):
        total = 0
        for entry in self.entries.values():
            if entry[0] == "file":
                total += os.path.getsize(entry[1])
            elif entry[0] == "bytes":
                total += len(entry[1])
        return total

    def listing(self):
        lines = []
        for path in sorted(self.entries):
            e = self.entries[path]
            if e[0] == "file":
                lines.append(f"{e[2]:04o} {os.path.getsize(e[1]):>11} {path}  <- {e[1]}")
            elif e[0] == "bytes":
                lines.append(f"{e[2]:04o} {len(e[1]):>11} {path}")
            elif e[0] == "link":
                lines.append(f"link {'':>11} {path} -> {e[1]}")
            else:
                lines.append(f"{e[1]:04o} {'dir':>11} {path}/")
        return lines

    def write_tar(self, out, mtime):
        """The layer as an uncompressed tar stream into `out` (anything with write())."""
        with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as tar:
            for path in sorted(self.entries):
                e = self.entries[path]
                info = tarfile.TarInfo(path.lstrip("/"))
                info.mtime = mtime
                info.uid = info.gid = 0
                info.uname = info.gname = "root"
                if e[0] == "dir":
                    info.type = tarfile.DIRTYPE
                    info.mode = e[1]
                    tar.addfile(info)
                elif e[0] == "link":
                    info.type = tarfile.SYMTYPE
                    info.linkname = e[1]
                    info.mode = 0o777
                    tar.addfile(info)
                elif e[0] == "bytes":
                    info.size = len(e[1])
                    info.mode = e[2]
                    tar.addfile(info, io.BytesIO(e[1]))
                else:
                    info.size = os.path.getsize(e[1])
                    info.mode = e[2]
                    with open(e[1], "rb") as f:
                        tar.addfile(info, f)


class HashingWriter:
    """Hashes and counts what passes through, uncompressed (the diff_id) and as written (the
    blob's digest), compressing with gzip on the way when asked."""

    def __init__(self, out, compression, level):
        self.out = out
        self.diff = hashlib.sha256()
        self.blob = hashlib.sha256()
        self.size = 0  # uncompressed
        self.blob_size = 0
        # wbits 31: a gzip stream; zlib writes a header without a name and with time 0.
        self.compressor = (zlib.compressobj(level, zlib.DEFLATED, 31) if compression == "gzip"
                           else None)

    def _emit(self, data):
        if data:
            self.blob.update(data)
            self.blob_size += len(data)
            self.out.write(data)

    def write(self, data):
        self.diff.update(data)
        self.size += len(data)
        self._emit(self.compressor.compress(data) if self.compressor else data)
        return len(data)

    def close(self):
        if self.compressor:
            self._emit(self.compressor.flush())


def write_blob(blobs, data):
    digest = hashlib.sha256(data).hexdigest()
    with open(os.path.join(blobs, digest), "wb") as f:
        f.write(data)
    return {"digest": f"sha256:{digest}", "size": len(data)}


def write_layer(layer, blobs, compression, level, mtime):
    tmp = os.path.join(blobs, f".{layer.name}.tmp")
    with open(tmp, "wb") as f:
        writer = HashingWriter(f, compression, level)
        layer.write_tar(writer, mtime)
        writer.close()
    digest = writer.blob.hexdigest()
    os.replace(tmp, os.path.join(blobs, digest))
    return {"digest": f"sha256:{digest}", "size": writer.blob_size,
            "diff_id": f"sha256:{writer.diff.hexdigest()}", "uncompressed": writer.size}


def ldd(path):
    """(name, resolved path) of every library the dynamic loader maps for `path`, the loader
    itself included; fails on one not found."""
    result = subprocess.run(["ldd", path], capture_output=True, text=True)
    if result.returncode != 0:
        fail(f"ldd {path} failed: {result.stderr.strip() or result.stdout.strip()}")
    libs = []
    for line in result.stdout.splitlines():
        line = line.strip()
        if "=> not found" in line:
            fail(f"{path} needs {line.split()[0]}, which ldd does not find")
        m = re.match(r"^(\S+) => (\S+) \(0x[0-9a-f]+\)$", line)
        if m:
            libs.append((m.group(1), m.group(2)))
            continue
        m = re.match(r"^(/\S+) \(0x[0-9a-f]+\)$", line)  # the dynamic loader
        if m:
            libs.append((os.path.basename(m.group(1)), m.group(1)))
    return libs


def debian_packages(paths):
    """The Debian packages that own `paths` (dpkg -S; merged-/usr paths tried both ways)."""
    if shutil.which("dpkg-query") is None:
        return set()
    queries = set()
    for p in paths:
        queries.add(p)
        if p.startswith("/usr/lib/") or p.startswith("/usr/bin/"):
            queries.add(p[len("/usr"):])
    result = subprocess.run(["dpkg-query", "-S", *sorted(queries)], capture_output=True,
                            text=True)
    packages = set()
    for line in result.stdout.splitlines():
        owners, _, _ = line.partition(": ")
        for owner in owners.split(", "):
            packages.add(owner.split(":")[0])
    return packages


def package_versions(packages):
    if not packages:
        return {}
    result = subprocess.run(["dpkg-query", "-W", "-f", "${Package} ${Version}\\n",
                             *sorted(packages)], capture_output=True, text=True)
    return dict(line.split(" ", 1) for line in result.stdout.splitlines() if " " in line)


def base_layer(args):
    layer = Layer("base")
    for link, target in [("/bin", "usr/bin"), ("/sbin", "usr/sbin"), ("/lib", "usr/lib"),
                         ("/lib64", "usr/lib64")]:
        layer.add_link(link, target)
    for d in ["/usr/bin", "/usr/sbin", "/usr/lib", "/usr/lib64", "/usr/local/bin", "/etc",
              "/root", "/var", "/proc", "/sys", "/dev", "/run"]:
        layer.add_dir(d, 0o700 if d == "/root" else 0o755)
    layer.add_dir("/tmp", 0o1777)
    layer.add_dir("/var/tmp", 0o1777)

    executables = []
    for source, dest in BINARIES.items():
        path = os.path.join(args.bazel_bin, source)
        if not os.path.isfile(path):
            fail(f"no {source} in {args.bazel_bin} (build it first: build.sh does)")
        layer.add_file(dest, path, 0o755)
        executables.append(path)
    layer.add_file(ENTRYPOINT, os.path.join(args.repo, "deploy/k8s/entrypoint.sh"), 0o755)
    for tool in TOOLS:
        if not os.path.isfile(tool):
            fail(f"{tool} is missing on this machine")
        layer.add_host_path(tool)
        executables.append(tool)
    layer.add_link("/usr/bin/sh", "bash")

    host_files = list(TOOLS)
    for exe in executables:
        for _, lib in ldd(exe):
            if os.path.realpath(lib).startswith(os.path.realpath(args.cuda_dir) + "/"):
                fail(f"{exe} needs the CUDA library {lib}: the CPU image must have none "
                     "(the worker and evaluator load CUDA through the plugin only)")
            layer.add_host_path(lib)
            host_files.append(os.path.realpath(lib))

    data = sorted(glob.glob(os.path.join(DATA_DIR, "*")))
    if not data:
        fail(f"no Fashion-MNIST at {DATA_DIR}: install Debian's dataset-fashion-mnist "
             "(deploy/setup.sh does)")
    for f in data:
        layer.add_file(f, f, 0o644)
        host_files.append(f)
    jobs = sorted(glob.glob(os.path.join(args.repo, "deploy/jobs/*.json")))
    if not jobs:
        fail(f"no job files in {args.repo}/deploy/jobs")
    for f in jobs:
        layer.add_file(os.path.join(JOBS_DIR, os.path.basename(f)), f, 0o644)

    layer.add_bytes("/etc/passwd", b"root:x:0:0:root:/root:/bin/bash\n"
                    b"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
    layer.add_bytes("/etc/group", b"root:x:0:\nnogroup:x:65534:\n")
    # glibc resolves names with /etc/hosts (the runtime writes it: Kubernetes' pod names, the
    # namespace launcher's) and then DNS.
    layer.add_bytes("/etc/nsswitch.conf", b"passwd: files\ngroup: files\nhosts: files dns\n")

    packages = debian_packages(host_files)
    for pkg in sorted(packages):
        copyright_file = f"/usr/share/doc/{pkg}/copyright"
        if os.path.isfile(copyright_file):
            layer.add_host_path(copyright_file)
    versions = package_versions(packages)
    layer.add_bytes("/usr/local/share/shardps/debian-packages.txt",
                    "".join(f"{p} {versions.get(p, '?')}\n" for p in sorted(packages)).encode())
    return layer, versions


def gpu_layer(args, base):
    layer = Layer("gpu", base=base)
    plugin = os.path.join(args.bazel_bin, PLUGIN)
    if not os.path.isfile(plugin):
        fail(f"no {PLUGIN} in {args.bazel_bin} (build it first: build.sh does)")
    layer.add_file(os.path.join(GPU_LIB_DIR, os.path.basename(PLUGIN)), plugin, 0o755)
    cuda_root = os.path.realpath(args.cuda_dir) + "/"
    cuda_libs = []
    for name, lib in ldd(plugin):
        if os.path.realpath(lib).startswith(cuda_root):
            # Under the name the loader asks for (the soname), beside the plugin.
            layer.add_file(os.path.join(GPU_LIB_DIR, name), lib, 0o755)
            cuda_libs.append(name)
        else:
            layer.add_host_path(lib)  # what the base lacks, e.g. glibc's libdl stub
    for required in ("libcudart.so", "libcublas.so", "libcublasLt.so"):
        if not any(n.startswith(required + ".") for n in cuda_libs):
            fail(f"the plugin {plugin} does not link {required} from {args.cuda_dir} "
                 f"(ldd found: {cuda_libs})")
    for lic in sorted(glob.glob(os.path.join(args.cuda_dir, "dist-info/nvidia_cuda_runtime-*"))
                      + glob.glob(os.path.join(args.cuda_dir, "dist-info/nvidia_cublas-*"))):
        license_file = os.path.join(lic, "licenses/License.txt")
        if os.path.isfile(license_file):
            name = os.path.basename(lic).replace(".dist-info", "")
            layer.add_file(f"/usr/local/share/doc/shardps-cuda/{name}/License.txt",
                           license_file, 0o644)
    return layer, sorted(cuda_libs)


def cuda_version(args):
    """(major, full version) of the CUDA runtime the plugin links, from the toolkit."""
    for d in glob.glob(os.path.join(args.cuda_dir, "dist-info/nvidia_cuda_runtime-*")):
        m = re.search(r"nvidia_cuda_runtime-(\d+)\.(\d+)\.(\S+?)\.dist-info$", d)
        if m:
            return f"{m.group(1)}.{m.group(2)}", f"{m.group(1)}.{m.group(2)}.{m.group(3)}"
    for lib in glob.glob(os.path.join(args.cuda_dir, "lib64/libcudart.so.*")):
        m = re.search(r"libcudart\.so\.(\d+)$", lib)
        if m:
            return f"{m.group(1)}.0", m.group(1)
    return None, None


def image_config(args, layers, gpu, created, cuda):
    env = ["PATH=/usr/local/bin:/usr/bin:/bin"]
    labels = {
        "org.opencontainers.image.title": args.name + ("-gpu" if gpu else ""),
        "org.opencontainers.image.description":
            "shardps daemons (ps, worker, chief, evaluator) and shardctl" +
            (", with the CUDA backend" if gpu else ", CPU only"),
        "org.opencontainers.image.version": args.tag + ("-gpu" if gpu else ""),
    }
    if args.revision:
        labels["org.opencontainers.image.revision"] = args.revision
    if gpu:
        major, full = cuda
        # Read by the NVIDIA container toolkit: the driver libraries to mount (libcuda is
        # "compute"; nvidia-smi "utility"), and a driver new enough for this CUDA runtime,
        # checked when the container starts. NVIDIA_VISIBLE_DEVICES is left to the runtime
        # (Kubernetes' device plugin, docker --gpus), so a pod that asks for no GPU gets none.
        env.append("NVIDIA_DRIVER_CAPABILITIES=compute,utility")
        if major:
            env.append(f"NVIDIA_REQUIRE_CUDA=cuda>={major}")
            labels["com.nvidia.cuda.version"] = full
    return {
        "created": created,
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "Entrypoint": [ENTRYPOINT],
            "Env": env,
            "WorkingDir": "/",
            "ExposedPorts": {f"{PORT}/tcp": {}},
            "Labels": labels,
        },
        "rootfs": {"type": "layers", "diff_ids": [l["diff_id"] for l in layers]},
        "history": [{"created": created, "created_by": f"deploy/image/make_image.py ({l['name']} "
                                                      "layer)"} for l in layers],
    }


def write_archive(path, layout, blob_digests, index_entry, docker_entry):
    """One image's archive: oci-layout, index.json with only this image, Docker's
    manifest.json, and the blobs it uses, each once."""
    tmp = path + ".tmp"
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
        def add_bytes(name, data):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
        add_bytes("oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode())
        add_bytes("index.json", json.dumps({"schemaVersion": 2, "mediaType": MEDIA_INDEX,
                                            "manifests": [index_entry]}, indent=1).encode())
        add_bytes("manifest.json", json.dumps([docker_entry], indent=1).encode())
        info = tarfile.TarInfo("blobs")
        info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
        tar.addfile(info)
        info = tarfile.TarInfo("blobs/sha256")
        info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
        tar.addfile(info)
        for digest in blob_digests:
            name = "blobs/sha256/" + digest.split(":", 1)[1]
            info = tar.gettarinfo(os.path.join(layout, name), arcname=name)
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mtime = 0
            info.mode = 0o644
            with open(os.path.join(layout, name), "rb") as f:
                tar.addfile(info, f)
    os.replace(tmp, path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bazel_bin", required=True,
                        help="where the binaries are, as Bazel lays them out (bazel-bin, or a "
                             "test's runfiles)")
    parser.add_argument("--repo", required=True, help="the source tree (deploy/k8s, deploy/jobs)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--name", default="shardps")
    parser.add_argument("--tag", default="latest")
    parser.add_argument("--images", default="cpu,gpu", help="cpu, gpu or cpu,gpu")
    parser.add_argument("--compression", choices=["gzip", "none"], default="gzip")
    parser.add_argument("--gzip_level", type=int, default=6)
    parser.add_argument("--mtime", type=int, default=0, help="time of every file (epoch s)")
    parser.add_argument("--revision", default="", help="the source revision, for a label")
    parser.add_argument("--cuda_dir", default="/usr/local/cuda")
    parser.add_argument("--no_archive", action="store_true",
                        help="write the OCI layout only, no .tar per image")
    args = parser.parse_args()
    images = [i for i in args.images.split(",") if i]
    if not images or any(i not in ("cpu", "gpu") for i in images):
        fail(f"--images={args.images}: expected cpu, gpu or cpu,gpu")
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,123}", args.tag):
        fail(f"--tag={args.tag}: not a valid image tag")
    if not re.fullmatch(r"[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*", args.name):
        fail(f"--name={args.name}: not a valid repository name (lower case)")

    # Nothing left from an earlier run that a reader could take for this one's.
    for kind in ("cpu", "gpu"):
        stem = os.path.join(args.out, f"{args.name.replace('/', '_')}-{args.tag}" +
                            ("-gpu" if kind == "gpu" else ""))
        for stale in (stem + ".tar", stem + ".files.txt"):
            if os.path.exists(stale):
                os.remove(stale)
    layout = os.path.join(args.out, "oci")
    blobs = os.path.join(layout, "blobs", "sha256")
    if os.path.isdir(layout):
        shutil.rmtree(layout)
    os.makedirs(blobs)
    with open(os.path.join(layout, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)

    created = datetime.datetime.fromtimestamp(args.mtime, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ")
    base, versions = base_layer(args)
    base_blob = write_layer(base, blobs, args.compression, args.gzip_level, args.mtime)
    base_blob["name"] = "base"
    summary = {"images": [], "debian_packages": versions}
    index = []
    for kind in images:
        gpu = kind == "gpu"
        tag = args.tag + ("-gpu" if gpu else "")
        layers = [base_blob]
        files = base.listing()
        rootfs_bytes = base.file_bytes()
        cuda_libs = []
        if gpu:
            extra, cuda_libs = gpu_layer(args, base)
            blob = write_layer(extra, blobs, args.compression, args.gzip_level, args.mtime)
            blob["name"] = "gpu"
            layers.append(blob)
            files += ["# layer 2 (gpu)"] + extra.listing()
            rootfs_bytes += extra.file_bytes()
        config = write_blob(blobs, json.dumps(image_config(
            args, layers, gpu, created, cuda_version(args) if gpu else None),
            sort_keys=True).encode())
        manifest = {
            "schemaVersion": 2,
            "mediaType": MEDIA_MANIFEST,
            "config": {"mediaType": MEDIA_CONFIG, **config},
            "layers": [{"mediaType": MEDIA_LAYER[args.compression], "digest": l["digest"],
                        "size": l["size"]} for l in layers],
        }
        manifest_blob = write_blob(blobs, json.dumps(manifest, sort_keys=True).encode())
        name = f"{args.name}:{tag}"
        # Docker's `docker save` (25+) names an image both ways; containerd reads the first.
        full_name = name if "/" in args.name.split(":")[0] else f"docker.io/library/{name}"
        index_entry = {"mediaType": MEDIA_MANIFEST, **manifest_blob,
                       "annotations": {"io.containerd.image.name": full_name,
                                       "org.opencontainers.image.ref.name": tag}}
        index.append(index_entry)
        archive = None
        if not args.no_archive:
            archive = os.path.join(args.out, f"{args.name.replace('/', '_')}-{tag}.tar")
            digests = [config["digest"], manifest_blob["digest"]] + [l["digest"] for l in layers]
            write_archive(archive, layout, digests, index_entry, {
                "Config": "blobs/sha256/" + config["digest"].split(":", 1)[1],
                "RepoTags": [name],
                "Layers": ["blobs/sha256/" + l["digest"].split(":", 1)[1] for l in layers],
            })
        listing = os.path.join(args.out, f"{args.name.replace('/', '_')}-{tag}.files.txt")
        with open(listing, "w") as f:
            f.write("\n".join(files) + "\n")
        summary["images"].append({
            "name": name,
            "kind": kind,
            "tag": tag,
            "manifest_digest": manifest_blob["digest"],
            "archive": archive,
            "archive_bytes": os.path.getsize(archive) if archive else None,
            "layers": [{k: l[k] for k in ("name", "digest", "size", "uncompressed")}
                       for l in layers],
            "compressed_bytes": sum(l["size"] for l in layers),
            "uncompressed_bytes": sum(l["uncompressed"] for l in layers),
            "rootfs_file_bytes": rootfs_bytes,
            "files": listing,
            "cuda_libraries": cuda_libs,
        })
    with open(os.path.join(layout, "index.json"), "w") as f:
        json.dump({"schemaVersion": 2, "mediaType": MEDIA_INDEX, "manifests": index}, f, indent=1)
    summary["layout"] = layout
    summary["compression"] = args.compression
    with open(os.path.join(args.out, "images.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps(summary["images"]))


if __name__ == "__main__":
    main()
