"""Regenerate the committed Python code of the wire contract: proto/samsa/v1 -> proto/gen/samsa/v1.

Run from anywhere, after editing a .proto file:

    .venv/bin/python proto/generate.py

It runs the protobuf compiler bundled with grpcio-tools (`grpc_tools.protoc`) with `-I proto`, so
every file is compiled under its import path `samsa/v1/<name>.proto` and the generated modules
import each other as `samsa.v1.<name>_pb2`, which is where pyproject.toml installs
proto/gen/samsa/v1. For each .proto file it writes `<name>_pb2.py` (messages), `<name>_pb2.pyi`
(type stubs) and `<name>_pb2_grpc.py` (service stubs and servicers).

The output depends on the grpcio-tools version, and the generated code refuses to import under a
protobuf or grpcio runtime older than the one it was generated with; so generate with the
version pinned in pyproject.toml's dev extra. tests/unit/test_proto_contract.py runs this script
into a temporary directory and fails when the committed files differ.

The code is generated into a scratch directory first and then replaces the generated files of
the output (removing any whose .proto is gone); `__init__.py` and `py.typed` are left alone.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from importlib import resources
from pathlib import Path

from grpc_tools import protoc

PROTO_ROOT = Path(__file__).resolve().parent
PACKAGE_PATH = Path("samsa", "v1")
OUTPUT_ROOT_DEFAULT = PROTO_ROOT / "gen"

# What protoc writes per .proto file; anything else in the package folder is hand-written.
GENERATED_SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")


def proto_files(proto_root: Path = PROTO_ROOT) -> list[str]:
    """The contract's .proto files as protoc import paths (`samsa/v1/x.proto`), sorted."""
    folder = proto_root / PACKAGE_PATH
    return sorted((PACKAGE_PATH / path.name).as_posix() for path in folder.glob("*.proto"))


def is_generated(path: Path) -> bool:
    return path.name.endswith(GENERATED_SUFFIXES)


def run_protoc(output_root: Path, proto_root: Path = PROTO_ROOT) -> None:
    """Compile every .proto file into output_root/samsa/v1 (which need not exist)."""
    sources = proto_files(proto_root)
    assert sources, f"no .proto files under {proto_root / PACKAGE_PATH}"
    output_root.mkdir(parents=True, exist_ok=True)
    # The well-known types (google/protobuf/*.proto) ship inside grpcio-tools; `python -m
    # grpc_tools.protoc` adds them to the include path and so do we.
    well_known_types = resources.files("grpc_tools") / "_proto"
    arguments = [
        "grpc_tools.protoc",
        f"-I{proto_root}",
        f"-I{well_known_types}",
        f"--python_out={output_root}",
        f"--pyi_out={output_root}",
        f"--grpc_python_out={output_root}",
        *sources,
    ]
    status = protoc.main(arguments)
    if status != 0:
        raise SystemExit(f"protoc failed with status {status} (its errors are above)")


def generate(output_root: Path = OUTPUT_ROOT_DEFAULT, proto_root: Path = PROTO_ROOT) -> list[Path]:
    """Regenerate output_root/samsa/v1 and return the generated files, sorted."""
    target = output_root / PACKAGE_PATH
    with tempfile.TemporaryDirectory(prefix="samsa-proto-") as scratch:
        run_protoc(Path(scratch), proto_root)
        fresh = sorted(path for path in (Path(scratch) / PACKAGE_PATH).iterdir())
        assert fresh and all(is_generated(path) for path in fresh), fresh
        target.mkdir(parents=True, exist_ok=True)
        for stale in target.iterdir():
            if is_generated(stale):
                stale.unlink()
        for path in fresh:
            shutil.copyfile(path, target / path.name)
    return sorted(path for path in target.iterdir() if is_generated(path))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--output",
        type=Path,
        default=OUTPUT_ROOT_DEFAULT,
        help="root to generate into; files land in <output>/samsa/v1 (default: proto/gen)",
    )
    arguments = parser.parse_args(argv)
    for path in generate(arguments.output):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
