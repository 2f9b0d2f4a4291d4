"""Goal: the SDK's consumer-group administration turns coordinator answers into the right
dataclasses and errors, and finds a group's coordinator again after a coordinator error — within
request.timeout.ms, never forever. (Offset reset plans: test_group_reset_plans.py.)

Method: the pure functions of samsa.client.group_admin on protobuf answers built by hand; the
retry loop behind Admin (GroupAdminCalls) with its two I/O seams (CoordinatorCalls.lookup,
GroupAdminCalls._group_stub) replaced by fakes that answer from scripts, with the backoff set to 0
(no ports, no sleeps); and an `ast` check that group_admin.py stays pure.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from samsa.client import coordinator_calls
from samsa.client.admin import Admin
from samsa.client.errors import KafkaError
from samsa.client.group_admin import (
    ConsumerGroupListing,
    GroupError,
    OffsetAndMetadata,
    commit_error_of,
    coordinator_retriable,
    description_of,
    first_commit_error_of,
    group_state_filter,
    lag_of,
    listings_of,
    offset_commit_request,
    offset_fetch_request,
    offsets_of,
)
from samsa.common import limits
from samsa.common.errors import ErrorCode, InvalidConfigError
from samsa.v1 import coordinator_pb2 as c

SDK = Path(__file__).resolve().parents[3] / "clients" / "python" / "samsa_client"


# --- pure functions ------------------------------------------------------------------------------


def test_group_admin_is_pure() -> None:
    tree = ast.parse((SDK / "group_admin.py").read_text())
    roots = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        node.module.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module
    }
    assert roots & {"grpc", "time", "threading", "asyncio", "socket", "os", "random"} == set()


def test_listings_merge_every_coordinator_once_sorted() -> None:
    first = c.ListGroupsResponse(
        groups=[
            c.ListedGroup(group_id="b", state=c.CONSUMER_GROUP_STATE_STABLE, member_count=2),
            c.ListedGroup(group_id="moving", state=c.CONSUMER_GROUP_STATE_EMPTY),
        ]
    )
    second = c.ListGroupsResponse(
        groups=[
            c.ListedGroup(group_id="a", state=c.CONSUMER_GROUP_STATE_RECONCILING, member_count=1),
            c.ListedGroup(group_id="moving", state=c.CONSUMER_GROUP_STATE_STABLE, member_count=1),
        ]
    )
    assert listings_of([first, second]) == [
        ConsumerGroupListing("a", "Reconciling", 1),
        ConsumerGroupListing("b", "Stable", 2),
        ConsumerGroupListing("moving", "Empty", 0),
    ]
    assert listings_of([]) == []


def test_description_sorts_partitions_and_raises_the_servers_error() -> None:
    member = c.DescribedMember(
        member_id="m1",
        group_instance_id="i1",
        client_id="cli",
        member_epoch=4,
        assignment=[c.TopicPartitions(topic="t", partitions=[2, 0])],
        target_assignment=[
            c.TopicPartitions(topic="u", partitions=[1]),
            c.TopicPartitions(topic="t", partitions=[0]),
        ],
    )
    group = c.DescribedGroup(
        group_id="g",
        state=c.CONSUMER_GROUP_STATE_RECONCILING,
        group_epoch=5,
        assignment_epoch=4,
        assignor_name="uniform",
        members=[member],
    )
    described = description_of(group)
    assert (described.state, described.group_epoch, described.assignment_epoch) == (
        "Reconciling",
        5,
        4,
    )
    assert described.assignor == "uniform"
    (only,) = described.members
    assert (only.member_id, only.group_instance_id, only.client_id, only.member_epoch) == (
        "m1",
        "i1",
        "cli",
        4,
    )
    assert only.assignment == (("t", 0), ("t", 2))
    assert only.target_assignment == (("t", 0), ("u", 1))

    missing = c.DescribedGroup(
        group_id="nope",
        error_code=ErrorCode.GROUP_ID_NOT_FOUND,  # type: ignore[arg-type]
        error_message="group 'nope' does not exist",
    )
    with pytest.raises(GroupError, match="does not exist") as raised:
        description_of(missing)
    assert raised.value.code == ErrorCode.GROUP_ID_NOT_FOUND


def test_offsets_leave_out_partitions_without_a_commit() -> None:
    answer = c.OffsetFetchResponse(
        topics=[
            c.OffsetFetchTopic(
                name="t",
                partitions=[
                    c.OffsetFetchPartition(
                        partition=0, committed_offset=7, committed_leader_epoch=2, metadata="m"
                    ),
                    c.OffsetFetchPartition(
                        partition=1, committed_offset=-1, committed_leader_epoch=-1
                    ),
                ],
            )
        ]
    )
    assert offsets_of(answer) == {("t", 0): OffsetAndMetadata(7, 2, "m")}
    failed = c.OffsetFetchResponse(
        error_code=ErrorCode.INVALID_GROUP_ID,  # type: ignore[arg-type]
        error_message="bad id",
    )
    with pytest.raises(GroupError, match="bad id"):
        offsets_of(failed)


def test_offset_fetch_request_groups_partitions_by_topic() -> None:
    request = offset_fetch_request("g", [("t", 1), ("u", 0), ("t", 0), ("t", 1)])
    assert [(t.topic, list(t.partitions)) for t in request.topics] == [("t", [0, 1]), ("u", [0])]
    assert list(offset_fetch_request("g", None).topics) == []


def test_offset_commit_request_is_from_outside_the_group() -> None:
    request = offset_commit_request("g", {("t", 1): 5, ("t", 0): OffsetAndMetadata(3, 1, "x")})
    assert (request.group_id, request.member_id, request.member_epoch) == ("g", "", -1)
    (topic,) = request.topics
    rows = [
        (p.partition, p.committed_offset, p.committed_leader_epoch, p.metadata)
        for p in topic.partitions
    ]
    assert rows == [(0, 3, 1, "x"), (1, 5, -1, "")]


def _commit_answer(*codes: ErrorCode) -> c.OffsetCommitResponse:
    answer = c.OffsetCommitResponse()
    topic = answer.topics.add(name="t")
    for partition, code in enumerate(codes):
        topic.partitions.add(partition=partition, error_code=code, error_message=f"why {code.name}")
    return answer


def test_commit_errors_say_to_stop_the_consumers_when_the_group_has_members() -> None:
    assert commit_error_of("g", _commit_answer(ErrorCode.NONE, ErrorCode.NONE)) is None
    refused = commit_error_of("g", _commit_answer(ErrorCode.UNKNOWN_MEMBER_ID))
    assert refused is not None and "stop the group's consumers first" in str(refused)
    assert refused.code == ErrorCode.UNKNOWN_MEMBER_ID
    unknown = commit_error_of(
        "g", _commit_answer(ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    )
    assert unknown is not None and str(unknown).startswith("t-1: ")
    assert first_commit_error_of(_commit_answer(ErrorCode.NONE, ErrorCode.NOT_COORDINATOR))[0] == (
        ErrorCode.NOT_COORDINATOR
    )
    assert first_commit_error_of(_commit_answer(ErrorCode.NONE))[0] == ErrorCode.NONE


def test_a_commit_too_large_raises_a_non_retriable_error_naming_its_partition() -> None:
    """A consumer's commit() raises KafkaError.of(first_commit_error_of(...)) for a final
    refusal: INVALID_COMMIT_OFFSET_SIZE (records too large for __consumer_offsets) and
    OFFSET_METADATA_TOO_LARGE are not retried and say which partition."""
    for code in (ErrorCode.INVALID_COMMIT_OFFSET_SIZE, ErrorCode.OFFSET_METADATA_TOO_LARGE):
        error = KafkaError.of(*first_commit_error_of(_commit_answer(ErrorCode.NONE, code)))
        assert error.code == code and not error.retriable
        assert str(error).startswith(f"t-1: why {code.name}")


def test_lag_rows_and_whole_group_errors() -> None:
    answer = c.DescribeGroupLagResponse(
        partitions=[
            c.PartitionLag(
                topic="t", partition=0, committed_offset=5, log_end_offset=20, lag=15, member_id="m"
            ),
            c.PartitionLag(
                topic="t",
                partition=1,
                committed_offset=-1,
                log_end_offset=-1,
                lag=-1,
                error_code=ErrorCode.LEADER_NOT_AVAILABLE,  # type: ignore[arg-type]
            ),
        ]
    )
    rows = lag_of(answer)
    assert [(r.partition, r.lag, r.member_id, r.error_code) for r in rows] == [
        (0, 15, "m", ErrorCode.NONE),
        (1, -1, "", ErrorCode.LEADER_NOT_AVAILABLE),
    ]
    with pytest.raises(GroupError):
        lag_of(c.DescribeGroupLagResponse(error_code=ErrorCode.GROUP_ID_NOT_FOUND))  # type: ignore[arg-type]


def test_only_coordinator_errors_send_the_request_to_a_coordinator_found_anew() -> None:
    assert coordinator_retriable(ErrorCode.NOT_COORDINATOR)
    assert coordinator_retriable(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    assert coordinator_retriable(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    assert not coordinator_retriable(ErrorCode.NON_EMPTY_GROUP)
    assert not coordinator_retriable(ErrorCode.NONE)


# --- Admin's coordinator lookup and retries ------------------------------------------------------


class FakeGroupStub:
    """A coordinator answering DescribeGroups/DeleteGroups/OffsetCommit from scripted codes."""

    def __init__(self, name: str, script: dict[str, list[ErrorCode]], calls: list[str]) -> None:
        self.name, self.script, self.calls = name, script, calls

    def _code(self, group_id: str) -> ErrorCode:
        codes = self.script[group_id]
        return codes.pop(0) if len(codes) > 1 else codes[0]

    def DescribeGroups(self, request: c.DescribeGroupsRequest, timeout: float) -> Any:
        self.calls.append(f"{self.name}:describe:{','.join(request.group_ids)}")
        return c.DescribeGroupsResponse(
            groups=[
                c.DescribedGroup(
                    group_id=g,
                    error_code=self._code(g),  # type: ignore[arg-type]
                    error_message=f"{self._code(g).name} from {self.name}",
                    state=c.CONSUMER_GROUP_STATE_EMPTY,
                )
                for g in request.group_ids
            ]
        )

    def OffsetCommit(self, request: c.OffsetCommitRequest, timeout: float) -> Any:
        self.calls.append(f"{self.name}:commit:{request.group_id}")
        code = self._code(request.group_id)
        answer = c.OffsetCommitResponse()
        topic = answer.topics.add(name="t")
        topic.partitions.add(partition=0, error_code=code, error_message=f"{code.name}")  # type: ignore[arg-type]
        return answer


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> Admin:
    return _admin(monkeypatch, request_timeout_ms=2000)


def _admin(monkeypatch: pytest.MonkeyPatch, request_timeout_ms: int) -> Admin:
    monkeypatch.setattr(coordinator_calls, "RETRY_BACKOFF_S", 0.0)
    return Admin({"bootstrap.servers": "127.0.0.1:1", "request.timeout.ms": request_timeout_ms})


def _wire(
    monkeypatch: pytest.MonkeyPatch,
    admin: Admin,
    owners: list[dict[str, str]],
    stubs: dict[str, FakeGroupStub],
) -> list[list[str]]:
    """Lookups answer from `owners` in turn (the last one repeats); returns the keys asked."""
    asked: list[list[str]] = []

    def lookup(request: c.FindCoordinatorRequest, deadline: float) -> Any:
        asked.append(list(request.keys))
        owner = owners.pop(0) if len(owners) > 1 else owners[0]
        answer = c.FindCoordinatorResponse()
        for key in request.keys:
            if key in owner:
                answer.coordinators.add(key=key, endpoint=owner[key], coordinator_id=1)
            else:
                answer.coordinators.add(
                    key=key,
                    error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,  # type: ignore[arg-type]
                    error_message="no coordinator owns it yet",
                )
        return answer, None

    groups = admin._groups  # the consumer-group calls Admin hands its group methods to
    monkeypatch.setattr(groups._calls, "lookup", lookup)
    monkeypatch.setattr(groups, "_group_stub", lambda endpoint: stubs[endpoint])
    return asked


def test_a_moved_group_is_found_again_and_answered_in_request_order(
    monkeypatch: pytest.MonkeyPatch, admin: Admin
) -> None:
    calls: list[str] = []
    stubs = {
        "a": FakeGroupStub("a", {"g1": [ErrorCode.NOT_COORDINATOR], "g2": [ErrorCode.NONE]}, calls),
        "b": FakeGroupStub("b", {"g1": [ErrorCode.NONE]}, calls),
    }
    asked = _wire(monkeypatch, admin, [{"g1": "a", "g2": "a"}, {"g1": "b"}], stubs)
    described = admin.describe_consumer_groups(["g1", "g2"])
    assert list(described) == ["g1", "g2"]
    assert asked == [["g1", "g2"], ["g1"]]  # g2's coordinator is remembered
    assert calls == ["a:describe:g1,g2", "b:describe:g1"]


def test_a_group_being_loaded_is_retried_and_not_found_is_raised_at_once(
    monkeypatch: pytest.MonkeyPatch, admin: Admin
) -> None:
    calls: list[str] = []
    script = {
        "loading": [ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NONE],
        "nope": [ErrorCode.GROUP_ID_NOT_FOUND],
    }
    _wire(
        monkeypatch,
        admin,
        [{"loading": "a", "nope": "a"}],
        {"a": FakeGroupStub("a", script, calls)},
    )
    assert admin.describe_consumer_groups(["loading"])["loading"].state == "Empty"
    with pytest.raises(GroupError) as raised:
        admin.describe_consumer_groups(["nope"])
    assert raised.value.code == ErrorCode.GROUP_ID_NOT_FOUND
    assert calls == ["a:describe:loading", "a:describe:loading", "a:describe:nope"]


def test_no_coordinator_gives_up_after_request_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    admin = _admin(monkeypatch, request_timeout_ms=50)
    _wire(monkeypatch, admin, [{}], {})
    with pytest.raises(GroupError, match="no coordinator owns it yet") as raised:
        admin.describe_consumer_groups(["g"])
    assert raised.value.code == ErrorCode.COORDINATOR_NOT_AVAILABLE


def test_an_admin_commit_to_a_group_with_members_says_to_stop_them(
    monkeypatch: pytest.MonkeyPatch, admin: Admin
) -> None:
    calls: list[str] = []
    script = {"busy": [ErrorCode.NOT_COORDINATOR, ErrorCode.UNKNOWN_MEMBER_ID]}
    _wire(monkeypatch, admin, [{"busy": "a"}], {"a": FakeGroupStub("a", script, calls)})
    with pytest.raises(GroupError, match="stop the group's consumers first"):
        admin.alter_consumer_group_offsets("busy", {("t", 0): 3})
    assert calls == ["a:commit:busy", "a:commit:busy"]


def test_request_timeout_must_be_a_positive_integer() -> None:
    for bad in (0, "soon", -5, True):
        with pytest.raises(InvalidConfigError, match=r"request\.timeout\.ms"):
            Admin({"bootstrap.servers": "127.0.0.1:1", "request.timeout.ms": bad})


def test_state_names_become_the_list_filter_and_unknown_ones_are_refused() -> None:
    assert group_state_filter(iter(["stable", "Empty"])) == [
        c.CONSUMER_GROUP_STATE_STABLE,
        c.CONSUMER_GROUP_STATE_EMPTY,
    ]
    assert group_state_filter([]) == []  # no filter: every group
    with pytest.raises(ValueError, match="no group state 'PreparingRebalance': the states are"):
        group_state_filter(["Stable", "PreparingRebalance"])


def test_more_groups_than_one_request_may_name_go_in_several(
    monkeypatch: pytest.MonkeyPatch, admin: Admin
) -> None:
    """Bootstrap servers refuse FindCoordinator, and coordinators DescribeGroups and
    DeleteGroups, naming more than admin_request_items_max keys (RESOURCE_EXHAUSTED, which the
    lookup took for an unreachable server and retried until request.timeout.ms); Kafka's admin
    describes or deletes any number of groups."""
    many = limits.admin_request_items_max + 1
    ids = [f"g{n:05}" for n in range(many)]
    calls: list[str] = []
    stubs = {"a": FakeGroupStub("a", {key: [ErrorCode.NONE] for key in ids}, calls)}
    asked = _wire(monkeypatch, admin, [dict.fromkeys(ids, "a")], stubs)
    described = admin.describe_consumer_groups(ids)
    assert list(described) == ids
    assert sorted(len(keys) for keys in asked) == [1, limits.admin_request_items_max]
    sizes = sorted(len(call.split(":")[2].split(",")) for call in calls)
    assert sizes == [1, limits.admin_request_items_max]


def test_committed_offsets_of_no_partitions_are_none_not_every_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """OffsetFetch without topics asks for every committed offset of the group; only None means
    that (Kafka's listConsumerGroupOffsets: null for all, an empty list for none), so a caller's
    filtered list that came out empty must not get the whole group's offsets."""
    admin = _admin(monkeypatch, request_timeout_ms=50)
    asked = _wire(monkeypatch, admin, [{}], {})
    assert admin.list_consumer_group_offsets("g", []) == {}
    assert admin.list_consumer_group_offsets("g", iter(())) == {}
    assert asked == []


class ForgetsWhileAsked(dict):
    """The remembered coordinators of an Admin another thread shares: that thread forgets a
    group's coordinator (after NOT_COORDINATOR) right after this one saw it was known."""

    def __contains__(self, key: object) -> bool:
        known = super().__contains__(key)
        self.pop(key, None)
        return known


def test_a_coordinator_forgotten_by_another_thread_is_found_again(
    monkeypatch: pytest.MonkeyPatch, admin: Admin
) -> None:
    calls: list[str] = []
    stubs = {"a": FakeGroupStub("a", {"g": [ErrorCode.NONE]}, calls)}
    _wire(monkeypatch, admin, [{"g": "a"}], stubs)
    monkeypatch.setattr(admin._groups, "_group_coordinators", ForgetsWhileAsked(g="a"))
    assert list(admin.describe_consumer_groups(["g"])) == ["g"]
