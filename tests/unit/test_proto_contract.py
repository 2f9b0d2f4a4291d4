"""Goal: the wire contract (proto/samsa/v1) stays honest: the committed Python code is exactly
what the .proto files generate, the .proto files pass buf's STANDARD lint and document every
declaration, and the generated modules import under the names the rest of Samsa uses.

Method:
- Staleness: run proto/generate.py (the script developers run) in a subprocess into a temporary
  directory and compare its files byte for byte, and as a set of names, with proto/gen/samsa/v1.
- Lint: run the buf binary that `npm ci --prefix proto` installs, as `buf lint proto` (and
  `buf format --diff --exit-code proto`) from the repository root, and expect exit status 0. A
  missing binary fails the test (CI installs it) unless SAMSA_SKIP_BUF=1, which skips it.
- Docs: compile the contract to a descriptor set with source info (grpc_tools.protoc, in a
  subprocess) and check that every message, field, enum, enum value, service and RPC carries a
  leading comment, since buf's STANDARD rules do not ask for them.
- Import: import samsa.v1.broker_pb2 and samsa.v1.broker_pb2_grpc and check that BrokerService
  has Produce, Fetch and ListOffsets with the standard request and response types; round-trip
  a few messages to check that presence survives (null vs empty bytes, unset vs 0).
"""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2

REPO = Path(__file__).resolve().parents[2]
PROTO_ROOT = REPO / "proto"
CONTRACT = PROTO_ROOT / "samsa" / "v1"
COMMITTED = PROTO_ROOT / "gen" / "samsa" / "v1"
GENERATED_SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")  # as in proto/generate.py


def generated_files(folder: Path) -> dict[str, bytes]:
    return {
        path.name: path.read_bytes()
        for path in sorted(folder.iterdir())
        if path.name.endswith(GENERATED_SUFFIXES)
    }


def committed_grpc_tools_version() -> str:
    """The grpcio-tools version the committed code was generated with (it records it)."""
    for line in (COMMITTED / "broker_pb2_grpc.py").read_text().splitlines():
        if line.startswith("GRPC_GENERATED_VERSION"):
            return line.split("=")[1].strip().strip("'\"")
    return "unknown"


# --- staleness --------------------------------------------------------------------------------


