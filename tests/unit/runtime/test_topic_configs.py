"""Goal: a topic config value that is not valid is refused as bad input (InvalidConfigError,
which the controller answers INVALID_CONFIG), never with another exception: one escaping
validation ends the CreateTopics or IncrementalAlterConfigs call INTERNAL, logged as a bug.

Method: validate_topic_configs over values that `str.isdigit` takes for digits but `int` does
not read (superscripts), beside a good one.
"""

from __future__ import annotations

import pytest

from samsa.common.errors import InvalidConfigError
from samsa.services.runtime.topic_configs import validate_topic_configs


@pytest.mark.parametrize("value", ["²", "1²", "0", "4", "-1", "", " 1"])
def test_a_bad_min_insync_replicas_is_an_invalid_config(value: str) -> None:
    with pytest.raises(InvalidConfigError, match=r"^min\.insync\.replicas="):
        validate_topic_configs({"min.insync.replicas": value}, 3)


def test_a_min_insync_replicas_within_the_replication_factor_is_accepted() -> None:
    validate_topic_configs({"min.insync.replicas": "3"}, 3)
