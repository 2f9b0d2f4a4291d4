"""The Node.js client (clients/node) against a real cluster, side by side with the Python SDK.

Goal: a client in another language, built from proto/samsa/v1 alone, interoperates with the
Python SDK record for record: what Node produces (keys, null keys, empty values, headers) Python
reads back exactly, at the offsets Node was told; Node's keyed records land on the partitions the
Python SDK's partitioner picks for their keys, each key's in order; what Python produces Node
prints exactly; Node's DeleteRecords moves the log start Python reads from; and
a Node group member joins, reads what the coordinator assigns, commits where it stopped and
leaves, as the Python Admin sees it. A partition error reaches the user as one line naming its
ErrorCode. Node's produce with acks -1 is idempotent (KIP-98, on the portable typed path): its
records are stored once, in call order, even when concurrent calls share a partition or an
answer is lost and the request is sent again; a replay of a request with the same producer id,
epoch and base sequence is answered with the first write's offsets and stores nothing (and the
same replay without them stores the records twice); a sequence gap is refused with
OUT_OF_ORDER_SEQUENCE_NUMBER, writes nothing, and the client's next produce starts over with a
new producer id.

Method: `node clients/node/example.js` in a subprocess against a local cluster of 1 controller,
2 brokers and 1 coordinator (real processes, real gRPC), with the Python Producer, Consumer and
Admin on the other side; each comparison is of whole records (partition, offset, key, value,
headers), not counts. The idempotence tests run short Node scripts over samsa.js: a lost answer
is made by dropping the first Produce answer at the client's call seam (the broker did write),
a gap by raising one request's base_sequence there; Admin.describe_producers shows the producer
id and last sequence the leader holds. Skipped when `node` or clients/node/node_modules is
missing.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from cluster_helpers import FAST_SETTINGS, local_cluster

from samsa.client import Admin, Consumer, NewTopic, Producer
from samsa.client.partitioner import partition_for_key

NODE_DIR = Path(__file__).resolve().parents[2] / "clients" / "node"
NODE = shutil.which("node")
if NODE is None or not (NODE_DIR / "node_modules").is_dir():
    pytest.skip(
        "needs `node` on PATH and clients/node/node_modules (npm ci --prefix clients/node)",
        allow_module_level=True,
    )

pytestmark = pytest.mark.timeout(120)
SETTINGS = FAST_SETTINGS | {
    "offsets.topic.num.partitions": "2",
    "group.consumer.heartbeat.interval.ms": "300",
}
Row = tuple[int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory):
    """The brokers' endpoints: all the Node client needs."""
    data_dir = tmp_path_factory.mktemp("node")
    with local_cluster(data_dir, 1, 2, SETTINGS, coordinators=1) as running:
        yield ",".join(broker.endpoint for broker in running.spec.brokers)


