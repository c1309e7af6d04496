#!/usr/bin/env bash
# Installs, from Debian 12's packages, the container tools that check and run shardps' images:
#
#   deploy/image/tools.sh [PACKAGE...]     default: skopeo umoci podman runc
#
# skopeo reads an image archive back (build.sh checks every archive it writes with it); umoci
# unpacks the OCI layout as a runtime would; podman loads and runs an image; runc is the
# runtime podman uses in tests/image_test (crun, podman's default, refuses a machine with
# hybrid cgroups). Idempotent: installs only what is missing. Exits 1 when it cannot install
# (no apt-get, no root and no sudo, no mirror): the callers then go on without the tools,
# saying so.
set -uo pipefail
packages=("$@")
if [ ${#packages[@]} -eq 0 ]; then packages=(skopeo umoci podman runc); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null; then
  echo "tools.sh: no apt-get to install ${missing[*]}" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null; then
    echo "tools.sh: not root and no sudo: cannot install ${missing[*]}" >&2
    exit 1
  fi
  SUDO="sudo"
fi
echo "tools.sh: installing ${missing[*]}" >&2
{ $SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q \
    --no-install-recommends "${missing[@]}"; } >&2 || {
  echo "tools.sh: could not install ${missing[*]}" >&2
  exit 1
}
