"""A broker's producer id blocks, pure: the block in use, one fetched ahead, the next id.

Theory of operation (KIP-730; Kafka's RPCProducerIdManager). The active controller gives each
broker blocks of `limits.producer_id_block_size` ids, committed to the metadata log before they
are answered, so blocks of different brokers never overlap. `ProducerIdBlocks.take` hands out the
next id, or None when no block holds one; `needs_block` says when to ask for another — with no
block, or once 90 % of the current one is handed out and none is fetched ahead, so that a busy
broker rarely makes a producer wait for a round trip to the controller; `add` takes a block the
controller gave. producer_ids.py asks the controller and answers InitProducerId.

Invariants: an id is handed out only from inside a block; ids handed out strictly increase; a
block that overlaps or precedes one already taken is refused (`InvalidProducerIdBlockError`), so a
confused answer can never hand out an id twice.
"""

from __future__ import annotations

from dataclasses import dataclass

# Ask for the next block once this share of the current one is handed out (Kafka's
# RPCProducerIdManager prefetches at 90 %): the last tenth covers the controller round trip.
PREFETCH_PERCENT = 90
# The largest id a batch header carries (int64).
PRODUCER_ID_MAX = 2**63 - 1


class InvalidProducerIdBlockError(ValueError):
    """A block that is empty, out of range, or not above every block taken before."""


@dataclass(frozen=True)
class ProducerIdBlock:
    """Ids [start, start + length) owned by this broker."""

    start: int
    length: int

    @property
    def end(self) -> int:
        return self.start + self.length

    @property
    def prefetch_at(self) -> int:
        """The next id at which the following block is asked for."""
        return self.start + self.length * PREFETCH_PERCENT // 100


class ProducerIdBlocks:
    """The block in use, the one fetched ahead, and the next id to hand out (pure)."""

    def __init__(self) -> None:
        self.current: ProducerIdBlock | None = None
        self.prefetched: ProducerIdBlock | None = None
        self.next_id = -1
        self._taken_end = 0  # every block added lies below this

    def take(self) -> int | None:
        """The next producer id, or None when no block holds one (ask for a block)."""
        self._advance()
        if self.current is None or self.next_id >= self.current.end:
            return None
        producer_id = self.next_id
        assert self.current.start <= producer_id < self.current.end
        self.next_id += 1
        return producer_id

    def needs_block(self) -> bool:
        """True when another block should be asked for: none is fetched ahead, and the current
        one is missing, used up, or handed out to its prefetch point."""
        self._advance()
        if self.prefetched is not None:
            return False
        return self.current is None or self.next_id >= self.current.prefetch_at

    def add(self, block: ProducerIdBlock) -> None:
        """Take a block the controller gave: in use at once if the current one is used up,
        otherwise fetched ahead."""
        if block.length <= 0 or block.start < 0 or block.end - 1 > PRODUCER_ID_MAX:
            raise InvalidProducerIdBlockError(
                f"producer id block [{block.start}, {block.end}) is empty or out of range"
            )
        if block.start < self._taken_end:
            raise InvalidProducerIdBlockError(
                f"producer id block [{block.start}, {block.end}) is not above the blocks taken "
                f"before (which end at {self._taken_end})"
            )
        assert self.prefetched is None, "a block is asked for only when none is fetched ahead"
        self._taken_end = block.end
        if self.current is None or self.next_id >= self.current.end:
            self.current, self.next_id = block, block.start
        else:
            self.prefetched = block

    def _advance(self) -> None:
        if (
            self.current is not None
            and self.next_id >= self.current.end
            and self.prefetched is not None
        ):
            self.current, self.next_id = self.prefetched, self.prefetched.start
            self.prefetched = None
