"""The client's view of the cluster: partitions, their leaders, and where brokers are.

Fetched with DescribeTopics from any server `bootstrap.servers` lists: brokers (as in Kafka) or
controllers, which both answer from their replica of the metadata log. Every page of it: a server
answers a bounded number of partitions at a time and says where to continue (`describe_topics`,
`merge_page`).
Refreshed when a request says our view is stale (NOT_LEADER_OR_FOLLOWER,
UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID, a broker that does not answer) and at least every
`metadata.max.age.ms`; a produce answer that names the new leader with a newer leader epoch
updates that one partition at once instead (KIP-951, `update_leader`). A refresh never takes a
partition back to an older leader epoch of the same topic id than the one known (KIP-320): the
server that answers it may lag behind the broker that named the new leader (a broker cut off from
the controllers answers from its last image), and would otherwise send the client back to the
old leader at each refresh; nor does one that merged its answer while another thread's
`update_leader` moved the leader (it merges again). Readers on other threads see whole dicts
swapped in, never a dict being filled. A refresh clears only the stale marks made before it
asked: a mark made while its DescribeTopics was in flight may report what the answer predates,
so it asks again (Kafka's Metadata keys its update requests by version the same way).

A refresh describes only the topics the client uses (metadata_topics.py), and the view it swaps in
holds those only: a consumer's assignment (`keep`), the topics a call asks for, while it works
with them (`transient`), and a producer's topics until unused for `metadata.max.idle.ms`
(`topic_idle_ms`; `use`) and while a batch of theirs is unfinished (`keep`). A topic deleted,
unassigned or no longer produced to is forgotten, not described at every refresh for the client's
whole life; used again, it is described again.

Each topic is answered on its own: one the ACLs refuse (TOPIC_AUTHORIZATION_FAILED) is left out
of the view and kept in `refused`, and the refresh raises its AuthorizationError only when the
topic was asked for or is kept (`refresh`), so a producer's other topics go on.

A bootstrap server that cannot answer at all fails the call with one line naming it and why
(`unreachable_reason`): at once when it is not a Samsa broker or controller (another gRPC service,
or not gRPC), else when the caller's timeout ends (nothing listening may mean not started yet).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import cast

import grpc

from samsa.client.channels import Channels
from samsa.client.errors import AuthorizationError, KafkaError, NoBrokersAvailable
from samsa.client.metadata_topics import MetadataTopics
from samsa.client.refusals import authorization_error, first_refusal, topic_refusals
from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.v1 import controller_pb2, controller_pb2_grpc

TopicPartition = tuple[str, int]

METADATA_MAX_AGE_MS = 300_000  # Kafka's metadata.max.age.ms

# Errors after which the leader a request went to is probably not the leader any more.
STALE_METADATA_ERRORS = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.UNKNOWN_TOPIC_ID,  # a topic deleted and created again: learn its new id
    }
)
# Errors whose answer may name the partition's new leader (KIP-951, `update_leader`).
NEW_LEADER_ERRORS = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH})
CALL_TIMEOUT_S = 5.0
# A request refused for what it is (invalid, or over a limit: README's "with a message saying
# what to change"): every server answers it the same, so it is not asked again.
REFUSED_AS_SENT = frozenset({grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED})


class ClusterMetadata:
    """Leaders by partition, partition counts by topic, endpoints by broker id."""

    def __init__(
        self, bootstrap_servers: Sequence[str], channels: Channels, topic_idle_ms: int = 0
    ) -> None:
        """`topic_idle_ms`: how long a topic no call asks for stays described after its last
        use (the producer's metadata.max.idle.ms; 0: until the next refresh)."""
        self.bootstrap = list(bootstrap_servers)
        self.channels = channels
        self.leaders: dict[TopicPartition, int] = {}
        self.leader_epochs: dict[TopicPartition, int] = {}
        self.partition_counts: dict[str, int] = {}
        # Each topic's id (KIP-516), sent with Produce and Fetch: a broker hosting another topic
        # of the same name (deleted and created again) refuses rather than serve or write it.
        self.topic_ids: dict[str, bytes] = {}
        self.endpoints: dict[int, str] = {}
        # The topics of the last refresh the ACLs refused (TOPIC_AUTHORIZATION_FAILED), by name.
        self.refused: dict[str, AuthorizationError] = {}
        self.metadata_offset = 0
        self._topics = MetadataTopics(topic_idle_ms)  # under _lock
        self._kept: Callable[[], Iterable[str]] = tuple  # the topics the client keeps
        self._next = 0
        self._lock = threading.Lock()
        self._offset_lock = threading.Lock()
        self._refreshed_at = 0.0
        # Stale marks are counted, and a refresh clears those counted before it asked: one made
        # while it was in flight stays (mark_stale, refresh). Both only ever raised.
        self._marks_lock = threading.Lock()
        # Held by update_leader and a refresh's swap; `_view_version` counts the changes to the
        # leaders, so a refresh merged against an older view merges again (refresh).
        self._view_lock = threading.Lock()
        self._view_version = 0
        self._stale_marks = 0
        self._stale_marks_cleared = 0
        self._closing = threading.Event()  # set: reads in progress give up at their next retry

    def stub(self, endpoint: str) -> controller_pb2_grpc.ControllerServiceStub:
        return controller_pb2_grpc.ControllerServiceStub(self.channels.get(endpoint))

    def read(self, method: str, request: object, timeout_s: float = CALL_TIMEOUT_S) -> object:
        """Call a read RPC on some bootstrap server, trying the next one when one is down.

        Raises NoBrokersAvailable, caused by the last gRPC error, when none answered within
        `timeout_s`, or as soon as every one has shown it is not a Samsa service."""
        deadline = time.monotonic() + timeout_s
        last: Exception | None = None
        not_samsa: dict[str, str] = {}  # endpoint -> why it can never answer
        while time.monotonic() < deadline and len(not_samsa) < len(self.bootstrap):
            if self._closing.is_set():
                raise NoBrokersAvailable(f"{method}: the client is closing")
            endpoint = self.bootstrap[self._next % len(self.bootstrap)]
            if endpoint in not_samsa:
                self._next += 1
                continue
            try:
                return getattr(self.stub(endpoint), method)(
                    request, timeout=max(0.1, min(CALL_TIMEOUT_S, deadline - time.monotonic()))
                )
            except grpc.RpcError as error:
                if error.code() in REFUSED_AS_SENT:
                    raise KafkaError(error.details() or "", ErrorCode.INVALID_REQUEST) from None
                if refused := authorization_error(error):  # so would every server
                    raise refused from None
                last = error
                self._next += 1
                reason, retriable = unreachable_reason(error)
                if not retriable:
                    not_samsa[endpoint] = reason
                    continue
                self._closing.wait(0.05)
        # One line: where, how long, why (not gRPC's debug string). The cause keeps the last
        # gRPC error for callers that explain it further (the CLI).
        reason, _ = unreachable_reason(last)
        within = "" if len(not_samsa) == len(self.bootstrap) else f" within {timeout_s:.3g} s"
        raise NoBrokersAvailable(
            f"no Samsa broker or controller answered {method} at {', '.join(self.bootstrap)}"
            f"{within}: {reason}"
        ) from last

    def describe_topics(
        self, names: Sequence[str], min_metadata_offset: int, timeout_s: float = CALL_TIMEOUT_S
    ) -> controller_pb2.DescribeTopicsResponse:
        """DescribeTopics for `names` (empty: every topic), every page read and merged into one.

        Controllers answer a bounded page at a time (KIP-966); callers want the whole answer.
        A request may name at most admin_request_items_max topics (more are refused), so more
        names are asked in several requests, one after the other. Each page is asked to be at
        least as current as the one before, so the merged answer never goes back in time; its
        status and broker endpoints are the last page's. Each page may take up to `timeout_s`.
        """
        names = list(names)
        step = limits.admin_request_items_max
        merged = controller_pb2.DescribeTopicsResponse()
        for start in range(0, max(1, len(names)), step):
            answer = self._describe_pages(
                names[start : start + step], min_metadata_offset, timeout_s
            )
            merged.topics.extend(answer.topics)
            merged.broker_endpoints.clear()
            merged.broker_endpoints.update(answer.broker_endpoints)
            merged.status.CopyFrom(answer.status)
            min_metadata_offset = max(min_metadata_offset, answer.status.metadata_offset)
        return merged

    def _describe_pages(
        self, names: Sequence[str], min_metadata_offset: int, timeout_s: float
    ) -> controller_pb2.DescribeTopicsResponse:
        """One DescribeTopics request's pages, merged (`describe_topics`)."""
        request = controller_pb2.DescribeTopicsRequest(
            names=names, min_metadata_offset=min_metadata_offset
        )
        merged = controller_pb2.DescribeTopicsResponse()
        while True:
            page = cast(
                controller_pb2.DescribeTopicsResponse,
                self.read("DescribeTopics", request, timeout_s),
            )
            asked = request.cursor if request.HasField("cursor") else None
            cursor = merge_page(merged, page, asked)
            if cursor is None:
                return merged
            request.cursor.CopyFrom(cursor)
            request.min_metadata_offset = max(
                request.min_metadata_offset, page.status.metadata_offset
            )

    def update_leader(
        self, topic_partition: TopicPartition, leader_id: int, leader_epoch: int
    ) -> bool:
        """A broker named the partition's new leader (KIP-951: `current_leader` with
        NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH). Taken when its epoch is newer than ours
        and we know where that broker is. True when the metadata now names that leader at that
        epoch (it changed now, or an earlier answer already moved it: every batch that was in
        flight to the old leader comes back naming the same one), so a retry can go to it at
        once, without waiting for a refresh. Whole dicts are swapped in, as refresh does."""
        if leader_id < 0 or leader_id not in self.endpoints:
            return False
        with self._view_lock:  # a refresh merging meanwhile merges again (refresh)
            known_epoch = self.leader_epochs.get(topic_partition, -1)
            if leader_epoch == known_epoch:
                return self.leaders.get(topic_partition) == leader_id
            if leader_epoch < known_epoch:
                return False
            leaders = dict(self.leaders)
            epochs = dict(self.leader_epochs)
            leaders[topic_partition] = leader_id
            epochs[topic_partition] = leader_epoch
            self.leaders, self.leader_epochs = leaders, epochs
            self._view_version += 1
            return True

    def advance(self, metadata_offset: int) -> None:
        """An answer came from `metadata_offset`: later reads ask for at least it. Only ever
        raised (under a lock: threads sharing the client answer in any order), so no read is
        answered from an older view than one already seen."""
        with self._offset_lock:
            self.metadata_offset = max(self.metadata_offset, metadata_offset)

    def stop_waiting(self) -> None:
        """The client is closing: a read retrying an unreachable cluster gives up now rather than
        hold close() for the rest of its timeout."""
        self._closing.set()

    def mark_stale(self) -> None:
        """The view is probably wrong (a request met a moved leader): refresh it. A refresh
        already in flight does not clear this mark, since its answer may predate what made it."""
        with self._marks_lock:
            self._stale_marks += 1

    def needs_refresh(self) -> bool:
        age_ms = (time.monotonic() - self._refreshed_at) * 1000
        return self._stale_marks != self._stale_marks_cleared or age_ms > METADATA_MAX_AGE_MS

    def keep(self, topics: Callable[[], Iterable[str]]) -> None:
        """Describe at every refresh the topics `topics()` names then (a consumer's assignment).
        Called outside any lock of ours: it may take the caller's."""
        self._kept = topics

    def use(self, topics: Iterable[str], now_ms: int) -> None:
        """These topics were used at `now_ms` (time.monotonic_ns() // 10**6): they stay
        described for `topic_idle_ms` more. The producer calls it per drain, not per record."""
        with self._lock:
            self._topics.use(topics, now_ms)

    @contextlib.contextmanager
    def transient(self, topics: Iterable[str]) -> Iterator[None]:
        """Within: every refresh describes `topics` too, so that a refresh on another thread
        does not drop them between a call's refresh and its reads of the view."""
        held = list(topics)
        with self._lock:
            self._topics.hold(held)
        try:
            yield
        finally:
            with self._lock:
                self._topics.release(held)

    def refresh(self, topics: Iterable[str] = (), timeout_s: float = CALL_TIMEOUT_S) -> None:
        """Describe the topics we use (plus `topics`) and swap the new view in: a view of
        those topics only (the others are forgotten, module doc). Then raise the
        AuthorizationError of the first of `topics` and of the kept ones (a consumer's
        assignment) the ACLs refused (`refused`): asked again, it would be refused again."""
        marks = self._stale_marks  # the marks this refresh answers; later ones stay
        topics, kept = list(topics), list(self._kept())
        with self._lock:
            names = self._topics.to_describe(topics, kept, time.monotonic_ns() // 1_000_000)
        described = set(names)
        if not names:  # nothing in use: an empty view, and nothing to ask
            with self._view_lock:
                self._swap(self.endpoints, {}, {}, {}, {}, marks)
            return
        answer = self.describe_topics(names, self.metadata_offset, timeout_s)
        while True:
            # Merged against the view as it is, and swapped in only if no update_leader (or
            # other refresh) changed it meanwhile: one on another thread between this merge's
            # reads and its swap would be lost, the old leader put back at the new epoch's
            # place (KIP-320). Merged again on top of such a change.
            version = self._view_version
            leaders, epochs, counts, topic_ids = self._merged(answer, described)
            with self._view_lock:
                if version == self._view_version:
                    self._swap(
                        dict(answer.broker_endpoints), leaders, epochs, counts, topic_ids, marks
                    )
                    break
        self.refused = topic_refusals(answer.topics)
        self.advance(answer.status.metadata_offset)
        if refused := first_refusal(self.refused, [*topics, *kept]):
            raise refused

    def _merged(
        self, answer: controller_pb2.DescribeTopicsResponse, described: set[str]
    ) -> tuple[
        dict[TopicPartition, int], dict[TopicPartition, int], dict[str, int], dict[str, bytes]
    ]:
        """The view after `answer`, of the `described` topics only: leaders, leader epochs,
        partition counts and topic ids."""
        answered = {topic.name for topic in answer.topics}
        # Only the topics described; an answered topic's partitions come from the answer alone.
        leaders = {
            k: v for k, v in self.leaders.items() if k[0] in described and k[0] not in answered
        }
        epochs = {k: v for k, v in self.leader_epochs.items() if k[0] in described}
        counts = {k: v for k, v in self.partition_counts.items() if k in described}
        topic_ids = {k: v for k, v in self.topic_ids.items() if k in described}
        for topic in answer.topics:
            if topic.error_code != ErrorCode.NONE:
                counts.pop(topic.name, None)
                topic_ids.pop(topic.name, None)
                continue
            same_topic = self.topic_ids.get(topic.name) == topic.topic_id
            counts[topic.name] = len(topic.partitions)
            topic_ids[topic.name] = topic.topic_id
            for partition in topic.partitions:
                key = (topic.name, partition.partition)
                if same_topic and partition.leader_epoch < self.leader_epochs.get(key, -1):
                    # KIP-320: a server behind what we know (a produce or fetch answer named the
                    # new leader, KIP-951) must not put the old leader back.
                    if key in self.leaders:
                        leaders[key] = self.leaders[key]
                    continue
                if partition.leader >= 0:
                    leaders[key] = partition.leader
                epochs[key] = partition.leader_epoch
        return leaders, epochs, counts, topic_ids

    def _swap(
        self,
        endpoints: dict[int, str],
        leaders: dict[TopicPartition, int],
        epochs: dict[TopicPartition, int],
        counts: dict[str, int],
        topic_ids: dict[str, bytes],
        marks: int,
    ) -> None:
        """A refresh's new view, swapped in whole dict by whole dict (under `_view_lock`); it
        answers the stale marks counted up to `marks` (those made before it asked), not any made
        since."""
        self._view_version += 1
        self.endpoints = endpoints
        self.leaders, self.leader_epochs, self.partition_counts = leaders, epochs, counts
        self.topic_ids = topic_ids
        self._refreshed_at = time.monotonic()
        with self._marks_lock:
            self._stale_marks_cleared = max(self._stale_marks_cleared, marks)

    def partition_count(self, topic: str, timeout_s: float) -> int:
        """Partitions of `topic`, fetching metadata (up to `timeout_s`) when unknown."""
        count = self.partition_counts.get(topic)
        if count is not None:
            return count
        deadline = time.monotonic() + timeout_s
        while True:
            self.refresh([topic], max(0.1, deadline - time.monotonic()))
            count = self.partition_counts.get(topic)
            if count is not None:
                return count
            left = deadline - time.monotonic()
            if left <= 0:
                raise KafkaError(
                    f"topic {topic!r} is not in the cluster's metadata (create it first)",
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                )
            time.sleep(min(0.1, left))  # never past the caller's max.block.ms


def merge_page(
    merged: controller_pb2.DescribeTopicsResponse,
    page: controller_pb2.DescribeTopicsResponse,
    asked: controller_pb2.DescribeTopicsRequest.Cursor | None,
) -> controller_pb2.DescribeTopicsRequest.Cursor | None:
    """Fold one DescribeTopics page, asked from cursor `asked`, into `merged`; return the cursor
    to ask from next, or None when the answer is complete.

    A topic split across pages is continued by the next page's first topic. Pages may come from
    different metadata offsets, so that continuation may disagree with what came before: an
    error (the topic was deleted) replaces the partitions gathered so far, and another topic id
    (deleted and recreated) drops them and asks for the topic again from partition 0.
    """
    topics = list(page.topics)
    continuing = asked is not None and asked.partition > 0 and len(merged.topics) > 0
    continued = merged.topics[-1] if continuing else None
    if continued is not None and topics and topics[0].name == continued.name:
        first, topics = topics[0], topics[1:]
        if first.error_code == ErrorCode.NONE and first.topic_id != continued.topic_id:
            del merged.topics[-1]
            return controller_pb2.DescribeTopicsRequest.Cursor(topic=first.name, partition=0)
        if first.error_code != ErrorCode.NONE:
            continued.CopyFrom(first)
        else:
            continued.partitions.extend(first.partitions)
    merged.topics.extend(topics)
    merged.broker_endpoints.clear()
    merged.broker_endpoints.update(page.broker_endpoints)
    merged.status.CopyFrom(page.status)
    return page.next_cursor if page.HasField("next_cursor") else None


def unreachable_reason(error: Exception | None) -> tuple[str, bool]:
    """Why a server did not answer, in words, and whether asking it again may help.

    Not retriable: the port speaks gRPC but serves no Samsa metadata (UNIMPLEMENTED), or does
    not speak gRPC at all (gRPC reports it as UNAVAILABLE, "Failed parsing HTTP/2"). Retriable:
    nothing listens (a server may be starting), no answer in time, a name not resolved yet, and
    anything else.
    """
    if not isinstance(error, (grpc.Call, grpc.aio.AioRpcError)):  # aio's is not a grpc.Call
        return (str(error) if error is not None else "no attempt was made"), True
    code, details = error.code(), error.details() or ""
    lowered = details.lower()
    if code == grpc.StatusCode.UNIMPLEMENTED:
        return "a gRPC service other than Samsa answers there", False
    if "failed parsing http/2" in lowered or "http1" in lowered:
        return "what answers there does not speak gRPC", False
    if "connection refused" in lowered:
        return "connection refused", True
    if code == grpc.StatusCode.DEADLINE_EXCEEDED or "timeout" in lowered:
        return "no answer in time", True
    if any(word in lowered for word in ("dns", "resolv", "lookup", "not known")):
        return "unknown host", True
    return details.split(";")[0] or code.name, True
