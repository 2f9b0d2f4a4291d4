"""Goal: APPEND and SUBTRACT on a list config (cleanup.policy) act on its items as Kafka's
controller does (KIP-339): the operation's value is itself a comma-separated list, and the items
compare without the spaces the list parser ignores. A SUBTRACT that matched nothing was answered
success and changed nothing, so the operator believed a policy gone that was still applied.

Method: IncrementalAlterConfigs decided against an image and committed with the real replay.
"""

from __future__ import annotations

from test_control_plane import alter_config, cluster, create

from samsa.common.errors import ErrorCode
from samsa.v1 import controller_pb2 as c

POLICY = "cleanup.policy"


def test_subtract_removes_an_item_written_with_a_space() -> None:
    image, _ = create(cluster(), "t", **{POLICY: "compact, delete"})
    image, result = alter_config(image, "t", (POLICY, c.ALTER_CONFIG_OP_SUBTRACT, "delete"))
    assert result.error_code == ErrorCode.NONE
    assert image.topic_configs("t")[POLICY] == "compact"


def test_append_and_subtract_take_a_list_of_items() -> None:
    image, _ = create(cluster(), "t")
    image, result = alter_config(image, "t", (POLICY, c.ALTER_CONFIG_OP_APPEND, "compact, delete"))
    assert result.error_code == ErrorCode.NONE
    assert image.topic_configs("t")[POLICY] == "delete,compact"
    image, result = alter_config(image, "t", (POLICY, c.ALTER_CONFIG_OP_SUBTRACT, "compact,nope"))
    assert result.error_code == ErrorCode.NONE
    assert image.topic_configs("t")[POLICY] == "delete"


def test_subtracting_every_item_is_refused_naming_the_key() -> None:
    image, _ = create(cluster(), "t", **{POLICY: "compact,delete"})
    unchanged, result = alter_config(
        image, "t", (POLICY, c.ALTER_CONFIG_OP_SUBTRACT, "delete,compact")
    )
    assert result.error_code == ErrorCode.INVALID_CONFIG and POLICY in result.error_message
    assert unchanged is image
