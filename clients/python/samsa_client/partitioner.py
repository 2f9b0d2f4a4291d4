"""Choosing a partition for a record: Kafka's key hash and sticky partitioning, as a pure core.

Theory of operation.

- A record with a key goes to `to_positive(murmur2(key)) % partition_count`, bit-exact with Kafka's
  default partitioner (`Utils.murmur2`, seed 0x9747b28c, `Utils.toPositive`), so a key lands on the
  same partition number as it would with a Java, librdkafka-in-murmur2-mode or aiokafka producer
  for the same partition count. The hash covers *all* partitions, available or not: a key's
  partition must not move when a leader is briefly missing (ordering per key beats latency).
- A record without a key (or every record, with `partitioner.ignore.keys`) goes to the topic's
  *sticky* partition (KIP-480): one partition per topic is used until the batch being filled for it
  is closed, and only then is another partition chosen. Records therefore fill whole batches
  instead of spreading one record per partition per request, which is what made keyless produce
  slow before KIP-480; switching at batch boundaries spreads load over time.
- The next sticky partition is drawn among the partitions that have a leader (all partitions when
  none is known to have one), weighted by load as in KIP-794's adaptive partitioning
  (`partitioner.adaptive.partitioning.enable`, on by default as in Kafka >= 3.3): a partition's
  weight is one more than the longest queue among the candidates minus its own queue (batches
  waiting to be sent), so a partition whose broker is slow or stopped, where batches pile up,
  is drawn ever more rarely, and a producer's keyless records flow to the brokers that keep up
  instead of filling buffer.memory with batches that wait. Equal queues make the draw uniform.
  A partition whose queue only grows is still drawn (about once in q + 2 draws with q batches
  queued), so a broker that stopped answering still collects batches until delivery.timeout.ms;
  `partitioner.availability.timeout.ms` (off by default, as in Kafka) makes a partition with a
  batch that has waited that long past its linger, unsent or unanswered, no candidate at all.
  `choose_by_load` is the rule; the caller supplies the loads (`PartitionLoads`), read only when
  a new partition is drawn, never per record.

The accumulator tells the driver when a keyless append would open a new batch
(`AppendRefusal.NEW_BATCH_NEEDED` with `abort_on_new_batch=True`); the driver then calls
`on_batch_closed(topic, partition)` and asks for a partition again — Kafka's `onNewBatch` dance,
which moves the record that did not fit to the next sticky partition instead of leaving it alone
in a new batch.

Invariants: a sticky partition is always < the partition count it was chosen for, and had a
leader and a responsive one (a load >= 0) when it was chosen, unless no partition had; a switch
never picks the previous partition when another candidate exists. The module is pure:
randomness comes from the `random.Random` the caller passes in (a seeded one in tests), never
from module-level state.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any, Protocol

# numpy hashes a column of keys at once (send_many); without it, one key at a time. It is
# imported on first use: its ~170 ms would otherwise be paid by every process that imports the
# SDK (each `samsa` command), and most never call send_many.
_NOT_LOADED: Any = object()
numpy: Any = _NOT_LOADED


def _numpy() -> Any:
    """numpy, imported on first use; None when it is not installed."""
    global numpy
    if numpy is _NOT_LOADED:
        try:
            import numpy as loaded
        except ImportError:  # pragma: no cover - numpy comes with the [spark] extra
            loaded = None
        numpy = loaded
    return numpy


__all__ = [
    "UNAVAILABLE",
    "PartitionLoads",
    "Partitioner",
    "RandomSource",
    "StickyPartitioner",
    "choose_by_load",
    "murmur2",
    "partition_for_key",
    "partitions_for_keys",
    "to_positive",
]

_MURMUR2_SEED = 0x9747B28C
_MURMUR2_MULTIPLIER = 0x5BD1E995
_MASK_32 = 0xFFFFFFFF
_SIGN_BIT_32 = 0x80000000

# The most key hashes `Partitioner` remembers (a few MiB for short keys). Keys longer than this
# many bytes are hashed every time: caching them would let a few huge keys pin a lot of memory.
KEY_HASHES_CACHED_MAX = 65_536
KEY_BYTES_CACHED_MAX = 256


class RandomSource(Protocol):
    """The part of `random.Random` the partitioner uses (a seeded instance makes tests exact)."""

    def randrange(self, start: int, stop: int | None = None, step: int = 1) -> int: ...


# A partition's load when it has no leader, or its leader has taken nothing for
# partitioner.availability.timeout.ms: it is not a candidate while another partition is.
UNAVAILABLE = -1
# (topic, partition count) -> each partition's load: the batches queued for it and not yet sent
# (0 for every partition with adaptive partitioning off), or UNAVAILABLE.
PartitionLoads = Callable[[str, int], Sequence[int]]


def choose_by_load(loads: Sequence[int], previous: int | None, random_source: RandomSource) -> int:
    """The next sticky partition (KIP-794): among the partitions with a leader other than
    `previous` (falling back to `previous`, then to every partition, when there is no other),
    drawn with weight `longest queue + 1 - own queue`, so the longest queue weighs 1 and an empty
    one the most. One pass over the partitions; called once per batch, not per record."""
    candidates = [p for p, load in enumerate(loads) if load >= 0 and p != previous]
    if not candidates:
        if previous is not None and 0 <= previous < len(loads) and loads[previous] >= 0:
            return previous
        candidates = [p for p in range(len(loads)) if p != previous] or list(range(len(loads)))
    longest = max(max(loads[p] for p in candidates), 0)
    weights = [longest + 1 - max(loads[p], 0) for p in candidates]
    draw = random_source.randrange(sum(weights))
    for partition, weight in zip(candidates, weights, strict=True):
        if draw < weight:
            return partition
        draw -= weight
    raise AssertionError("the draw is below the sum of the weights")


def murmur2(data: bytes) -> int:
    """Kafka's `Utils.murmur2`: 32-bit MurmurHash2, seed 0x9747b28c, as a signed 32-bit int.

    Whole 4-byte little-endian words are read with one `struct` call; all arithmetic is done on
    unsigned 32-bit values (masked), so Java's `>>>` is Python's `>>`.
    """
    length = len(data)
    h = (_MURMUR2_SEED ^ length) & _MASK_32
    word_count = length >> 2
    if word_count:
        for word in struct.unpack_from(f"<{word_count}I", data):
            word = (word * _MURMUR2_MULTIPLIER) & _MASK_32
            word ^= word >> 24
            word = (word * _MURMUR2_MULTIPLIER) & _MASK_32
            h = ((h * _MURMUR2_MULTIPLIER) & _MASK_32) ^ word
    tail_count = length & 3
    if tail_count:
        tail_position = length - tail_count
        if tail_count == 3:
            h ^= data[tail_position + 2] << 16
        if tail_count >= 2:
            h ^= data[tail_position + 1] << 8
        h ^= data[tail_position]
        h = (h * _MURMUR2_MULTIPLIER) & _MASK_32
    h ^= h >> 13
    h = (h * _MURMUR2_MULTIPLIER) & _MASK_32
    h ^= h >> 15
    return h - (1 << 32) if h & _SIGN_BIT_32 else h


def to_positive(number: int) -> int:
    """Kafka's `Utils.toPositive`: clear the sign bit (not abs(), which fails on MIN_VALUE)."""
    return number & 0x7FFFFFFF


