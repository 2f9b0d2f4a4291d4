"""The per-thread zstd contexts: reused within a thread, never shared between threads, and reuse
changes no byte and survives a corrupt frame."""

from __future__ import annotations

import threading

import pytest
import zstandard

from samsa.common.errors import CorruptRecordError
from samsa.common.record import zstd_contexts
from samsa.common.record.batch_decoding import _decompress_section, decode_batch
from samsa.common.record.batch_encoding import build_batch
from samsa.common.record.header import COMPRESSION_ZSTD


def test_a_thread_reuses_its_contexts_and_another_thread_gets_its_own() -> None:
    mine = (zstd_contexts.compressor(3), zstd_contexts.decompressor())
    assert mine == (zstd_contexts.compressor(3), zstd_contexts.decompressor())
    assert zstd_contexts.compressor(1) is not mine[0]
    theirs: list[object] = []
    thread = threading.Thread(
        target=lambda: theirs.extend((zstd_contexts.compressor(3), zstd_contexts.decompressor()))
    )
    thread.start()
    thread.join()
    assert theirs[0] is not mine[0] and theirs[1] is not mine[1]


def test_a_reused_compressor_writes_the_bytes_a_fresh_one_does() -> None:
    sections = [bytes(range(256)) * n for n in (1, 7, 64, 3)]
    for section in sections:
        reused = zstd_contexts.compressor(3).compress(section)
        assert reused == zstandard.ZstdCompressor(level=3).compress(section)


def test_a_corrupt_frame_leaves_the_threads_decompressor_usable() -> None:
    values = [b"value-%d" % i * 20 for i in range(50)]
    section = b"".join(values)
    frame = bytearray(zstd_contexts.compressor(3).compress(section))
    frame[len(frame) // 2 :] = b"\xff" * (len(frame) - len(frame) // 2)
    with pytest.raises(CorruptRecordError, match="not one valid zstd frame"):
        _decompress_section(memoryview(bytes(frame)))
    good = build_batch(values, compression=COMPRESSION_ZSTD)
    assert list(decode_batch(good).values) == values
