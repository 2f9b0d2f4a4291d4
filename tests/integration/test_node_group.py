"""The Node.js client's group member and its life cycle (clients/node/group.js) against a real
cluster.

Goal: closing a client whose member never called leave() ends the member (it leaves the group,
as Kafka's consumer.close() does) and lets Node exit, instead of heartbeating on channels it
reopens for ever.

Method: short Node scripts over samsa.js against a local cluster of 1 controller, 2 brokers and
1 coordinator (real processes, real gRPC); the Python Admin describes the group. Skipped when
`node` or clients/node/node_modules is missing.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from node_helpers import NODE_MISSING, node_cluster, node_script

from samsa.client import Admin, NewTopic

if NODE_MISSING:
    pytest.skip(NODE_MISSING, allow_module_level=True)

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with node_cluster(tmp_path_factory.mktemp("node-group")) as endpoints:
        yield endpoints


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])


def test_closing_the_client_ends_a_member_that_did_not_leave(bootstrap: str) -> None:
    topic, group = "closed-member", "closed-member-group"
    create_topic(bootstrap, topic, 2)
    # The script returns with the member still in the group; SCRIPT then closes the client.
    # Node must exit (no heartbeat timer left), well within the member's session.
    assigned = node_script(
        bootstrap,
        topic,
        """
        const member = await client.joinGroup(data, [topic]);
        return (await member.waitForAssignment(10000)).length;
        """,
        group,
        timeout_s=15,
    )
    assert assigned == 2
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        description = admin.describe_consumer_groups([group])[group]
    assert (description.state, description.members) == ("Empty", ())
