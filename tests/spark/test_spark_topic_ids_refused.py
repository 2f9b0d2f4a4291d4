"""Goal: a plan's topic ids (source.topic_ids) are not taken from a listing of every topic when
the ACLs refuse one of the topics named (DescribeTopics answers TOPIC_AUTHORIZATION_FAILED per
topic): the AuthorizationError naming it is raised, as listing every topic would only leave it
out; a topic that is gone still falls back to the listing, its id then missing.

Method: source.topic_ids over a stand-in Admin whose describe_topics raises as the SDK's does
(cluster_admin.raise_first: the first failed topic's error, every failed one in `errors`). Pure:
no Spark session, no cluster."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from samsa.client import AuthorizationError
from samsa.client.cluster_admin import raise_first
from samsa.common.errors import ErrorCode
from samsa.spark import source
from samsa.spark.options import parse_options
from samsa.v1 import controller_pb2 as c

BOOT = {"samsa.bootstrap.servers": "127.0.0.1:1", "subscribe": "a,b"}


def answered(name: str, code: ErrorCode) -> c.DescribeTopicsResponse.Topic:
    return c.DescribeTopicsResponse.Topic(name=name, error_code=code, error_message=code.name)  # type: ignore[arg-type]


class StandInAdmin:
    """Describes `a`; `b` answered with `code`; every topic is `a` alone."""

    code = ErrorCode.TOPIC_AUTHORIZATION_FAILED

    def __init__(self, config: object) -> None:
        pass

    def __enter__(self) -> StandInAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def describe_topics(self, names: list[str] | None) -> dict[str, SimpleNamespace]:
        if names is not None:
            raise_first([answered(name, self.code) for name in names if name != "a"])
        return {"a": SimpleNamespace(topic_id=b"a" * 16)}


def test_a_refused_topic_raises_rather_than_listing_every_topic(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(source, "Admin", StandInAdmin)
    with pytest.raises(AuthorizationError) as raised:
        source.topic_ids(parse_options(BOOT), ["a", "b"])
    assert raised.value.topic == "b"


def test_a_topic_gone_falls_back_to_listing_every_topic(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(StandInAdmin, "code", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    monkeypatch.setattr(source, "Admin", StandInAdmin)
    assert source.topic_ids(parse_options(BOOT), ["a", "b"]) == {"a": b"a" * 16}
