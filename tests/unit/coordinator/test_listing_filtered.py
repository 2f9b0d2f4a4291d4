"""Goal: the coordinator's listing cores show a caller what it may DESCRIBE, as Kafka does:
ListGroups the groups a predicate admits, ListTransactions the transactional ids, OffsetFetch for
all of a group's topics and DescribeGroupLag the topics; named topics are not filtered (the
interceptor decided them), and without a predicate everything is shown.

Method: the pure shards (GroupHarness's, test_transaction_shard's) with plain predicates, as the
servicers pass them from caller.listing_filter / caller.topics_visible.
"""

from __future__ import annotations

from group_harness import GroupHarness
from test_transaction_shard import Log, init

from samsa.services.coordinator.transaction_shard import TransactionShard
from samsa.v1 import coordinator_pb2 as c
from samsa.v1 import transactions_pb2 as x


def alice(name: str) -> bool:
    return name.startswith("a-")


def harness_with_groups(*group_ids: str) -> GroupHarness:
    h = GroupHarness({"a-t": 2, "b-t": 1})
    for group_id in group_ids:
        h.group_id = group_id
        h.commit("", -1, {("a-t", 0): 1, ("a-t", 1): 2, ("b-t", 0): 3})
    return h


def test_list_groups_shows_the_groups_the_predicate_admits() -> None:
    h = harness_with_groups("a-g1", "b-g", "a-g2")
    listed = h.coordinator.list_groups((), alice)
    assert [g.group_id for g in listed.groups] == ["a-g1", "a-g2"]
    assert [g.group_id for g in h.coordinator.list_groups().groups] == ["a-g1", "a-g2", "b-g"]
    empty = [c.CONSUMER_GROUP_STATE_EMPTY]
    assert [g.group_id for g in h.coordinator.list_groups(empty, alice).groups] == ["a-g1", "a-g2"]


def test_offset_fetch_of_every_topic_leaves_out_the_hidden_ones() -> None:
    h = harness_with_groups("g")
    every = h.coordinator.fetch_offsets(c.OffsetFetchRequest(group_id="g"), alice)
    assert [(t.name, [p.partition for p in t.partitions]) for t in every.topics] == [
        ("a-t", [0, 1])
    ]
    unfiltered = h.coordinator.fetch_offsets(c.OffsetFetchRequest(group_id="g"))
    assert [t.name for t in unfiltered.topics] == ["a-t", "b-t"]
    named = c.OffsetFetchRequest(group_id="g")
    named.topics.add(topic="b-t", partitions=[0])
    answer = h.coordinator.fetch_offsets(named, alice)
    assert [(t.name, t.partitions[0].committed_offset) for t in answer.topics] == [("b-t", 3)]


def test_group_lag_covers_the_visible_topics_only() -> None:
    h = harness_with_groups("g")
    assert h.coordinator.lag_inputs("g", alice) == [("a-t", 0, 1, ""), ("a-t", 1, 2, "")]
    assert [row[0] for row in h.coordinator.lag_inputs("g")] == ["a-t", "a-t", "b-t"]
    assert h.coordinator.lag_inputs("nope", alice) is None


def test_list_transactions_shows_the_ids_the_predicate_admits() -> None:
    shard = TransactionShard()
    log = Log(shard)
    for pid, name in enumerate(("a-tx1", "b-tx", "a-tx2"), start=1):
        log.durable(init(shard, name, pid))
    request = x.ListTransactionsRequest()
    listed = shard.list_transactions(request, 0, alice)
    assert [t.transactional_id for t in listed] == ["a-tx1", "a-tx2"]
    every = shard.list_transactions(request, 0)
    assert [t.transactional_id for t in every] == ["a-tx1", "a-tx2", "b-tx"]
