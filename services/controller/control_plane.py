"""The controller's decisions: a request and the committed image in, records and an answer out.

Pure (no I/O, no clock, no global randomness): the driver passes the image, `now_ms` and a random
source, commits the records as one batch, and fills the answer's status. Every rule of DESIGN §2
that the controller enforces is here, where it is tested directly:

- brokers register fenced (epoch = the registration's offset) and are unfenced once a heartbeat
  shows they applied the log up to their own registration; a second live process with the same
  id is refused; one that asked to shut down is fenced and marked so (KIP-841), and no heartbeat
  of that registration unfences it;
- fencing a broker (session expired, controlled shutdown, re-registration) moves each leadership
  it holds to the first live ISR member in replica order, leader epoch + 1; with none, to a live
  eligible leader replica (KIP-966: out of the ISR since it went below min.insync.replicas, so
  holding every committed record); with none, the partition goes offline and keeps its last ISR
  member, which leads again when it comes back, unless it registers after an unclean shutdown
  while another replica is eligible (eligible_leaders.py);
- topics are placed with Kafka's assignment (metadata/placement.py) over unfenced brokers and
  validated with Kafka's rules and names;
- producer ids go to current brokers in blocks that never overlap, across failover too;
- coordinators register live, are fenced when their sessions expire, and own the partitions of
  __consumer_offsets (created once a coordinator and enough brokers are live), balanced within
  one, each change of owner bumping the partition's assignment epoch (coordinator_control.py);
  FindCoordinator is answered from the image (metadata/coordinators.py);
- partitions move to other brokers (KIP-455) by adding the target's new replicas, which catch
  up and join the ISR, then removing the replicas the target leaves out (reassignment_control.py);
- a broker stopped for good and holding no replica is unregistered on request (KIP-631,
  unregister_control.py); a running one, or one still holding replicas, is refused;
- an operator may ask for preferred or unclean leader elections (KIP-460,
  elect_leaders_control.py), answered partition by partition;
- client quotas (KIP-13, KIP-546) are set and removed per client.id or for the default entity
  (quota_control.py; the RPCs are quota_servicer.py's, a mixin of the servicer).

The decisions live in broker_control.py, isr_control.py, eligible_leaders.py, topic_control.py,
config_control.py, producer_id_control.py, coordinator_control.py, reassignment_control.py,
unregister_control.py, elect_leaders_control.py and quota_control.py;
this module is the one place the adapter imports them from. The plain reads (DescribeCluster,
DescribeTopics, DescribeConfigs, ListPartitionReassignments) are shared with the brokers, which
answer them too: services/runtime/metadata_reads.py, re-exported here.
"""

from __future__ import annotations

from samsa.metadata.coordinators import CoordinatorLookup, find_coordinator
from samsa.services.controller.broker_control import (
    broker_heartbeat,
    fence_brokers,
    preferred_leader_elections,
    register_broker,
    report_corrupt_replica,
)
from samsa.services.controller.config_control import incremental_alter_configs
from samsa.services.controller.control_result import ClusterDefaults, ControlResult, RandomSource
from samsa.services.controller.coordinator_control import (
    coordinator_heartbeat,
    coordinator_topic_problem,
    fence_coordinators,
    plan_coordinator_assignments,
    plan_coordinator_topics,
    register_coordinator,
)
from samsa.services.controller.elect_leaders_control import elect_leaders
from samsa.services.controller.isr_control import alter_partition
from samsa.services.controller.producer_id_control import allocate_producer_ids
from samsa.services.controller.reassignment_control import (
    alter_partition_reassignments,
    complete_reassignments,
)
from samsa.services.controller.topic_control import (
    create_partitions,
    create_topics,
    delete_topics,
    topic_name_problem,
)
from samsa.services.controller.unregister_control import unregister_broker
from samsa.services.runtime.metadata_reads import (
    describe_cluster,
    describe_configs,
    describe_topics,
    describe_topics_limit,
    describe_topics_problem,
    list_partition_reassignments,
)

__all__ = [
    "ClusterDefaults",
    "ControlResult",
    "CoordinatorLookup",
    "RandomSource",
    "allocate_producer_ids",
    "alter_partition",
    "alter_partition_reassignments",
    "broker_heartbeat",
    "complete_reassignments",
    "coordinator_heartbeat",
    "coordinator_topic_problem",
    "create_partitions",
    "create_topics",
    "delete_topics",
    "describe_cluster",
    "describe_configs",
    "describe_topics",
    "describe_topics_limit",
    "describe_topics_problem",
    "elect_leaders",
    "fence_brokers",
    "fence_coordinators",
    "find_coordinator",
    "incremental_alter_configs",
    "list_partition_reassignments",
    "plan_coordinator_assignments",
    "plan_coordinator_topics",
    "preferred_leader_elections",
    "register_broker",
    "register_coordinator",
    "report_corrupt_replica",
    "topic_name_problem",
    "unregister_broker",
]
