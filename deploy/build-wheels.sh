#!/usr/bin/env bash
# Puts Samsa and every dependency as wheels into deploy/wheels/, the Docker build context's
# input, so that `docker build` needs no network. Run on the host, with PyPI reachable.
#   bash deploy/build-wheels.sh [PYTHON_VERSION]   the image's Python: 3.12 (python:3.12-slim,
#                                                  the default) or 3.11 (Debian bookworm)
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:-3.12}
pip=(.venv/bin/python -m pip)
[ -x .venv/bin/python ] || pip=(python3 -m pip)
out=deploy/wheels
rm -rf "$out" && mkdir -p "$out"
# Samsa itself, and any dependency published only as an sdist (built here: pure Python ones).
"${pip[@]}" wheel --quiet --wheel-dir "$out" .
# Then the binary wheels for the image's Python (grpcio, protobuf, cryptography, ...), which may
# differ from the host's; --find-links offers the wheels built above.
"${pip[@]}" download --quiet --dest "$out" --find-links "$out" --only-binary=:all: \
  --python-version "$version" --implementation cp --abi "cp${version/./}" --abi abi3 --abi none \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform any \
  "$out"/samsa-*.whl
echo "$(ls "$out" | wc -l) wheels in $out for Python $version" >&2
