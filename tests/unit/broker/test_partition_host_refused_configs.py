"""Goal: a topic config that this broker's LogConfig refuses, although the controller stored it
(an older controller validated less, or a bound was tightened since), does not stop the broker:
the refused settings fall back to their defaults, the others hold, and an error says which.
Before, InvalidConfigError left the metadata apply, which ended the broker, at every start.

Method: a real PartitionHost applying an image whose topic carries such configs.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from broker_host import hosting, two_broker_image

from samsa.common import limits

TOPIC_ID = b"\x0c" * 16


def test_refused_settings_fall_back_to_their_defaults_and_the_rest_hold(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    configs = {
        "cleanup.policy": "compact",
        "segment.bytes": "100",  # below limits.segment_bytes_min
        "retention.ms": "5000",
    }
    image = two_broker_image(TOPIC_ID, 1, configs)
    logged = caplog.at_level(logging.ERROR, logger="samsa.services.broker.partition_host")
    with logged, hosting(tmp_path, image) as host:
        hosted = host.get("t", 0)
        assert hosted is not None
        assert hosted.config.segment_bytes == limits.segment_bytes_default
        assert hosted.config.retention_ms == 5000
        assert hosted.config.compact and not hosted.config.delete
    assert "segment.bytes" in caplog.text and "defaults" in caplog.text
