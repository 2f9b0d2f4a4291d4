"""Goal: UnregisterBroker forgets a broker only when it is stopped and holds nothing, and its id
then registers afresh; every refusal says what to do first.

Method: images built with the real control plane and replay (test_control_plane's helpers, a
partition placed by hand by reassignment_helpers); sessions in a real BrokerLiveness driven by
explicit `now_ms` values. Each refusal is checked for its code, its message and that it writes
nothing; the success for its one record, the image after replay and a later registration.
"""

from __future__ import annotations

from reassignment_helpers import T, placed, reassign, state
from test_control_plane import cluster, commit, register

from samsa.common.errors import ErrorCode
from samsa.metadata.image import MetadataImage
from samsa.services.controller import control_plane as cp
from samsa.services.controller.liveness import BrokerLiveness
from samsa.v1 import controller_pb2 as c
from samsa.v1 import metadata_pb2 as m

SESSION_MS = 1000


def fenced(image: MetadataImage, *broker_ids: int) -> MetadataImage:
    return commit(image, cp.fence_brokers(image, broker_ids))


def unregister(
    image: MetadataImage, broker_id: int, liveness: BrokerLiveness | None = None, now_ms: int = 0
) -> tuple[MetadataImage, cp.ControlResult[c.UnregisterBrokerResponse]]:
    result = cp.unregister_broker(
        image,
        c.UnregisterBrokerRequest(broker_id=broker_id),
        liveness=liveness or BrokerLiveness(),
        now_ms=now_ms,
        session_timeout_ms=SESSION_MS,
    )
    return commit(image, result), result


def refusal(result: cp.ControlResult[c.UnregisterBrokerResponse]) -> tuple[int, str]:
    assert not result.records, "a refusal writes nothing"
    return result.response.status.error_code, result.response.status.error_message


def test_a_stopped_empty_broker_is_unregistered_and_leaves_the_cluster() -> None:
    image = fenced(cluster(3), 2)
    epoch = image.brokers[2].broker_epoch
    after, result = unregister(image, 2)
    assert result.response.status.error_code == ErrorCode.NONE
    assert list(result.records) == [
        m.MetadataRecord(
            unregister_broker=m.UnregisterBrokerRecord(broker_id=2, broker_epoch=epoch)
        )
    ]
    assert sorted(after.brokers) == [1, 3]
    described = cp.describe_cluster(after, cluster_id="c", controllers={}, active_node_id=None)
    assert [b.broker_id for b in described.brokers] == [1, 3]


def test_an_unknown_id_is_refused_as_not_registered() -> None:
    image = cluster(2)
    code, message = refusal(unregister(image, 7)[1])
    assert code == ErrorCode.BROKER_ID_NOT_REGISTERED
    assert "no broker is registered with id 7" in message
    gone, _ = unregister(fenced(image, 2), 2)
    code, _ = refusal(unregister(gone, 2)[1])
    assert code == ErrorCode.BROKER_ID_NOT_REGISTERED, "unregistering twice: the second refused"


def test_an_unfenced_broker_is_refused_stop_it_first() -> None:
    code, message = refusal(unregister(cluster(2), 2)[1])
    assert code == ErrorCode.INVALID_REQUEST
    assert "broker 2 is running" in message and "stop it first" in message


def test_a_fenced_broker_still_heartbeating_is_refused_until_its_session_expires() -> None:
    image = fenced(cluster(2), 2)  # e.g. in controlled shutdown, or catching up
    sessions = BrokerLiveness()
    sessions.heartbeat(2, image.brokers[2].broker_epoch, now_ms=5000)
    code, message = refusal(unregister(image, 2, sessions, now_ms=5000 + SESSION_MS)[1])
    assert code == ErrorCode.INVALID_REQUEST
    assert "heartbeated within the session timeout (1000 ms)" in message
    assert "stop it first" in message
    _, result = unregister(image, 2, sessions, now_ms=5001 + SESSION_MS)
    assert result.records, "silent for longer than the session timeout: it is stopped"


def test_a_heartbeat_of_an_older_registration_does_not_keep_the_broker() -> None:
    image = fenced(cluster(2), 2)
    sessions = BrokerLiveness()
    sessions.heartbeat(2, image.brokers[2].broker_epoch - 1, now_ms=5000)
    assert unregister(image, 2, sessions, now_ms=5000)[1].records