def node(bootstrap: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [NODE, str(NODE_DIR / "example.js"), "--bootstrap", bootstrap, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


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


# A Node script's frame: `client` (a SamsaClient with `options`), `topic`, `data` (JSON from
# Python) and `NO_ERROR` are in scope of BODY, an async function body whose return value is
# printed as JSON.
SCRIPT = """
const { SamsaClient, NO_ERROR } = require(process.env.NODE_TEST_CLIENT);
const options = JSON.parse(process.env.NODE_TEST_OPTIONS);
const client = new SamsaClient(process.env.SAMSA_BOOTSTRAP, options);
const topic = process.env.NODE_TEST_TOPIC;
const data = JSON.parse(process.env.NODE_TEST_DATA);
(async () => {
BODY
})()
  .then((result) => console.log(JSON.stringify(result)))
  .catch((error) => { console.error(error.stack); process.exitCode = 1; })
  .finally(() => client.close());
"""
# Wraps client.call so that the first Produce is written by the broker but its answer is lost
# (the client sees gRPC UNAVAILABLE, status 14, and must send the request again).
LOSE_FIRST_PRODUCE_ANSWER = """
const call = client.call.bind(client);
let lost = 0;
client.call = async (kind, endpoint, method, request, ...rest) => {
  const answer = await call(kind, endpoint, method, request, ...rest);
  if (method === 'Produce' && lost++ === 0) {
    throw Object.assign(new Error('the answer was lost'), { code: 14 });
  }
  return answer;
};
"""
# A fixed timestamp, so that a replayed request is byte for byte the first one.
TIMESTAMP_MS = 1_700_000_000_000
Records = list[dict]


def node_script(
    bootstrap: str, topic: str, body: str, data: object = None, **options: object
) -> object:
    """Runs BODY in SCRIPT against the cluster and returns what it printed, parsed."""
    env = {
        "PATH": str(Path(NODE).parent),
        "NODE_TEST_CLIENT": str(NODE_DIR / "samsa.js"),
        "SAMSA_BOOTSTRAP": bootstrap,
        "NODE_TEST_OPTIONS": json.dumps(options),
        "NODE_TEST_TOPIC": topic,
        "NODE_TEST_DATA": json.dumps(data),
    }
    done = subprocess.run(
        [NODE, "-e", SCRIPT.replace("BODY", body)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def make_records(prefix: str, count: int) -> Records:
    """Records as Node takes them (JSON), with a fixed timestamp."""
    return [
        {
            "key": f"{prefix}-k{n}",
            "value": f"{prefix} value {n} é",
            "headers": [["n", str(n)], ["src", "node"]],
            "timestamp": TIMESTAMP_MS,
        }
        for n in range(count)
    ]


def rows_of(partition: int, base_offset: int, records: Records) -> list[Row]:
    """The rows the Python Consumer must read for `records` written from `base_offset`."""
    return [
        (
            partition,
            base_offset + n,
            record["key"].encode(),
            record["value"].encode(),
            tuple((k, v.encode()) for k, v in record["headers"]),
        )
        for n, record in enumerate(records)
    ]


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])


def read_partition(bootstrap: str, topic: str, partition: int) -> list[Row]:
    """Every record of the partition, from offset 0 to its end offset, as rows."""
    config = {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}
    with Consumer(config) as consumer:
        consumer.assign([(topic, partition)])
        end = consumer.end_offsets([(topic, partition)])[(topic, partition)]
        read: list[Row] = []
        while not read or read[-1][1] < end - 1:
            batch = consumer.poll(timeout=10)
            assert batch, f"nothing after {len(read)} records of {topic}[{partition}]"
            read += [(r.partition, r.offset, r.key, r.value, r.headers) for r in batch]
    return read


def producers_of(bootstrap: str, topic: str, partition: int) -> list[tuple[int, int, int]]:
    """(producer id, epoch, last sequence) of each producer the partition's leader holds."""
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        states = admin.describe_producers([(topic, partition)])[(topic, partition)]
    return sorted((s.producer_id, s.producer_epoch, s.last_sequence) for s in states)


def test_node_idempotent_produce_stores_each_call_once_in_call_order(bootstrap: str) -> None:
    topic = "idempotent-from-node"
    create_topic(bootstrap, topic, 2)
    calls = [make_records(f"call{n}", 3) for n in range(8)]
    # Eight produce() calls to partition 0 at once, with the default acks (-1): each waits for
    # the one before it, so each is written once, at the offset after the previous call's.
    produced = node_script(
        bootstrap,
        topic,
        """
        const offsets = await Promise.all(data.map((records) => client.produce(topic, 0, records)));
        const { producerId, producerEpoch } = await client.producerIdentity();
        return { offsets, producerId, producerEpoch };
        """,
        calls,
    )
    assert produced["offsets"] == [3 * n for n in range(8)]
    expected = [row for n, records in enumerate(calls) for row in rows_of(0, 3 * n, records)]
    assert read_partition(bootstrap, topic, 0) == expected
    producer_id = int(produced["producerId"])
    assert producers_of(bootstrap, topic, 0) == [(producer_id, produced["producerEpoch"], 23)]

    # example.js produce is idempotent by default (the leader then holds its producer, at the
    # last sequence of its 2 records), and is not with --no-idempotence (no producer added).
    lines = "a:1\nb:2\n"
    written = node(bootstrap, "produce", topic, "--partition", "1", stdin=lines)
    assert written.returncode == 0, written.stderr
    states = producers_of(bootstrap, topic, 1)
    assert [state[2] for state in states] == [1], states
    written = node(bootstrap, "produce", topic, "--partition", "1", "--no-idempotence", stdin=lines)
    assert written.returncode == 0, written.stderr
    assert producers_of(bootstrap, topic, 1) == states
    assert [(r[1], r[2], r[3]) for r in read_partition(bootstrap, topic, 1)] == [
        (0, b"a", b"1"),
        (1, b"b", b"2"),
        (2, b"a", b"1"),
        (3, b"b", b"2"),
    ]


def test_a_replayed_request_is_answered_with_its_first_offsets_and_stored_once(
    bootstrap: str,
) -> None:
    topic = "replayed-by-node"
    create_topic(bootstrap, topic, 1)
    first, second = make_records("first", 4), make_records("second", 3)
    # What a client does after a lost answer: the identical request again. With the producer
    # fields (from InitProducerId) the leader answers the first write's offset; without them it
    # writes the records a second time.
    answers = node_script(
        bootstrap,
        topic,
        """
        const identity = await client.initProducerId();
        const producer = { ...identity, baseSequence: 0 };
        const send = (records, options) => client.produceOnce(topic, 0, records, options);
        return [
          await send(data.first, { producer }),
          await send(data.first, { producer }),
          await send(data.second, {}),
          await send(data.second, {}),
        ];
        """,
        {"first": first, "second": second},
    )
    ok = "ERROR_CODE_UNSPECIFIED"
    assert answers == [
        {"errorCode": ok, "baseOffset": 0},
        {"errorCode": ok, "baseOffset": 0},
        {"errorCode": ok, "baseOffset": 4},
        {"errorCode": ok, "baseOffset": 7},
    ]
    expected = rows_of(0, 0, first) + rows_of(0, 4, second) + rows_of(0, 7, second)
    assert read_partition(bootstrap, topic, 0) == expected


def test_a_lost_produce_answer_is_retried_without_a_duplicate(bootstrap: str) -> None:
    topic = "lost-answers"
    create_topic(bootstrap, topic, 2)
    records = make_records("lost", 5)
    produce = (
        LOSE_FIRST_PRODUCE_ANSWER + "return client.produce(topic, data.partition, data.records);"
    )
    # Partition 0, idempotent (the default): the retry is the same request, answered with the
    # first write's offset.
    offset = node_script(bootstrap, topic, produce, {"partition": 0, "records": records})
    assert offset == 0
    assert read_partition(bootstrap, topic, 0) == rows_of(0, 0, records)
    # Partition 1, idempotence off: the same lost answer stores the records twice.
    data = {"partition": 1, "records": records}
    offset = node_script(bootstrap, topic, produce, data, idempotence=False)
    assert offset == 5
    assert read_partition(bootstrap, topic, 1) == rows_of(1, 0, records) + rows_of(1, 5, records)


def test_a_sequence_gap_is_refused_writes_nothing_and_the_next_produce_starts_anew(
    bootstrap: str,
) -> None:
    topic = "sequence-gaps"
    create_topic(bootstrap, topic, 2)
    first, skipped = make_records("first", 3), make_records("skipped", 2)
    answers = node_script(
        bootstrap,
        topic,
        """
        const identity = await client.initProducerId();
        const at = (baseSequence) => ({ producer: { ...identity, baseSequence } });
        // The next sequence is 3: 5 leaves a gap, as if a request between them were lost.
        return [
          await client.produceOnce(topic, 0, data.first, at(0)),
          await client.produceOnce(topic, 0, data.skipped, at(5)),
        ];
        """,
        {"first": first, "skipped": skipped},
    )
    assert answers == [
        {"errorCode": "ERROR_CODE_UNSPECIFIED", "baseOffset": 0},
        {"errorCode": "ERROR_CODE_OUT_OF_ORDER_SEQUENCE_NUMBER", "baseOffset": None},
    ]
    assert read_partition(bootstrap, topic, 0) == rows_of(0, 0, first)

    # Through produce(): the second call's request reaches the leader with its base_sequence
    # raised by 5 (a gap). The caller gets the error; the client drops its producer id, so the
    # third call writes with a new one from sequence 0.
    calls = [make_records(f"call{n}", 2) for n in range(3)]
    outcome = node_script(
        bootstrap,
        topic,
        """
        const call = client.call.bind(client);
        let produces = 0;
        client.call = (kind, endpoint, method, request, ...rest) => {
          if (method === 'Produce' && ++produces === 2) {
            const gap = (p) => ({ ...p, base_sequence: p.base_sequence + 5 });
            const topics = request.topics.map((t) => ({ ...t, partitions: t.partitions.map(gap) }));
            request = { ...request, topics };
          }
          return call(kind, endpoint, method, request, ...rest);
        };
        const ids = [];
        const outcomes = [];
        for (const records of data) {
          ids.push((await client.producerIdentity()).producerId);
          outcomes.push(await client.produce(topic, 1, records).catch((error) => error.code));
        }
        return { ids, outcomes };
        """,
        calls,
    )
    first_id, _, new_id = (int(n) for n in outcome["ids"])
    assert outcome["ids"][0] == outcome["ids"][1] and new_id != first_id
    assert outcome["outcomes"] == [0, "ERROR_CODE_OUT_OF_ORDER_SEQUENCE_NUMBER", 2]
    assert read_partition(bootstrap, topic, 1) == rows_of(1, 0, calls[0]) + rows_of(1, 2, calls[2])
    assert producers_of(bootstrap, topic, 1) == sorted([(first_id, 0, 1), (new_id, 0, 1)])
