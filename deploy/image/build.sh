#!/usr/bin/env bash
# Builds shardps' container images on this machine, offline: no base image is pulled; the root
# filesystem is only what the daemons need (deploy/image/README.md lists it).
#
#   deploy/image/build.sh [--gpu] [--tag TAG] [--name NAME] [--out DIR] [--bin DIR]
#                         [--compression gzip|none] [--load podman|docker] [--no_install]
#
#   --gpu          also the GPU image NAME:TAG-gpu (CUDA plugin, cudart, cuBLAS, cuBLASLt),
#                  besides the CPU image NAME:TAG; both share their first layer
#   --tag          default latest: shardps:latest and shardps:latest-gpu, the name deploy/k8s uses
#   --name         default shardps (a registry path works too: registry.example/team/shardps)
#   --out          default .dist/image: NAME-TAG.tar (and NAME-TAG-gpu.tar) to load, oci/ (an
#                  OCI layout with both, for skopeo copy to a registry), *.files.txt, images.json
#   --bin          prebuilt binaries laid out as bazel-bin (also SHARDPS_BIN): skip the build;
#                  by default it runs deploy/setup.sh and `bazel build -c opt`
#   --compression  gzip (default: what registries serve) or none (faster, for local loading)
#   --load         load the images into podman (installed on first use) or docker
#   --no_install   install nothing (the tests): skip what is missing, saying so
#
# It prints each image's name, its archive, and its size compressed (the archive: what a
# registry stores and a node pulls) and uncompressed (what `podman images` shows, unpacked).
# Then load it with one of
#   podman load -i .dist/image/shardps-latest.tar
#   docker load -i .dist/image/shardps-latest.tar
#   kind load image-archive .dist/image/shardps-latest.tar
#   skopeo copy oci:.dist/image/oci:latest docker://REGISTRY/shardps:latest
# On first use it installs skopeo (deploy/image/tools.sh: apt, idempotent) to read back what it
# wrote, and with --load podman, podman.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"

gpu=0 tag=latest name=shardps out="" bin="${SHARDPS_BIN:-}" compression=gzip load="" install=1
while [ $# -gt 0 ]; do
  case "$1" in
    --gpu) gpu=1; shift ;;
    --tag) tag="$2"; shift 2 ;;
    --name) name="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    --compression) compression="$2"; shift 2 ;;
    --load) load="$2"; shift 2 ;;
    --no_install) install=0; shift ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    *) echo "build.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$load" in ""|podman|docker) ;; *) echo "build.sh: --load podman or docker" >&2; exit 2 ;; esac
case "$compression" in gzip|none) ;; *) echo "build.sh: --compression gzip or none" >&2; exit 2 ;; esac
out="${out:-$REPO/.dist/image}"

# install_packages PACKAGE...: installs what is missing (tools.sh); fails when it cannot.
install_packages() {
  if [ "$install" = 0 ]; then
    local p
    for p in "$@"; do command -v "$p" >/dev/null || return 1; done
    return 0
  fi
  "$HERE/tools.sh" "$@"
}

targets=(//ps_server:ps //worker:worker //coordinator:chief //evaluator:evaluator
         //coordinator/cli:shardctl)
if [ "$gpu" = 1 ]; then targets+=(//model/cuda_plugin:libshardps_cuda.so); fi
if [ -z "$bin" ]; then
  cd "$REPO"
  deploy/setup.sh
  echo "build.sh: bazel build -c opt ${targets[*]}" >&2
  # No convenience links: bazel-bin keeps pointing at the last ordinary build.
  bazel build -c opt --symlink_prefix=/ "${targets[@]}" >&2
  bin="$(bazel info -c opt bazel-bin 2>/dev/null)"
fi

# Reproducible layers: every file's time is the commit's (or SOURCE_DATE_EPOCH).
revision="" mtime="${SOURCE_DATE_EPOCH:-}"
if git -C "$REPO" rev-parse --git-dir >/dev/null 2>&1; then
  revision="$(git -C "$REPO" rev-parse HEAD)"
  git -C "$REPO" diff --quiet HEAD -- 2>/dev/null || revision+="-dirty"
  mtime="${mtime:-$(git -C "$REPO" log -1 --format=%ct)}"
fi

mkdir -p "$out"
images=cpu
if [ "$gpu" = 1 ]; then images=cpu,gpu; fi
python3 "$HERE/make_image.py" --bazel_bin "$bin" --repo "$REPO" --out "$out" --name "$name" \
  --tag "$tag" --images "$images" --compression "$compression" --mtime "${mtime:-0}" \
  --revision "$revision" >/dev/null

# What make_image.py wrote, one line per image: NAME ARCHIVE COMPRESSED UNCOMPRESSED.
summary="$(python3 - "$out/images.json" <<'EOF'
import json, sys
for i in json.load(open(sys.argv[1]))["images"]:
    print(i["name"], i["archive"], i["archive_bytes"], i["uncompressed_bytes"])
EOF
)"

# A real tool reads each archive back (both of the formats it holds).
if install_packages skopeo && command -v skopeo >/dev/null; then
  while read -r image archive _ _; do
    digest=$(skopeo inspect --format '{{.Digest}}' "oci-archive:$archive") || {
      echo "build.sh: skopeo cannot read $archive as an OCI archive" >&2; exit 1; }
    skopeo inspect --format '{{.Digest}}' "docker-archive:$archive" >/dev/null || {
      echo "build.sh: skopeo cannot read $archive as a Docker archive" >&2; exit 1; }
    echo "build.sh: skopeo reads $image: manifest $digest" >&2
  done <<<"$summary"
else
  echo "build.sh: skopeo is not installed (and could not be): the archives are not checked" >&2
fi

if [ -n "$load" ]; then
  if [ "$load" = podman ]; then
    install_packages podman || { echo "build.sh: podman is not installed" >&2; exit 1; }
  fi
  command -v "$load" >/dev/null || { echo "build.sh: $load is not installed" >&2; exit 1; }
  while read -r _ archive _ _; do "$load" load -i "$archive" >&2; done <<<"$summary"
fi

mb() { awk -v b="$1" 'BEGIN { printf "%.1f MB", b / 1e6 }'; }
if [ "$compression" = gzip ]; then
  echo "images (compressed: the archive, gzip'd layers, what a registry stores and a node pulls;"
  echo "uncompressed: the layers unpacked, as \`podman images\` counts them):"
else
  echo "images (layers not compressed: the archive is as large as the image unpacked):"
fi
while read -r image archive compressed uncompressed; do
  if [ "$compression" = gzip ]; then
    printf '  %-24s %s  compressed %s  uncompressed %s\n' "$image" "$archive" \
      "$(mb "$compressed")" "$(mb "$uncompressed")"
  else
    printf '  %-24s %s  %s\n' "$image" "$archive" "$(mb "$uncompressed")"
  fi
done <<<"$summary"
