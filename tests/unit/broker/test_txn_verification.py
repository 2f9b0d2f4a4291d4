"""Goal: the broker finds the transactional partitions of a Produce from batch headers alone
(non-transactional and unreadable ones are not its business), and turns the coordinator's
verify_only answer into one verdict per partition: confirmed, refused with the coordinator's
error and words, or refused because the coordinator did not mention it. A partition named twice
in one Produce is refused whole, and gets one identity for both of its entries.

Method: hand-built requests (real batches from the codec) and hand-built answers; no gRPC.
"""

from __future__ import annotations

import grpc

from samsa.common.errors import ErrorCode
from samsa.common.record.codec import build_batch
from samsa.services.broker.requests.request_checks import produce_refusal
from samsa.services.broker.requests.txn_verification import MIXED, transactional_partitions
from samsa.services.runtime.txn_added_check import verdicts_of
from samsa.v1 import broker_pb2
from samsa.v1 import transactions_pb2 as x


def request_with(batches: dict[tuple[str, int], bytes]) -> broker_pb2.ProduceRequest:
    request = broker_pb2.ProduceRequest(transactional_id="tx")
    by_topic: dict[str, broker_pb2.ProduceRequest.TopicData] = {}
    for (topic, partition), records in batches.items():
        if topic not in by_topic:
            by_topic[topic] = request.topics.add(name=topic)
        by_topic[topic].partitions.add(partition=partition, records=records)
    return request


def test_only_transactional_batches_are_found_with_their_identity() -> None:
    txn = build_batch([b"v"], producer_id=7, producer_epoch=3, base_sequence=0, transactional=True)
    plain = build_batch([b"v"], producer_id=8, producer_epoch=0, base_sequence=0)
    request = request_with({("a", 0): txn, ("a", 1): plain, ("b", 2): b"\x00\x01", ("b", 3): txn})
    assert transactional_partitions(request) == {("a", 0): (7, 3), ("b", 3): (7, 3)}


def test_a_partition_named_twice_gets_one_identity_for_both_entries() -> None:
    # The second entry's identity replaced the first's: producer 5's open transaction verified
    # the partition, and producer 999's transactional batch in the first entry was appended
    # with it, opening a transaction no coordinator knew (and no marker would end).
    request = broker_pb2.ProduceRequest(transactional_id="tx")
    topic = request.topics.add(name="a")
    for producer_id, epoch in ((999, 0), (5, 2)):
        batch = build_batch(
            [b"v"], producer_id=producer_id, producer_epoch=epoch, transactional=True
        )
        topic.partitions.add(partition=0, records=batch)
    assert transactional_partitions(request) == {("a", 0): MIXED}
    assert produce_refusal(request) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "a-0 is named twice: name each partition once (several batches of one partition go "
        "concatenated in its `records`)",
    )


def test_verdicts_follow_the_answer() -> None:
    asked = [("a", 0), ("a", 1), ("b", 0)]
    answer = x.AddPartitionsToTxnResponse(
        results=[
            x.TxnPartitionResult(topic="a", partition=0),
            x.TxnPartitionResult(
                topic="a",
                partition=1,
                error_code=ErrorCode.INVALID_TXN_STATE,  # type: ignore[arg-type]
                error_message="a-1 was not added",
            ),
        ]
    )
    verdicts = verdicts_of(asked, answer)
    assert verdicts[("a", 0)] is None
    assert verdicts[("a", 1)] == (
        ErrorCode.INVALID_TXN_STATE,
        "the transaction coordinator: a-1 was not added",
    )
    code, message = verdicts[("b", 0)]  # type: ignore[misc]
    assert code == ErrorCode.INVALID_TXN_STATE and "did not confirm" in message


def test_a_whole_request_error_refuses_every_partition() -> None:
    answer = x.AddPartitionsToTxnResponse(
        error_code=ErrorCode.CONCURRENT_TRANSACTIONS,  # type: ignore[arg-type]
        error_message="busy",
    )
    verdicts = verdicts_of([("a", 0), ("a", 1)], answer)
    assert set(verdicts.values()) == {
        (ErrorCode.CONCURRENT_TRANSACTIONS, "the transaction coordinator: busy")
    }


def test_a_check_of_more_partitions_than_a_request_may_name_goes_in_several() -> None:
    # Goal: a transaction's first produce to more partitions of one broker than a coordinator
    # takes in one AddPartitionsToTxn (admin_request_items_max, refused whole with
    # RESOURCE_EXHAUSTED, which ends the broker's stream) is checked, and added, in several
    # requests, each within the limit, and every partition gets its verdict.
    # Method: the coordinator's stream replaced by a fake that records each request's
    # partitions and confirms them all.
    import asyncio

    from samsa.common import limits
    from samsa.services.runtime.txn_added_check import TransactionMembershipCheck

    sizes: list[int] = []

    class Check(TransactionMembershipCheck):
        async def _ask_once(self, transactional_id, request, asked, deadline):
            named = [(e.topic, p) for e in request.partitions for p in e.partitions]
            assert request.verify_only is False and sorted(named) == sorted(asked)
            sizes.append(len(named))
            return verdicts_of(
                asked,
                x.AddPartitionsToTxnResponse(
                    results=[x.TxnPartitionResult(topic=t, partition=p) for t, p in named]
                ),
            )

    wanted = [(f"t{n % 3}", n) for n in range(2 * limits.admin_request_items_max + 5)]
    check = Check(lambda: None)  # type: ignore[arg-type,return-value]
    verdicts = asyncio.run(check.ask("tx", 7, 3, wanted, add=True))
    assert verdicts == dict.fromkeys(wanted)
    assert max(sizes) <= limits.admin_request_items_max and sum(sizes) == len(wanted)
