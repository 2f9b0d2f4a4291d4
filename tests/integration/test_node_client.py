"""The Node.js client (clients/node) against a real cluster, side by side with the Python SDK.

Goal: a client in another language, built from proto/samsa/v1 alone, interoperates with the
Python SDK record for record: what Node produces (keys, null keys, empty values, headers) Python
reads back exactly, at the offsets Node was told; Node's keyed records land on the partitions the
Python SDK's partitioner picks for their keys, each key's in order; what Python produces Node
prints exactly; Node's DeleteRecords moves the log start Python reads from; and
a Node group member joins, reads what the coordinator assigns, commits where it stopped and
leaves, as the Python Admin sees it. A partition error reaches the user as one line naming its
ErrorCode. Node's idempotent produce has its own module, test_node_idempotence.py.

Method: `node clients/node/example.js` in a subprocess against a local cluster of 1 controller,
2 brokers and 1 coordinator (real processes, real gRPC), with the Python Producer, Consumer and
Admin on the other side; each comparison is of whole records (partition, offset, key, value,
headers), not counts. Skipped when `node` or clients/node/node_modules is missing.
"""

from __future__ import annotations

import json

import pytest
from node_helpers import Row, bootstrap_fixture, node, skip_module_without_node

from samsa.client import Admin, Consumer, NewTopic, Producer
from samsa.client.partitioner import partition_for_key

skip_module_without_node()

pytestmark = pytest.mark.timeout(120)
bootstrap = bootstrap_fixture("node")


def printed_rows(stdout: str, topic: str) -> list[Row]:
    """The JSON lines `consume` and `group-consume` print, as rows to compare with Python's."""
    rows = []
    for line in stdout.splitlines():
        record = json.loads(line)
        assert record["topic"] == topic, line
        key, value = (None if s is None else s.encode() for s in (record["key"], record["value"]))
        headers = tuple((k, None if v is None else v.encode()) for k, v in record["headers"])
        rows.append((record["partition"], record["offset"], key, value, headers))
    return rows


def produce_with_python(bootstrap: str, topic: str) -> list[Row]:
    """Records with keys, a null key, an empty value and headers over 2 partitions, as rows
    sorted by partition and offset."""
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 2, 1)])
    rows: list[Row] = []
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        sent = []
        for n in range(12):
            key = None if n == 5 else f"k{n}".encode()
            value = b"" if n == 7 else f"value {n} é".encode()
            headers = ((f"h{n % 3}", f"{n}".encode()), ("same", None))
            future = producer.send(topic, value, key, list(headers), partition=n % 2)
            sent.append((future, key, value, headers))
        producer.flush()
        for future, key, value, headers in sent:
            metadata = future.result(timeout=10)
            rows.append((metadata.partition, metadata.offset, key, value, headers))
    return sorted(rows, key=lambda row: row[:2])


def test_node_produces_and_python_reads_every_record(bootstrap: str) -> None:
    topic = "from-node"
    created = node(bootstrap, "create-topic", topic, "--partitions", "2")
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout) == {"topic": topic, "created": True}
    again = node(bootstrap, "create-topic", topic, "--partitions", "2")
    assert json.loads(again.stdout) == {"topic": topic, "created": False}, again.stderr

    batches = {
        0: ("alice:ordered a book\nbob:ordered a lamp\nno key here\n", ["src=node", "n=1"]),
        1: ("carol:\nalice:x:y\n:empty key\n", ["src=node", "src=again"]),
    }
    expected: list[Row] = []
    for partition, (lines, headers) in batches.items():
        flags = [flag for header in headers for flag in ("--header", header)]
        produced = node(
            bootstrap, "produce", topic, "--partition", str(partition), *flags, stdin=lines
        )
        assert produced.returncode == 0, produced.stderr
        answer = json.loads(produced.stdout)
        assert (answer["base_offset"], answer["count"]) == (0, 3)
        header_rows = tuple((h.split("=")[0], h.split("=")[1].encode()) for h in headers)
        for offset, line in enumerate(lines.splitlines()):
            key, _, value = line.partition(":") if ":" in line else (None, "", line)
            key_bytes = None if key is None else key.encode()
            expected.append((partition, offset, key_bytes, value.encode(), header_rows))

    config = {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}
    with Consumer(config) as consumer:
        partitions = [(topic, 0), (topic, 1)]
        consumer.assign(partitions)
        assert consumer.end_offsets(partitions) == {(topic, 0): 3, (topic, 1): 3}
        read: list[Row] = []
        while len(read) < len(expected):
            batch = consumer.poll(timeout=10)
            assert batch, f"nothing after {len(read)} of {len(expected)} records"
            read += [(r.partition, r.offset, r.key, r.value, r.headers) for r in batch]
    assert sorted(read, key=lambda row: row[:2]) == expected


def test_node_keyed_records_land_where_the_python_partitioner_puts_their_keys(
    bootstrap: str,
) -> None:
    topic, partitions = "keyed-from-node", 5
    created = node(bootstrap, "create-topic", topic, "--partitions", str(partitions))
    assert created.returncode == 0, created.stderr
    # Keys of every length from 0 to 12 bytes (murmur2's 4-byte blocks and each tail length),
    # multi-byte UTF-8 ones, and repeats, whose records must keep their order in one partition.
    keys = ["k" * n for n in range(13)] + [f"user-{n}" for n in range(40)] + ["é", "ключ", "鍵-7"]
    sent = keys + keys[::3]
    lines = "".join(f"{key}:{n}\n" for n, key in enumerate(sent))
    produced = node(bootstrap, "produce", topic, stdin=lines)
    assert produced.returncode == 0, produced.stderr
    answers = [json.loads(line) for line in produced.stdout.splitlines()]
    assert sum(answer["count"] for answer in answers) == len(sent)
    assert len(answers) > 1, "every key on one partition proves nothing about the hash"

    config = {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}
    with Consumer(config) as consumer:
        consumer.assign([(topic, p) for p in range(partitions)])
        read = []
        while len(read) < len(sent):
            batch = consumer.poll(timeout=10)
            assert batch, f"nothing after {len(read)} of {len(sent)} records"
            read += batch
    for record in read:
        assert record.key is not None
        assert record.partition == partition_for_key(record.key, partitions), record
    by_key: dict[bytes, list[int]] = {}
    for record in sorted(read, key=lambda r: (r.partition, r.offset)):
        by_key.setdefault(record.key, []).append(int(record.value))
    expected: dict[bytes, list[int]] = {}
    for n, key in enumerate(sent):
        expected.setdefault(key.encode(), []).append(n)
    assert by_key == expected


