"""A stand-in for samsa.client.Admin (monkeypatched into samsa.spark.source) whose cluster has
one topic, a, with partition 0 only: for tests of assigned or subscribed topics and partitions
the cluster lacks."""

from __future__ import annotations

from types import SimpleNamespace


class OnlyTopicA:
    def __init__(self, config: dict) -> None: ...
    def __enter__(self) -> OnlyTopicA:
        return self

    def __exit__(self, *exc: object) -> None: ...
    def list_topics(self) -> list[str]:
        return ["a"]

    def describe_topics(self, names: list[str]) -> dict:
        assert names == ["a"], names  # nothing asked of a topic that is not there
        return {"a": SimpleNamespace(partitions=[SimpleNamespace(partition=0)])}
