"""Goal: Admin's writes reach the active controller when bootstrap.servers names only another
controller (a common `--bootstrap-server` of one host): the follower answers NOT_CONTROLLER with
the active one's address, and the write goes there, as Kafka's admin sends its writes to the
active controller it learns of. It must not ask the follower again until request.timeout.ms.
And what a write answers never takes the client's metadata offset back.

Method: two gRPC servers on loopback, a follower answering NOT_CONTROLLER naming the other, and
an active controller answering success; only the follower is in bootstrap.servers.
"""

from __future__ import annotations

import time

from fake_controllers import NotController, serving_controllers

from samsa.client.admin import Admin
from samsa.v1 import controller_pb2 as c
from samsa.v1 import controller_pb2_grpc


class Active(controller_pb2_grpc.ControllerServiceServicer):
    def __init__(self) -> None:
        self.created: list[str] = []

    def CreateTopics(self, request, context):  # type: ignore[no-untyped-def]
        self.created.extend(topic.name for topic in request.topics)
        answer = c.CreateTopicsResponse()
        answer.status.metadata_offset = 7
        for topic in request.topics:
            answer.topics.add(name=topic.name)
        return answer


def test_a_write_follows_the_redirect_to_an_active_controller_not_in_bootstrap() -> None:
    follower, active = NotController(), Active()
    with serving_controllers(follower, active) as (follower_at, active_at):
        follower.active = active_at
        with Admin({"bootstrap.servers": follower_at, "request.timeout.ms": 3_000}) as admin:
            started = time.monotonic()
            admin.create_topic("t", 1, 1)
            assert time.monotonic() - started < 1.0
            admin.create_topic("u", 1, 1)  # straight to the active one now
    assert active.created == ["t", "u"]
    assert follower.calls == 1


def test_a_write_answered_at_an_older_offset_does_not_take_reads_back_in_time() -> None:
    """The client's metadata offset only grows: a read answered at offset 100 (on this or
    another thread) and then a write answered at 7 (committed earlier, answered later) leave
    reads asking for at least 100, so none is answered from an older view than one already
    seen."""
    active = Active()
    with serving_controllers(active) as (active_at,):
        admin = Admin({"bootstrap.servers": active_at, "request.timeout.ms": 3_000})
        with admin:
            metadata = admin._partitions._metadata
            metadata.metadata_offset = 100  # as a refresh answered at offset 100 leaves it
            admin.create_topic("t", 1, 1)  # answered at offset 7
            assert metadata.metadata_offset == 100
            assert admin._controller.metadata_offset >= 7