def test_python_produces_and_node_consumes_every_record(bootstrap: str) -> None:
    topic = "from-python"
    expected = produce_with_python(bootstrap, topic)
    consumed = node(bootstrap, "consume", topic, "--from", "0", "--count", str(len(expected)))
    assert consumed.returncode == 0, consumed.stderr
    rows = printed_rows(consumed.stdout, topic)
    for partition in (0, 1):
        offsets = [row[1] for row in rows if row[0] == partition]
        assert offsets == sorted(offsets), f"partition {partition} printed out of order"
    assert sorted(rows, key=lambda row: row[:2]) == expected

    tail = node(
        bootstrap, "consume", topic, "--partition", "1", "--from", "4", "--timeout-ms", "500"
    )
    assert tail.returncode == 0, tail.stderr
    assert printed_rows(tail.stdout, topic) == [row for row in expected if row[:1] == (1,)][4:]


def test_node_group_member_consumes_commits_and_leaves(bootstrap: str) -> None:
    topic, group = "for-group", "node-group"
    expected = produce_with_python(bootstrap, topic)
    joined = node(bootstrap, "group-consume", group, topic, "--count", str(len(expected)))
    assert joined.returncode == 0, joined.stderr
    assert sorted(printed_rows(joined.stdout, topic), key=lambda row: row[:2]) == expected

    partitions = [(topic, 0), (topic, 1)]
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        committed = admin.list_consumer_group_offsets(group, partitions)
        ends = {(topic, p): 1 + max(row[1] for row in expected if row[0] == p) for p in (0, 1)}
        assert {tp: offset.offset for tp, offset in committed.items()} == ends
        description = admin.describe_consumer_groups([group])[group]
        assert (description.state, description.members) == ("Empty", ())

    # A second member starts from the committed offsets: nothing is left to print.
    rejoined = node(bootstrap, "group-consume", group, topic, "--timeout-ms", "1000")
    assert (rejoined.returncode, rejoined.stdout) == (0, ""), rejoined.stderr


def test_node_deletes_records_and_python_reads_from_the_new_log_start(bootstrap: str) -> None:
    topic = "trimmed-by-node"
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        for n in range(10):
            producer.send(topic, f"v{n}".encode(), partition=0)
        producer.flush()

    deleted = node(bootstrap, "delete-records", topic, "--offset", "4")
    assert deleted.returncode == 0, deleted.stderr
    assert json.loads(deleted.stdout) == {"topic": topic, "partition": 0, "low_watermark": 4}
    refused = node(bootstrap, "delete-records", topic, "--offset", "11")
    assert refused.returncode == 1 and refused.stdout == ""
    assert "ERROR_CODE_OFFSET_OUT_OF_RANGE" in refused.stderr, refused.stderr

    config = {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}
    with Consumer(config) as consumer:
        consumer.assign([(topic, 0)])
        assert consumer.beginning_offsets([(topic, 0)]) == {(topic, 0): 4}
        read = []
        while len(read) < 6:
            batch = consumer.poll(timeout=10)
            assert batch, f"nothing after {len(read)} of 6 records"
            read += [(r.offset, r.value) for r in batch]
    assert read == [(n, f"v{n}".encode()) for n in range(4, 10)]

    everything = node(bootstrap, "delete-records", topic, "--offset", "latest")
    assert json.loads(everything.stdout)["low_watermark"] == 10, everything.stderr


def test_a_partition_error_is_one_line_naming_its_code(bootstrap: str) -> None:
    refused = node(bootstrap, "produce", "from-node", "--acks", "5", stdin="k:v\n")
    assert refused.returncode == 1
    assert refused.stdout == ""
    assert refused.stderr.count("\n") == 1
    assert "ERROR_CODE_INVALID_REQUIRED_ACKS" in refused.stderr


def test_node_reads_from_the_log_start_once_records_were_deleted(bootstrap: str) -> None:
    topic = "deleted-then-read"
    expected = produce_with_python(bootstrap, topic)
    deleted = node(bootstrap, "delete-records", topic, "--partition", "0", "--offset", "2")
    assert deleted.returncode == 0, deleted.stderr
    remaining = [row for row in expected if row[:1] == (1,) or row[1] >= 2]
    count = str(len(remaining))
    # A group with no committed offset starts at the log start (Kafka's
    # auto.offset.reset=earliest), not at offset 0, which is gone; so does consume without --from.
    joined = node(bootstrap, "group-consume", "fresh-group", topic, "--count", count)
    assert joined.returncode == 0, joined.stderr
    assert sorted(printed_rows(joined.stdout, topic), key=lambda row: row[:2]) == remaining
    consumed = node(bootstrap, "consume", topic, "--count", count)
    assert consumed.returncode == 0, consumed.stderr
    assert sorted(printed_rows(consumed.stdout, topic), key=lambda row: row[:2]) == remaining
