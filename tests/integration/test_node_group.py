"""The Node.js client's group member and its life cycle (clients/node/group.js) against a real
cluster.

Goal: a member commits only the partitions it owns (one it gave up is another member's, whose
commits it would overwrite: the coordinator checks the member epoch, not ownership); closing a
client whose member never called leave() ends the member (it leaves the group, as Kafka's
consumer.close() does) and lets Node exit, instead of heartbeating on channels it reopens for
ever. example.js group-consume commits what it printed before handing a partition over, reads
a partition handed to it later (by a member that left) as it reads its first ones, and reads a
topic deleted and created again under its name from the new topic's start (Positions,
auto.offset.reset=earliest, as the Python consumer does), not from the old topic's position.

Method: short Node scripts over samsa.js against a local cluster of 1 controller, 2 brokers and
1 coordinator (real processes, real gRPC); the Python Admin describes the group and reads its
committed offsets. Skipped when `node` or clients/node/node_modules is missing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest
from cluster_helpers import wait_until
from node_helpers import (
    NODE,
    NODE_DIR,
    bootstrap_fixture,
    node,
    node_script,
    skip_module_without_node,
    start_node_script,
)

from samsa.client import Admin, NewTopic, Producer

skip_module_without_node()

pytestmark = pytest.mark.timeout(120)
bootstrap = bootstrap_fixture("node-group")

# Joins group `data` and returns how many partitions the member was given; it does not leave.
JOIN_AND_RETURN_WITHOUT_LEAVING = """
const member = await client.joinGroup(data, [topic]);
return (await member.waitForAssignment(10000)).length;
"""
# A (on `client`) and then B (on a second client) join group `data`; B commits 7 on the
# partition A handed it, then A tries to commit 3 there. Returns the partition handed over,
# A's partitions and A's error message (null when its commit went through).
COMMIT_A_PARTITION_HANDED_OVER = """
const { SamsaClient } = require(process.env.NODE_TEST_CLIENT);
const other = new SamsaClient(process.env.SAMSA_BOOTSTRAP);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
try {
  const a = await client.joinGroup(data, [topic]);
  while (a.assignment.length < 2 || a.ownedChanged) await sleep(50);
  const b = await other.joinGroup(data, [topic]);
  const [handed] = await b.waitForAssignment(10000);
  await b.commit([{ topic, partition: handed.partition, offset: 7 }]);
  await a.heartbeat(); // A's epoch is the coordinator's now
  const refused = await a
    .commit([{ topic, partition: handed.partition, offset: 3 }])
    .then(() => null, (error) => error.message);
  const owned = a.assignment.map((tp) => tp.partition);
  return { handed: handed.partition, owned, refused };
} finally {
  await other.close();
}
"""


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])


def test_closing_the_client_ends_a_member_that_did_not_leave(bootstrap: str) -> None:
    topic, group = "closed-member", "closed-member-group"
    create_topic(bootstrap, topic, 2)
    # The script returns with the member still in the group; SCRIPT then closes the client.
    # Node must exit (no heartbeat timer left), well within the member's session.
    assigned = node_script(bootstrap, topic, JOIN_AND_RETURN_WITHOUT_LEAVING, group, timeout_s=15)
    assert assigned == 2
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        description = admin.describe_consumer_groups([group])[group]
    assert (description.state, description.members) == ("Empty", ())


def test_a_member_cannot_commit_a_partition_it_gave_up(bootstrap: str) -> None:
    topic, group = "handed-over", "handed-over-group"
    create_topic(bootstrap, topic, 2)
    # Member A owns both partitions; B joins and is given one of them once A gave it up. A then
    # commits that partition at its current member epoch: the coordinator checks the epoch, not
    # ownership, so the commit must be refused by A itself, or it would overwrite B's.
    outcome = node_script(bootstrap, topic, COMMIT_A_PARTITION_HANDED_OVER, group)
    assert isinstance(outcome, dict)
    assert outcome["owned"] == [1 - outcome["handed"]]
    assert outcome["refused"] and f"{topic}[{outcome['handed']}]" in outcome["refused"]
    handed = (topic, outcome["handed"])
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        committed = admin.list_consumer_group_offsets(group, [handed])
    assert committed[handed].offset == 7


# A (on `client`, with an onRevoke that commits 11 on what it gives up, then works on for half a
# second) and then B (on a second client) join group `data`. Returns the order of what happened
# and A's partitions at the end.
REVOKE_CALLBACK = """
const { SamsaClient } = require(process.env.NODE_TEST_CLIENT);
const other = new SamsaClient(process.env.SAMSA_BOOTSTRAP);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const events = [];
try {
  const a = await client.joinGroup(data, [topic], {
    onRevoke: async (partitions) => {
      const numbers = partitions.map((tp) => tp.partition);
      events.push(['revoking', numbers, a.assignment.length]);
      await a.commit(numbers.map((partition) => ({ topic, partition, offset: 11 })));
      await sleep(500); // the application's own work on what it gives up
      events.push(['revoked']);
    },
  });
  while (a.assignment.length < 2 || a.ownedChanged) await sleep(50);
  const b = await other.joinGroup(data, [topic]);
  const [handed] = await b.waitForAssignment(15000);
  events.push(['handed', [handed.partition]]);
  return { events, owned: a.assignment.map((tp) => tp.partition) };
} finally {
  await other.close();
}
"""


def test_a_member_gives_a_partition_up_after_its_revoke_callback(bootstrap: str) -> None:
    topic, group = "revoke-callback", "revoke-callback-group"
    create_topic(bootstrap, topic, 2)
    # Kafka's onPartitionsRevoked: A is told what it gives up while it still owns it (so it may
    # commit it), and B is given that partition only after A's callback finished.
    outcome = node_script(bootstrap, topic, REVOKE_CALLBACK, group)
    assert isinstance(outcome, dict)
    handed = outcome["events"][-1][1]
    assert outcome["events"] == [["revoking", handed, 2], ["revoked"], ["handed", handed]]
    assert outcome["owned"] == [1 - handed[0]]
    partition = (topic, handed[0])
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        committed = admin.list_consumer_group_offsets(group, [partition])
    assert committed[partition].offset == 11


# Joins group `data` with an onRevoke that commits 21 on what it is given, then leaves; returns
# what onRevoke was given and the member's partitions after leaving.
LEAVE_WITH_REVOKE_CALLBACK = """
const given = [];
const member = await client.joinGroup(data, [topic], {
  onRevoke: async (partitions) => {
    given.push(partitions.map((tp) => tp.partition).sort());
    await member.commit(partitions.map((tp) => ({ ...tp, offset: 21 })));
  },
});
await member.waitForAssignment(10000);
await member.leave();
return { given, after: member.assignment.length };
"""


def test_leaving_calls_the_revoke_callback_with_every_partition(bootstrap: str) -> None:
    topic, group = "leave-callback", "leave-callback-group"
    create_topic(bootstrap, topic, 2)
    # Kafka's consumer.close() calls onPartitionsRevoked before it leaves, so the application
    # commits what it processed; the commits made there are the group's.
    outcome = node_script(bootstrap, topic, LEAVE_WITH_REVOKE_CALLBACK, group)
    assert outcome == {"given": [[0, 1]], "after": 0}
    partitions = [(topic, 0), (topic, 1)]
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        committed = admin.list_consumer_group_offsets(group, partitions)
        description = admin.describe_consumer_groups([group])[group]
    assert [committed[tp].offset for tp in partitions] == [21, 21]
    assert description.members == ()


def test_group_consume_commits_what_it_printed_before_handing_over(bootstrap: str) -> None:
    topic, group = "handover-example", "handover-example-group"
    create_topic(bootstrap, topic, 2)
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        for n in range(12):
            producer.send(topic, f"v{n}".encode(), partition=n % 2)
        producer.flush()
    # A prints every record and reads on; B joins and is handed one of A's partitions. A's
    # onRevoke commits what it printed of it before giving it up, so B starts after it and
    # prints nothing: no record is printed twice.
    command = [NODE, str(NODE_DIR / "example.js"), "--bootstrap", bootstrap]
    first = subprocess.Popen(
        [*command, "group-consume", group, topic, "--timeout-ms", "6000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert first.stdout is not None
    try:
        printed = [first.stdout.readline() for _ in range(12)]
        second = node(bootstrap, "group-consume", group, topic, "--timeout-ms", "3000")
        rest, errors = first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == 0, errors
    assert second.returncode == 0, second.stderr
    assert (len(printed), rest, second.stdout) == (12, "", "")


# Joins group `data`, prints "holding" once it owns both partitions (alone in the group), holds
# what it owns until its stdin closes, then leaves.
HOLD_UNTIL_STDIN_CLOSES = """
const member = await client.joinGroup(data, [topic]);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
while (member.assignment.length < 2 || member.ownedChanged) await sleep(50);
console.log('holding');
await new Promise((resolve) => process.stdin.on('end', resolve).resume());
await member.leave();
return 'left';
"""


def test_group_consume_reads_a_partition_handed_to_it_later(bootstrap: str) -> None:
    topic, group = "handed-later", "handed-later-group"
    create_topic(bootstrap, topic, 2)
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        for n in range(6):
            producer.send(topic, f"v{n}".encode(), partition=n % 2)
        producer.flush()
    # The holder owns both partitions; group-consume joins and is handed one of them, reads
    # its 3 records, and gets the other once the holder leaves: it reads that one too (it
    # read only the partitions of its first assignment, and stopped with "got 3 of 6").
    holder = start_node_script(bootstrap, topic, HOLD_UNTIL_STDIN_CLOSES, group)
    assert holder.stdout is not None and holder.stdin is not None
    command = [NODE, str(NODE_DIR / "example.js"), "--bootstrap", bootstrap]
    consumer = None
    try:
        assert holder.stdout.readline().strip() == "holding"
        consumer = subprocess.Popen(
            [*command, "group-consume", group, topic, "--count", "6", "--timeout-ms", "8000"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert consumer.stdout is not None
        # The consumer was handed one partition and printed its 3 records (the pytest timeout
        # bounds this wait should it never be), then the holder leaves.
        first = [consumer.stdout.readline() for _ in range(3)]
        holder.stdin.close()
        assert holder.wait(timeout=30) == 0
        rest, errors = consumer.communicate(timeout=60)
        printed = "".join(first) + rest
    finally:
        for process in (holder, consumer):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
    assert consumer.returncode == 0, errors
    lines = [json.loads(line) for line in printed.splitlines()]
    rows = sorted((line["partition"], line["offset"]) for line in lines)
    assert rows == [(p, o) for p in (0, 1) for o in range(3)]


def test_group_consume_reads_a_topic_created_again_from_its_start(bootstrap: str) -> None:
    topic, group = "created-again", "created-again-group"
    create_topic(bootstrap, topic, 1)
    admin = Admin({"bootstrap.servers": bootstrap})
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    command = [NODE, str(NODE_DIR / "example.js"), "--bootstrap", bootstrap, "group-consume"]
    consumer = subprocess.Popen(
        [*command, group, topic, "--count", "8", "--timeout-ms", "30000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert consumer.stdout is not None
    try:
        for n in range(3):
            producer.send(topic, b"old-%d" % n, partition=0).result(timeout=30)
        printed = [json.loads(consumer.stdout.readline())["value"] for _ in range(3)]
        # Stopped while the topic is deleted, created again and given 5 records (as the Python
        # test pauses its consumer): its position, 3, is the middle of the new topic. It
        # printed new-3 and new-4 and then waited for 3 more ("got 5 of 8").
        os.kill(consumer.pid, signal.SIGSTOP)
        try:
            admin.delete_topics([topic])
            wait_until("the deletion", lambda: topic not in admin.list_topics())
            admin.create_topics([NewTopic(topic, 1, 1)])
            for n in range(5):
                producer.send(topic, b"new-%d" % n, partition=0).result(timeout=60)
        finally:
            os.kill(consumer.pid, signal.SIGCONT)
        rest, errors = consumer.communicate(timeout=60)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()
        producer.close()
        admin.close()
    assert consumer.returncode == 0, errors
    printed += [json.loads(line)["value"] for line in rest.splitlines()]
    assert printed == [f"old-{n}" for n in range(3)] + [f"new-{n}" for n in range(5)]
