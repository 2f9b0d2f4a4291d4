#!/usr/bin/env bash
# Puts Samsa and every dependency as wheels into deploy/wheels/, the Docker build context's
# input, so that `docker build` needs no network. Run on the host, with PyPI reachable.
#   bash deploy/build-wheels.sh [PYTHON_VERSION [MACHINE]]
#     PYTHON_VERSION  the image's Python: 3.12 (python:3.12-slim, the default) or 3.11 (bookworm)
#     MACHINE         the image's architecture, as `uname -m` names it: this machine's by default
#                     (x86_64; aarch64 or arm64 on ARM, e.g. an Apple-silicon Mac, whose Docker
#                     builds arm64 images)
set -euo pipefail

# The wheel platform tags for a machine name, most specific first.
platform_tags() {
  local arch
  case "$1" in
    x86_64 | amd64) arch=x86_64 ;;
    aarch64 | arm64) arch=aarch64 ;;
    *) echo "build-wheels.sh: no wheels for machine '$1': use x86_64 or aarch64" >&2; return 2 ;;
  esac
  echo "manylinux_2_28_$arch manylinux_2_17_$arch manylinux2014_$arch any"
}

cd "$(dirname "$0")/.."
version=${1:-3.12}
tags=$(platform_tags "${2:-$(uname -m)}")
pip=(.venv/bin/python -m pip)
[ -x .venv/bin/python ] || pip=(python3 -m pip)
out=deploy/wheels
rm -rf "$out" && mkdir -p "$out"
# Samsa itself, and any dependency published only as an sdist (built here: pure Python ones).
"${pip[@]}" wheel --quiet --wheel-dir "$out" .
# Then the binary wheels for the image's Python and machine (grpcio, protobuf, cryptography,
# ...), which may differ from the host's; --find-links offers the wheels built above.
platforms=()
for tag in $tags; do platforms+=(--platform "$tag"); done
"${pip[@]}" download --quiet --dest "$out" --find-links "$out" --only-binary=:all: \
  --python-version "$version" --implementation cp --abi "cp${version/./}" --abi abi3 --abi none \
  "${platforms[@]}" \
  "$out"/samsa-*.whl
echo "$(ls "$out" | wc -l) wheels in $out for Python $version on ${tags%% *}" >&2
