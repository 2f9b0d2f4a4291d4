#!/usr/bin/env bash
# Builds a local Debian bookworm image with python3 and python3-venv, for machines that cannot
# pull registry images (python:3.12-slim): debootstrap from this machine's apt mirror, then
# `docker import`. Skipped when an image of that name exists already.
#   bash deploy/build-local-base.sh [IMAGE]     (default samsa-base:bookworm; needs root)
# Then: docker build --build-arg BASE=samsa-base:bookworm ... (wheels for its Python 3.11).
set -euo pipefail
image=${1:-samsa-base:bookworm}
if docker image inspect "$image" >/dev/null 2>&1; then
  echo "$image exists; not rebuilt" >&2
  exit 0
fi
# The first Debian mirror in the apt sources (deb822 .sources files or sources.list lines).
mirror=${DEBIAN_MIRROR:-$(
  { grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}'
    grep -hs '^deb ' /etc/apt/sources.list | awk '{print $2}'; } |
    grep -v security | grep -m1 debian || true)}
mirror=${mirror:-http://deb.debian.org/debian}
rootfs=$(mktemp -d /tmp/samsa-base.XXXXXX)
trap 'rm -rf "$rootfs"' EXIT
debootstrap --variant=minbase --include=python3,python3-venv bookworm "$rootfs" "$mirror" >/dev/null
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
tar -C "$rootfs" -c . | docker import - "$image" >/dev/null
echo "built $image from $mirror" >&2