def test_committed_generated_code_matches_the_proto_files(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(PROTO_ROOT / "generate.py"), "--output", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, f"proto/generate.py failed:\n{result.stdout}{result.stderr}"
    fresh = generated_files(tmp_path / "samsa" / "v1")
    committed = generated_files(COMMITTED)
    assert fresh, "proto/generate.py generated nothing"
    advice = (
        "proto/gen/samsa/v1 is stale: run `python proto/generate.py` and commit the result. "
        f"(Committed code was generated with grpcio-tools {committed_grpc_tools_version()}, "
        f"this environment has {metadata.version('grpcio-tools')}: generate with the version "
        "pinned in pyproject.toml's dev extra.)"
    )
    assert sorted(fresh) == sorted(committed), advice
    differing = [name for name in fresh if fresh[name] != committed[name]]
    assert not differing, f"{advice} Differing files: {differing}"


def test_hand_written_package_files_are_kept() -> None:
    # generate.py replaces only generated files; the package marker and the typing marker stay.
    assert (COMMITTED / "__init__.py").is_file()
    assert (COMMITTED / "py.typed").is_file()


# --- buf lint ---------------------------------------------------------------------------------


def buf_binary() -> Path | None:
    bin_folder = PROTO_ROOT / "node_modules" / ".bin"
    for name in ("buf", "buf.cmd"):
        if (bin_folder / name).is_file():
            return bin_folder / name
    return None


def run_buf(*arguments: str) -> subprocess.CompletedProcess[str]:
    buf = buf_binary()
    if buf is None:
        if os.environ.get("SAMSA_SKIP_BUF") == "1":
            pytest.skip("buf is not installed and SAMSA_SKIP_BUF=1")
        pytest.fail(
            "buf is not installed: run `npm ci --prefix proto` (or set SAMSA_SKIP_BUF=1 to skip)"
        )
    return subprocess.run(
        [str(buf), *arguments], cwd=REPO, capture_output=True, text=True, timeout=120
    )


def test_buf_lint_is_clean() -> None:
    result = run_buf("lint", "proto")
    assert result.returncode == 0, (
        f"`buf lint proto` exited {result.returncode}:\n{result.stdout}{result.stderr}"
    )


def test_proto_files_are_buf_formatted() -> None:
    # One layout for every .proto file, so that diffs show meaning, not whitespace.
    result = run_buf("format", "--diff", "--exit-code", "proto")
    assert result.returncode == 0, (
        "run `proto/node_modules/.bin/buf format -w proto`:\n" + result.stdout + result.stderr
    )


def test_no_lint_rule_is_silenced() -> None:
    # STANDARD means all of it: no `buf:lint:ignore` comments in the contract.
    for path in sorted(CONTRACT.glob("*.proto")):
        assert "buf:lint:ignore" not in path.read_text(), f"{path.name} silences a lint rule"


# --- doc comments -----------------------------------------------------------------------------


def compile_with_source_info(tmp_path: Path) -> descriptor_pb2.FileDescriptorSet:
    output = tmp_path / "contract.binpb"
    sources = sorted(f"samsa/v1/{path.name}" for path in CONTRACT.glob("*.proto"))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{PROTO_ROOT}",
            "--include_source_info",
            f"--descriptor_set_out={output}",
            *sources,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return descriptor_pb2.FileDescriptorSet.FromString(output.read_bytes())


def declarations(
    file: descriptor_pb2.FileDescriptorProto,
) -> list[tuple[str, tuple[int, ...]]]:
    """Every declaration of a file that needs a doc comment, as (full name, source path).

    Source paths follow descriptor.proto's field numbers: FileDescriptorProto.message_type = 4,
    enum_type = 5, service = 6; DescriptorProto.field = 2, nested_type = 3, enum_type = 4,
    oneof_decl = 8; EnumDescriptorProto.value = 2; ServiceDescriptorProto.method = 2.
    """
    found: list[tuple[str, tuple[int, ...]]] = []

    def add_enum(
        enum: descriptor_pb2.EnumDescriptorProto, name: str, path: tuple[int, ...]
    ) -> None:
        found.append((name, path))
        for index, value in enumerate(enum.value):
            found.append((f"{name}.{value.name}", (*path, 2, index)))

    def add_message(
        message: descriptor_pb2.DescriptorProto, name: str, path: tuple[int, ...]
    ) -> None:
        if message.options.map_entry:
            return  # synthesized for a `map<,>` field, documented by that field's comment
        found.append((name, path))
        for index, field in enumerate(message.field):
            found.append((f"{name}.{field.name}", (*path, 2, index)))
        for index, nested in enumerate(message.nested_type):
            add_message(nested, f"{name}.{nested.name}", (*path, 3, index))
        for index, enum in enumerate(message.enum_type):
            add_enum(enum, f"{name}.{enum.name}", (*path, 4, index))
        for index, oneof in enumerate(message.oneof_decl):
            members = [field for field in message.field if field.HasField("oneof_index")]
            synthetic = all(
                field.proto3_optional for field in members if field.oneof_index == index
            )
            if not synthetic:  # `optional` fields get a hidden oneof nobody writes
                found.append((f"{name}.{oneof.name}", (*path, 8, index)))

    for index, message in enumerate(file.message_type):
        add_message(message, message.name, (4, index))
    for index, enum in enumerate(file.enum_type):
        add_enum(enum, enum.name, (5, index))
    for index, service in enumerate(file.service):
        found.append((service.name, (6, index)))
        for method_index, method in enumerate(service.method):
            found.append((f"{service.name}.{method.name}", (6, index, 2, method_index)))
    return found


def test_every_declaration_has_a_doc_comment(tmp_path: Path) -> None:
    contract = compile_with_source_info(tmp_path)
    assert {file.name for file in contract.file} >= {
        "samsa/v1/errors.proto",
        "samsa/v1/records.proto",
        "samsa/v1/broker.proto",
    }
    undocumented = []
    for file in contract.file:
        comments = {
            tuple(location.path): location.leading_comments.strip()
            for location in file.source_code_info.location
        }
        undocumented += [
            f"{file.name}: {name}" for name, path in declarations(file) if not comments.get(path)
        ]
    assert not undocumented, "declarations without a leading // comment:\n" + "\n".join(
        undocumented
    )


# --- the generated modules --------------------------------------------------------------------


def test_generated_modules_import_as_samsa_v1() -> None:
    from samsa.v1 import broker_pb2, broker_pb2_grpc

    assert Path(broker_pb2.__file__).parent.resolve() == COMMITTED.resolve()
    service = broker_pb2.DESCRIPTOR.services_by_name["BrokerService"]
    assert service.full_name == "samsa.v1.BrokerService"
    methods = {
        method.name: (method.input_type.full_name, method.output_type.full_name)
        for method in service.methods
    }
    assert methods == {
        "Produce": ("samsa.v1.ProduceRequest", "samsa.v1.ProduceResponse"),
        "ProduceStream": ("samsa.v1.ProduceStreamRequest", "samsa.v1.ProduceStreamResponse"),
        "Fetch": ("samsa.v1.FetchRequest", "samsa.v1.FetchResponse"),
        "FetchStream": ("samsa.v1.FetchStreamRequest", "samsa.v1.FetchStreamResponse"),
        "ReplicaFetchStream": (
            "samsa.v1.ReplicaFetchStreamRequest",
            "samsa.v1.ReplicaFetchStreamResponse",
        ),
        "ListOffsets": ("samsa.v1.ListOffsetsRequest", "samsa.v1.ListOffsetsResponse"),
        "InitProducerId": ("samsa.v1.InitProducerIdRequest", "samsa.v1.InitProducerIdResponse"),
        "WriteTxnMarkers": ("samsa.v1.WriteTxnMarkersRequest", "samsa.v1.WriteTxnMarkersResponse"),
        "WriteTxnMarkersStream": (
            "samsa.v1.WriteTxnMarkersStreamRequest",
            "samsa.v1.WriteTxnMarkersStreamResponse",
        ),
        "DescribeProducers": (
            "samsa.v1.DescribeProducersRequest",
            "samsa.v1.DescribeProducersResponse",
        ),
        "DeleteRecords": ("samsa.v1.DeleteRecordsRequest", "samsa.v1.DeleteRecordsResponse"),
        "DescribeLogDirs": (
            "samsa.v1.DescribeLogDirsRequest",
            "samsa.v1.DescribeLogDirsResponse",
        ),
    }
    for name in methods:
        assert callable(getattr(broker_pb2_grpc.BrokerServiceServicer, name))
    assert callable(broker_pb2_grpc.add_BrokerServiceServicer_to_server)
    assert broker_pb2_grpc.BrokerServiceStub is not None


def test_messages_round_trip_with_presence() -> None:
    # Null and empty differ for keys, values and header values, and unset `optional` sentinels
    # are distinguishable from 0 (a consumer must never pass for broker 0).
    from samsa.v1 import broker_pb2, records_pb2

    record = records_pb2.Record(
        key=b"", headers=[records_pb2.RecordHeader(key="trace"), records_pb2.RecordHeader(key="")]
    )
    decoded = records_pb2.Record.FromString(record.SerializeToString())
    assert decoded.HasField("key") and decoded.key == b""
    assert not decoded.HasField("value")
    assert [header.HasField("value") for header in decoded.headers] == [False, False]

    fetch = broker_pb2.FetchRequest.FromString(broker_pb2.FetchRequest().SerializeToString())
    assert not fetch.HasField("replica_id")
    follower = broker_pb2.FetchRequest(replica_id=0)
    assert broker_pb2.FetchRequest.FromString(follower.SerializeToString()).HasField("replica_id")
    assert not broker_pb2.ProduceRequest().HasField("acks")
