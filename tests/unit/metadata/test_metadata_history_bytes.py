"""Goal: a controller's history of committed metadata batches is bounded in bytes, not only in
batches: 10,000 batches of up to 4 MiB each (e.g. big topics created and deleted again) would
otherwise stay in memory, parsed, while the image no longer holds any of it. A follower behind
the kept batches gets a snapshot (None), one within them still gets batches, and the newest
batch is kept even when it alone is beyond the bound.

Method: MetadataHistory built as the controller's driver builds it (the batch count from
common/limits.py), fed 48 committed batches of ~1 MiB (one topic config of 1 MiB each) replayed
with the real replay; the batches it still serves are counted and summed.
"""

from __future__ import annotations

from metadata_helpers import apply, config, topic

from samsa.common import limits
from samsa.metadata.history import MetadataHistory
from samsa.metadata.image import TOPIC_RESOURCE, MetadataImage
from samsa.metadata.records import make_batch
from samsa.metadata.replay import replay

MIB = 1 << 20
BYTES_KEPT_MAX = 4 * limits.metadata_fetch_bytes_max  # four full FetchMetadata answers


def fed_history(
    batches: int, max_bytes: int | None = None
) -> tuple[MetadataHistory, list[MetadataImage]]:
    """A history fed `batches` batches of ~1 MiB, and the image after each."""
    image = apply(MetadataImage.empty(), topic("big", b"\x01" * 16))
    bound = {} if max_bytes is None else {"max_bytes": max_bytes}
    history = MetadataHistory(
        start_offset=image.end_offset,
        start_hash=image.hash,
        max_batches=limits.metadata_history_batches_max,
        **bound,
    )
    images = [image]
    for serial in range(batches):
        record = config(TOPIC_RESOURCE, "big", "message.format", f"{serial:08d}" + "x" * MIB)
        batch = make_batch(image, [record], serial)
        image = replay(image, batch)
        history.append(batch, image.hash)
        images.append(image)
    return history, images


def test_the_history_keeps_a_bounded_number_of_bytes_and_serves_what_it_keeps() -> None:
    history, images = fed_history(48)
    kept = history.batches_since(
        history.start_offset, _hash_at(images, history.start_offset), 1 << 40
    )
    assert kept is not None and kept[-1].base_offset == images[-2].end_offset
    kept_bytes = sum(batch.ByteSize() for batch in kept)
    assert kept_bytes <= BYTES_KEPT_MAX, f"{kept_bytes} bytes of batches kept"
    assert kept_bytes >= limits.metadata_fetch_bytes_max, "at least one full answer is served"
    assert history.batches_since(images[0].end_offset, images[0].hash, 1 << 40) is None, (
        "a follower behind the kept batches gets a snapshot"
    )


def test_the_newest_batch_stays_even_when_it_alone_is_beyond_the_bound() -> None:
    history, images = fed_history(3, max_bytes=MIB // 2)
    assert history.start_offset == images[-2].end_offset
    answer = history.batches_since(images[-2].end_offset, images[-2].hash, 1 << 40)
    assert answer is not None and len(answer) == 1
    assert history.batches_since(images[-3].end_offset, images[-3].hash, 1 << 40) is None


def _hash_at(images: list[MetadataImage], end_offset: int) -> bytes:
    (image,) = [image for image in images if image.end_offset == end_offset]
    return image.hash
