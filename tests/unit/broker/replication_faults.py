"""The faults of the replication simulation (replication_sim.py), and the recoveries from them:
a broker killed (kill -9: what it wrote stays in the page cache, its memory is gone) or shut down
cleanly (the controller moves its leaderships first; its next registration names the epoch it
stopped under, as the clean-shutdown file does, KIP-966), the whole cluster or one broker losing
power (each keeps only what it fsynced), the controller expiring a dead broker's session, and a
broker started again (it registers and opens its logs).

A second broker goes down while one is already down only SECOND_FAULT of the time, and one
always stays up. `_track_durability` follows, after every step, how far each broker's log is on
disk, so that a power loss takes exactly the rest (`_lose_unfsynced`, at the next start).
"""

from __future__ import annotations

import os

from samsa.metadata.image import TOPIC_RESOURCE
from samsa.services.broker.log.log import Log
from samsa.services.broker.partition_host import log_config, partition_dir_name
from samsa.services.controller import control_plane as cp
from tests.unit.broker.replication_cluster import KEY, TOPIC, Broker, ClusterState, heartbeat

# A second broker goes down while one is already down only this often: mostly one fault at a
# time, sometimes two (offline partitions, elections from a shrunk ISR).
SECOND_FAULT = 0.25


class ReplicationFaults(ClusterState):
    """The faults, as methods of the simulation (which inherits them): the steps "expire",
    "kill", "shutdown", "power_loss", "broker_power_loss" and "restart"."""

    power_loss: bool

    def _kill(self, broker: Broker) -> None:
        """kill -9: what the process wrote stays (the page cache), its memory is gone."""
        assert broker.host is not None
        self._stop_cleaning(broker, discard=False)
        for hosted in broker.host.partitions.values():
            # The process's descriptors close with it, and nothing else happens: no flush, no
            # index or checkpoint written (Log.close would do all three).
            for segment in hosted.log._local_log.segments:
                if segment.fd >= 0:
                    os.close(segment.fd)
                    segment.fd = -1
        broker.host = None
        broker.fetch = None
        self._forget_produces(broker.broker_id)
        self.checked.pop(broker.broker_id, None)

    def _track_durability(self) -> None:
        """After each step: what each live broker's log holds on disk. A truncation takes its
        bytes away; a flush (the recovery point moving) makes everything below it durable."""
        for broker in self._live():
            hosted = broker.hosted()
            if hosted is not None:
                log = hosted.log
                broker.durable_end = max(
                    min(broker.durable_end, log.log_end_offset), log.recovery_point
                )

    def _lose_unfsynced(self, broker: Broker, fsynced_end: int) -> None:
        """What a power loss leaves of the log: its records below `fsynced_end` (the recovery
        point when the power went). Emulated by opening the log and truncating it there."""
        directory = broker.data_dir / partition_dir_name(*KEY)
        config = log_config(self.image.configs.get((TOPIC_RESOURCE, TOPIC), {}))
        lost = Log.open(directory, config, now_ms=self.now_ms)
        if lost.log_end_offset > fsynced_end:
            self.counts["records lost to the power loss"] += lost.log_end_offset - fsynced_end
        lost.truncate_to(fsynced_end)
        lost.close()

    def _shutdown(self, broker: Broker) -> None:
        """Controlled shutdown: the controller moves its leaderships, then it closes its logs."""
        self.image = heartbeat(
            self.image, broker.broker_id, self.image.end_offset, want_shutdown=True
        )
        self._apply_metadata(broker)
        self._settle()
        assert broker.host is not None
        self._stop_cleaning(broker, discard=True)
        broker.host.close_all()
        broker.clean_shutdown_epoch = self.image.brokers[broker.broker_id].broker_epoch
        broker.host = None
        broker.fetch = None
        self._forget_produces(broker.broker_id)
        self.checked.pop(broker.broker_id, None)

    def _step_expire(self) -> bool:
        dead = [
            b
            for b in self.brokers.values()
            if not b.alive and not self.image.brokers[b.broker_id].fenced
        ]
        if not dead:
            return False
        broker = self.rng.choice(dead)
        self._commit(cp.fence_brokers(self.image, [broker.broker_id]))
        return True

    def _step_kill(self) -> bool:
        live = self._live()
        if not self._may_fault(live):
            return False
        self._kill(self.rng.choice(live))
        self.counts["kills"] += 1
        return True

    def _step_shutdown(self) -> bool:
        live = [b for b in self._live() if not self.image.brokers[b.broker_id].fenced]
        if not self._may_fault(live):
            return False
        self._shutdown(self.rng.choice(live))
        return True

    def _step_power_loss(self) -> bool:
        """Every broker loses power at once: what it had not fsynced is gone. The README promises
        that acknowledged records survive this only with flush.messages=1."""
        if not self.power_loss or len(self._live()) < len(self.brokers):
            return False
        for broker in self.brokers.values():
            broker.fsynced_end = broker.durable_end
            self._kill(broker)
        self.counts["power losses"] += 1
        return True

    def _step_broker_power_loss(self) -> bool:
        """One broker loses power: it restarts (a later step) with only what it had fsynced, and
        a new registration. The rest of the cluster holds what it acknowledged, so nothing
        acknowledged may be lost (DESIGN §4: any single broker), and the leader must not count
        the fetches of the broker's earlier life toward putting it back in the ISR (KIP-903).
        Only while every broker is up and every other one in the ISR: the others then hold every
        acknowledged record (a last ISR member losing its unflushed tail loses records, in Kafka
        too). A broker outside the ISR is the interesting one: nothing resets the leader's view
        of its progress when it comes back."""
        live = self._live()
        isr = set(self.state().isr)
        candidates = [b for b in live if isr >= set(self.brokers) - {b.broker_id}]
        if len(live) < len(self.brokers) or not candidates:
            return False
        broker = self.rng.choice(candidates)
        broker.fsynced_end = broker.durable_end
        self._kill(broker)
        self.counts["broker power losses"] += 1
        return True

    def _may_fault(self, live: list[Broker]) -> bool:
        """Whether one of `live` may go down now (one always stays up)."""
        if len(live) < 2:
            return False
        return len(live) == len(self.brokers) or self.rng.random() < SECOND_FAULT

    def _step_restart(self) -> bool:
        dead = [b for b in self.brokers.values() if not b.alive]
        if not dead:
            return False
        broker = self.rng.choice(dead)
        self._register(broker.broker_id)
        self._start(broker)
        return True