def test_just_after_a_failover_every_broker_counts_as_alive_for_one_session() -> None:
    """The new active controller has heard nobody yet: a broker it has no session for may
    still be heartbeating to it in a moment (liveness.is_alive)."""
    image = fenced(cluster(2), 2)
    sessions = BrokerLiveness()
    sessions.reset_all(now_ms=10_000)
    code, _ = refusal(unregister(image, 2, sessions, now_ms=10_000 + SESSION_MS)[1])
    assert code == ErrorCode.INVALID_REQUEST
    assert unregister(image, 2, sessions, now_ms=10_001 + SESSION_MS)[1].records


def test_a_broker_holding_a_replica_is_refused_naming_the_partition() -> None:
    image = fenced(placed([1, 2, 3]), 3)
    code, message = refusal(unregister(image, 3)[1])
    assert code == ErrorCode.INVALID_REQUEST
    assert "broker 3 still holds replicas of 1 partition(s) (t-0)" in message
    assert "samsa reassign" in message
    assert unregister(fenced(image, 4), 4)[1].records, "broker 4 holds nothing"


def test_adding_and_removing_replicas_of_a_reassignment_in_progress_count() -> None:
    image, answers, _ = reassign(placed([1, 2, 3]), ("t", 0, [1, 2, 4]))
    assert answers == [(ErrorCode.NONE, "")]
    assert (state(image).adding, state(image).removing) == ((4,), (3,)), "still in progress"
    image = fenced(image, 3, 4)
    for broker_id in (3, 4):
        code, message = refusal(unregister(image, broker_id)[1])
        assert code == ErrorCode.INVALID_REQUEST and "(t-0)" in message, broker_id


def test_an_eligible_leader_replica_counts() -> None:
    image = fenced(cluster(3), 3)
    record = m.PartitionRecord(
        topic_id=T, partition=0, replicas=[1, 3], isr=[1], leader=1, eligible_leader_replicas=[3]
    )
    topic = m.MetadataRecord(topic=m.TopicRecord(name="t", topic_id=T))
    image = commit(image, cp.ControlResult([topic, m.MetadataRecord(partition=record)], None))
    assert state(image).elr == (3,)
    code, message = refusal(unregister(image, 3)[1])
    assert code == ErrorCode.INVALID_REQUEST and "(t-0)" in message


def test_the_refusal_names_a_few_partitions_and_counts_them_all() -> None:
    image = cluster(2)
    records = [m.MetadataRecord(topic=m.TopicRecord(name="t", topic_id=T))]
    records += [
        m.MetadataRecord(
            partition=m.PartitionRecord(
                topic_id=T, partition=n, replicas=[1, 2], isr=[1, 2], leader=1
            )
        )
        for n in range(8)
    ]
    image = fenced(commit(image, cp.ControlResult(records, None)), 2)
    _, message = refusal(unregister(image, 2)[1])
    assert "8 partition(s) (t-0, t-1, t-2, t-3, t-4 and 3 more)" in message


def test_the_id_registers_afresh_after_unregistration() -> None:
    image = fenced(cluster(2), 2)
    old_epoch = image.brokers[2].broker_epoch
    image, _ = unregister(image, 2)
    image, response = register(image, 2, incarnation="new machine")
    broker = image.brokers[2]
    assert response.status.error_code == ErrorCode.NONE
    assert broker.broker_epoch == response.broker_epoch > old_epoch
    assert broker.fenced and broker.incarnation_id == "new machine"


def test_liveness_forgets_an_unregistered_broker() -> None:
    """The servicer forgets the session once the record commits; a controller that was not
    active then drops it when it becomes active (reset_all with the registered brokers)."""
    sessions = BrokerLiveness()
    sessions.heartbeat(1, 0, now_ms=0)
    sessions.heartbeat(2, 5, now_ms=0)
    sessions.forget(2)
    assert sessions.expired(now_ms=5000, timeout_ms=SESSION_MS) == [1]
    standby = BrokerLiveness()
    standby.heartbeat(1, 0, now_ms=0)
    standby.heartbeat(2, 5, now_ms=0)
    standby.reset_all(now_ms=100, registered={1: "registration"})
    assert standby.expired(now_ms=5000, timeout_ms=SESSION_MS) == [1]
    assert not standby.is_alive(2, 5, now_ms=5000, timeout_ms=SESSION_MS)
