"""The consumer's offset resets and their lookups: how a partition without a position gets one.

Theory of operation. A partition the fetch state (fetch_state.py) has no position for has a
*reset* pending instead: EARLIEST or LATEST, resolved with ListOffsets; COMMITTED, resolved with
OffsetFetch at the group's coordinator; or NO_RESET (auto.offset.reset=none), which only an
explicit seek resolves. With a `group.id`, a newly assigned partition starts at the group's
committed offset: its reset is COMMITTED, which the driver resolves with OffsetFetch at the
coordinator rather than ListOffsets; a partition without one falls back to `auto.offset.reset`
(`on_committed_missing`). A reset set by the application (assign, seek_to_beginning/end) is *due*
only once `request_resets()` is called, from `poll()` or `position()` (Kafka evaluates them
lazily); one set by a fetch answer (out of range, or a truncation with no end offset:
fetch_answers.py) is due at once. Every reset and lookup carries a token, so an answer for a
reset that was replaced since is ignored.

Outputs: `offsets_to_look_up()`, the due resets to resolve with ListOffsets (EARLIEST or LATEST)
or OffsetFetch (COMMITTED), now in flight; and `pop_lookup_error()`, the error of a lookup that
gave up, which the next `poll()` or `position()` raises. The driver answers with
`on_offsets_found`, `on_committed_missing` or `on_lookup_failed`. A found offset becomes the
partition's position and fetch offset. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping

from samsa.client.config import ConsumerConfig
from samsa.client.fetch_partitions import Partition, TopicPartition
from samsa.common.errors import OffsetOutOfRangeError
from samsa.v1 import broker_pb2

EARLIEST = broker_pb2.OFFSET_SPEC_EARLIEST
LATEST = broker_pb2.OFFSET_SPEC_LATEST
NO_RESET = -1  # auto.offset.reset=none: a partition without a position is an error
COMMITTED = -2  # the group's committed offset (OffsetFetch), else auto.offset.reset


class _Reset:
    __slots__ = ("due", "in_flight", "spec", "token")

    def __init__(self, spec: int, token: int, due: bool) -> None:
        self.spec = spec  # EARLIEST, LATEST, COMMITTED or NO_RESET
        self.token = token
        self.due = due  # may be looked up now
        self.in_flight = False


class OffsetResets:
    """The pending resets of one consumer's partitions, and their lookups (see the module doc).

    The fetch state owns `partitions` and shares it: a found offset is written there."""

    def __init__(self, config: ConsumerConfig, partitions: dict[TopicPartition, Partition]) -> None:
        self._config = config
        self._partitions = partitions
        self._resets: dict[TopicPartition, _Reset] = {}
        self._next_token = 1
        self.lookup_error: Exception | None = None  # raised by the next poll or position

    def default_reset(self) -> int:
        policy = self._config.auto_offset_reset
        if policy == "earliest":
            return EARLIEST
        if policy == "latest":
            return LATEST
        return NO_RESET

    def set_reset(self, tp: TopicPartition, spec: int, *, due: bool) -> None:
        self._resets[tp] = _Reset(spec, self._next_token, due)
        self._next_token += 1

    def cancel(self, tp: TopicPartition) -> None:
        """`tp` has a position again (seek) or is no longer assigned: forget its reset."""
        self._resets.pop(tp, None)

    def request_resets(self) -> bool:
        """poll() or position() needs positions: every pending reset is due now. Raises when a
        partition has none to reset to (auto.offset.reset=none). True: lookups became due."""
        undefined = [tp for tp, reset in self._resets.items() if reset.spec == NO_RESET]
        if undefined:
            committed = " and no committed offset" if self._config.group_id is not None else ""
            raise OffsetOutOfRangeError(
                f"no position for {undefined}{committed} and auto.offset.reset=none: seek() first"
            )
        newly_due = False
        for reset in self._resets.values():
            newly_due = newly_due or not reset.due
            reset.due = True
        return newly_due

    def lookups_due(self) -> bool:
        return any(_lookup_due(reset) for reset in self._resets.values())

    def offsets_to_look_up(self) -> dict[TopicPartition, tuple[int, int]]:
        """Due resets not yet being looked up: tp -> (OFFSET_SPEC, token); now in flight."""
        lookups = {}
        for tp, reset in self._resets.items():
            if _lookup_due(reset):
                reset.in_flight = True
                lookups[tp] = (reset.spec, reset.token)
        return lookups

    def on_offsets_found(
        self,
        found: Mapping[TopicPartition, tuple[int, int]],
        epochs: Mapping[TopicPartition, int] | None = None,
    ) -> None:
        """The lookup answered: tp -> (token, offset), and the leader epoch of the record before
        each offset where known (`epochs`: a group's committed offsets carry it). Resets replaced
        since are left alone. With the epoch, the next fetch carries it, so the leader detects a
        log truncated below that position (KIP-320: after an unclean election) instead of
        answering out of range, which would reset the position per auto.offset.reset."""
        for tp, (token, offset) in found.items():
            reset = self._resets.get(tp)
            if reset is None or reset.token != token:
                continue
            del self._resets[tp]
            partition = self._partitions[tp]
            partition.position = partition.fetch_offset = offset
            partition.leader_epoch = -1 if epochs is None else epochs.get(tp, -1)

    def on_committed_missing(self, tokens: Mapping[TopicPartition, int]) -> None:
        """The group has no committed offset for these (tp -> token): start per
        auto.offset.reset, looked up at once (with `none`, the next poll raises)."""
        for tp, token in tokens.items():
            reset = self._resets.get(tp)
            if reset is not None and reset.token == token:
                self.set_reset(tp, self.default_reset(), due=True)

    def on_lookup_failed(self, tokens: Mapping[TopicPartition, int], error: Exception) -> None:
        """The lookup gave up (`error` is raised by the next poll or position); the resets stay
        and are due again at the next poll or position."""
        for tp, token in tokens.items():
            reset = self._resets.get(tp)
            if reset is not None and reset.token == token:
                reset.in_flight = reset.due = False
        self.lookup_error = error

    def pop_lookup_error(self) -> Exception | None:
        error, self.lookup_error = self.lookup_error, None
        return error


def _lookup_due(reset: _Reset) -> bool:
    """A NO_RESET is never looked up (the broker knows no such spec): only a seek resolves it,
    and until then `request_resets` raises."""
    return reset.due and not reset.in_flight and reset.spec != NO_RESET