def partition_for_key(key: bytes, partition_count: int) -> int:
    """The partition Kafka's default partitioner picks for `key` among `partition_count`."""
    if partition_count <= 0:
        raise ValueError(f"partition_count must be positive, got {partition_count}")
    return to_positive(murmur2(key)) % partition_count


def partitions_for_keys(keys: Sequence[bytes], partition_count: int) -> list[int]:
    """`partition_for_key` for a column of keys (send_many): the same partitions, from numpy's
    murmur2 over every key of one length at once when numpy is importable (~30 ns a key instead
    of ~1.5 us), else key by key."""
    partitions = _key_partitions(keys, partition_count)
    return partitions if isinstance(partitions, list) else partitions.tolist()


def _key_partitions(keys: Sequence[bytes], partition_count: int) -> Any:
    """partitions_for_keys as a list, or as a numpy array when numpy hashed them."""
    if partition_count <= 0:
        raise ValueError(f"partition_count must be positive, got {partition_count}")
    if len(keys) < KEYS_VECTORISED_MIN or (np := _numpy()) is None:
        return [to_positive(murmur2(key)) % partition_count for key in keys]
    lengths = set(map(len, keys))
    if len(lengths) == 1:  # the common case: fixed-width keys
        return _murmur2_same_length(keys, lengths.pop()) % partition_count
    key_lengths = np.fromiter(map(len, keys), dtype=np.int64, count=len(keys))
    partitions = np.empty(len(keys), dtype=np.uint32)
    for length in lengths:
        indexes = np.flatnonzero(key_lengths == length)
        same_length = [keys[i] for i in indexes.tolist()]
        partitions[indexes] = _murmur2_same_length(same_length, length) % partition_count
    return partitions


