"""The Node.js client's idempotent produce (clients/node/samsa.js) against a real cluster.

Goal: Node's produce with acks -1 is idempotent (KIP-98, on the portable typed path): its
records are stored once, in call order, even when concurrent calls share a partition or an
answer is lost and the request is sent again; a replay of a request with the same producer id,
epoch and base sequence is answered with the first write's offsets and stores nothing (and the
same replay without them stores the records twice); a sequence gap is refused with
OUT_OF_ORDER_SEQUENCE_NUMBER, writes nothing, and the client's next produce starts over from
sequence 0 under the next epoch of its producer id (KIP-360), which the leader takes.

Method: short Node scripts over samsa.js against a local cluster of 1 controller, 2 brokers and
1 coordinator (real processes, real gRPC); the Python Consumer reads back whole records
(partition, offset, key, value, headers). A lost answer is made by dropping the first Produce
answer at the client's call seam (the broker did write), a gap by raising one request's
base_sequence there; Admin.describe_producers shows the producer id and last sequence the
leader holds. Skipped when `node` or clients/node/node_modules is missing.
"""

from __future__ import annotations

import pytest
from node_helpers import Row, bootstrap_fixture, node, node_script, skip_module_without_node

from samsa.client import Admin, Consumer, NewTopic

skip_module_without_node()

pytestmark = pytest.mark.timeout(120)
bootstrap = bootstrap_fixture("node-idempotence")


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
    # raised by 5 (a gap). The caller gets the error; the client bumps its producer epoch, so
    # the third call writes with the same producer id, the next epoch, from sequence 0.
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
          const { producerId, producerEpoch } = await client.producerIdentity();
          ids.push([producerId, producerEpoch]);
          outcomes.push(await client.produce(topic, 1, records).catch((error) => error.code));
        }
        return { ids, outcomes };
        """,
        calls,
    )
    first_id = int(outcome["ids"][0][0])
    assert outcome["ids"] == [[str(first_id), 0], [str(first_id), 0], [str(first_id), 1]]
    assert outcome["outcomes"] == [0, "ERROR_CODE_OUT_OF_ORDER_SEQUENCE_NUMBER", 2]
    assert read_partition(bootstrap, topic, 1) == rows_of(1, 0, calls[0]) + rows_of(1, 2, calls[2])
    assert producers_of(bootstrap, topic, 1) == [(first_id, 1, 1)]