def partition_groups(
    keys: Sequence[bytes | None],
    partitions: Sequence[int | None] | None,
    partition_count: int,
    *,
    ignore_keys: bool,
) -> list[tuple[int | None, list[int] | None]]:
    """Where the records of one `send_many` call go, as (partition, record indexes) groups to
    append one after the other: a record's own partition if given, else its key's (the same as
    `partition_for_key`), else None, the sticky partition (placed while appending, as batches
    fill). Indexes None: every record. The groups keep each partition's records in call order:
    records placed by the sticky partitioner split the call into runs, grouped run by run."""
    sticky_keys = ignore_keys or all(key is None for key in keys)
    if partitions is None and sticky_keys:
        return [(None, None)]
    if partitions is None and None not in keys:
        groups = _grouped(_key_partitions(keys, partition_count), 0)
        return [(groups[0][0], None)] if len(groups) == 1 else groups
    targets: list[int | None] = list(partitions) if partitions is not None else [None] * len(keys)
    if not sticky_keys:
        unplaced = [i for i, p in enumerate(targets) if p is None and keys[i] is not None]
        hashed = partitions_for_keys([keys[i] for i in unplaced], partition_count)
        for index, partition in zip(unplaced, hashed, strict=True):
            targets[index] = partition
    groups: list[tuple[int | None, list[int] | None]] = []
    run_start = 0
    for index in range(1, len(targets) + 1):
        if index == len(targets) or (targets[index] is None) != (targets[run_start] is None):
            if targets[run_start] is None:
                groups.append((None, list(range(run_start, index))))
            else:
                groups += _grouped(targets[run_start:index], run_start)
            run_start = index
    return groups


def _grouped(targets: Sequence[int], offset: int) -> list[tuple[int | None, list[int] | None]]:
    """(partition, indexes + offset) per partition of `targets` (a list or a numpy array), each
    group's indexes ascending."""
    np = _numpy()
    if np is None:
        by_partition: dict[int, list[int]] = {}
        for index, partition in enumerate(targets, offset):
            by_partition.setdefault(partition, []).append(index)
        groups = list(by_partition.items())
    else:  # a stable sort by partition, split where the partition changes
        array = np.asarray(targets)
        order = np.argsort(array, kind="stable")
        ordered = array[order]
        bounds = np.flatnonzero(ordered[1:] != ordered[:-1]) + 1
        firsts = [0, *bounds.tolist()]
        chunks = np.split(order + offset, bounds)
        groups = [(int(ordered[f]), c.tolist()) for f, c in zip(firsts, chunks, strict=True)]
    return groups  # type: ignore[return-value]


# Below this many keys the per-key loop beats numpy's fixed cost.
KEYS_VECTORISED_MIN = 16


def _murmur2_same_length(keys: Sequence[bytes], length: int) -> Any:
    """to_positive(murmur2(key)) of keys all `length` bytes long, as a numpy uint32 array: the
    same arithmetic as `murmur2`, one column of 32-bit words at a time (uint32 wraps as the
    masks do)."""
    np = _numpy()
    count = len(keys)
    uint32 = np.uint32
    multiplier = uint32(_MURMUR2_MULTIPLIER)
    hashes = np.full(count, (_MURMUR2_SEED ^ length) & _MASK_32, dtype=uint32)
    if length == 0:
        rows = np.zeros((count, 0), dtype=np.uint8)
    else:
        rows = np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(count, length)
    word_count = length >> 2
    if word_count:
        words = np.ascontiguousarray(rows[:, : word_count * 4]).view("<u4")
        for position in range(word_count):
            word = words[:, position] * multiplier
            word ^= word >> uint32(24)
            word *= multiplier
            hashes *= multiplier
            hashes ^= word
    tail_count = length & 3
    if tail_count:
        tail = word_count * 4
        if tail_count == 3:
            hashes ^= rows[:, tail + 2].astype(uint32) << uint32(16)
        if tail_count >= 2:
            hashes ^= rows[:, tail + 1].astype(uint32) << uint32(8)
        hashes ^= rows[:, tail].astype(uint32)
        hashes *= multiplier
    hashes ^= hashes >> uint32(13)
    hashes *= multiplier
    hashes ^= hashes >> uint32(15)
    return hashes & uint32(0x7FFFFFFF)


class StickyPartitioner:
    """One partition per topic for keyless records, switched when its batch closes (KIP-480),
    drawn by load (KIP-794, `choose_by_load`).

    `partition()` is on the per-record path: a dict lookup and one comparison while the sticky
    partition holds; `loads` is read only when a new one is drawn (None: every partition has a
    leader and an empty queue, so draws are uniform).
    """

    __slots__ = ("_closed", "_loads", "_random", "_sticky")

    def __init__(self, random_source: RandomSource, loads: PartitionLoads | None = None) -> None:
        self._random = random_source
        self._loads = loads
        # topic -> the partition keyless records of that topic go to right now.
        self._sticky: dict[str, int] = {}
        # topic -> the partition whose batch just closed: the next choice avoids it.
        self._closed: dict[str, int] = {}

    def partition(self, topic: str, partition_count: int) -> int:
        """The topic's sticky partition, drawing one if there is none or it no longer exists
        (the partition count shrank in our view)."""
        sticky = self._sticky.get(topic)
        if sticky is None:
            return self._choose(topic, partition_count, self._closed.pop(topic, None))
        if sticky < partition_count:
            return sticky
        return self._choose(topic, partition_count, sticky)

    def on_batch_closed(self, topic: str, partition: int | None = None) -> None:
        """The batch being filled for `topic` is closed: the next `partition()` picks anew.

        With `partition`, a stale notice (about a partition that is no longer the sticky one,
        because another notice already moved it) is ignored, as in Kafka's `onNewBatch`: two
        notices for one closed batch must not skip a partition.
        """
        sticky = self._sticky.get(topic)
        if sticky is None or (partition is not None and partition != sticky):
            return
        del self._sticky[topic]
        self._closed[topic] = sticky

    def _choose(self, topic: str, partition_count: int, previous: int | None) -> int:
        if partition_count <= 0:
            raise ValueError(f"partition_count must be positive, got {partition_count}")
        loads = (
            [0] * partition_count if self._loads is None else self._loads(topic, partition_count)
        )
        assert len(loads) == partition_count, "one load per partition"
        chosen = choose_by_load(loads, previous, self._random)
        self._sticky[topic] = chosen
        return chosen


class Partitioner:
    """Kafka's built-in partitioner: murmur2 of the key when there is one (and keys are not
    ignored, `partitioner.ignore.keys`), the sticky partition otherwise."""

    __slots__ = ("_hashes", "_ignore_keys", "sticky")

    def __init__(
        self,
        random_source: RandomSource,
        *,
        ignore_keys: bool,
        loads: PartitionLoads | None = None,
    ) -> None:
        self._ignore_keys = ignore_keys
        self.sticky = StickyPartitioner(random_source, loads)
        # key -> to_positive(murmur2(key)). Keys repeat (user ids, device ids) and murmur2 in
        # Python costs ~1.5 us for a 16-byte key against ~0.1 us for a dict hit. Bounded: cleared
        # whole when full, which is cheaper per record than keeping an LRU order.
        self._hashes: dict[bytes, int] = {}

    def partition(self, topic: str, key: bytes | None, partition_count: int) -> int:
        if key is None or self._ignore_keys:
            return self.sticky.partition(topic, partition_count)
        if len(key) > KEY_BYTES_CACHED_MAX:
            return partition_for_key(key, partition_count)
        positive_hash = self._hashes.get(key)
        if positive_hash is None:
            if len(self._hashes) >= KEY_HASHES_CACHED_MAX:
                self._hashes.clear()
            positive_hash = self._hashes[key] = to_positive(murmur2(key))
        return positive_hash % partition_count

    def uses_sticky(self, key: bytes | None) -> bool:
        """True when a record with this key is placed by the sticky partitioner (so the driver
        appends it with `abort_on_new_batch=True`)."""
        return key is None or self._ignore_keys

    def on_batch_closed(self, topic: str, partition: int | None = None) -> None:
        self.sticky.on_batch_closed(topic, partition)
