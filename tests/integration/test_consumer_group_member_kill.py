"""Goal: a consumer-group member killed with SIGKILL mid-stream loses no record: the survivors
take its partitions over, re-reading only what it had not committed, with never two owners of a
partition.

Method: real processes from the launcher (1 controller, 2 brokers, 1 coordinator, stopped by PID
also on failure), with short sessions (group_test_helpers.SETTINGS). Three members are
subprocesses (group_consumer_proc.py) that journal every record processed, every commit that
succeeded and every listener call with a monotonic timestamp (one clock for all processes on
Linux); one is killed between processing a batch and committing it, and the test reads the
journals back. Record values are unique ids, so "every record at least once" is a set comparison.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from cluster_helpers import local_cluster, wait_until
from group_consumer_proc import Journal, read_journal
from group_test_helpers import SETTINGS, create_topics, produce

from samsa.cli.launcher import LocalCluster
from samsa.client import (
    Admin,
    NewTopic,
)

pytestmark = pytest.mark.timeout(300)

CONSUMER_PROC = Path(__file__).with_name("group_consumer_proc.py")

# Test 1: three member processes, one killed after about a third of the records.
KILL_TOPIC = "kill-consumer"
KILL_PARTITIONS = 12
KILL_RECORDS = 60_000
KILL_AFTER_RECORDS = 20_000
KILL_MEMBERS = ("a", "b", "c")
# How long to watch the victim's journal for a moment between a batch and its commit.
KILL_AIM_S = 5.0


def start_member(
    cluster: LocalCluster, group_id: str, workdir: Path, name: str
) -> subprocess.Popen:
    arguments = [cluster.spec.bootstrap_servers, group_id, KILL_TOPIC]
    arguments += [str(workdir / f"{name}.journal"), str(workdir / f"{name}.stop")]
    log = open(workdir / f"{name}.log", "wb")  # noqa: SIM115 - the child keeps it
    try:
        return subprocess.Popen(
            [sys.executable, str(CONSUMER_PROC), *arguments], stdout=log, stderr=subprocess.STDOUT
        )
    finally:
        log.close()


def ownership_intervals(
    journals: dict[str, Journal], victim: str, kill_ns: int
) -> dict[int, list[tuple[int, int, str]]]:
    """partition -> (start_ns, end_ns, member): from each assigned to its revoked or lost; the
    victim's open intervals end when it was killed, the others' never."""
    intervals: dict[int, list[tuple[int, int, str]]] = {}
    for name, journal in journals.items():
        opened: dict[int, int] = {}
        for kind, ns, partitions in journal.changes:
            for partition in partitions:
                if kind == "A":
                    assert partition not in opened, f"{name} assigned {partition} twice"
                    opened[partition] = ns
                else:
                    start = opened.pop(partition)
                    intervals.setdefault(partition, []).append((start, ns, name))
        end = kill_ns if name == victim else sys.maxsize
        for partition, start in opened.items():
            intervals.setdefault(partition, []).append((start, end, name))
    return intervals


def check_never_two_owners(intervals: dict[int, list[tuple[int, int, str]]]) -> None:
    for partition, spans in intervals.items():
        spans.sort()
        for (_, end, owner), (start, _, next_owner) in itertools.pairwise(spans):
            assert end <= start, (
                f"partition {partition} owned by {owner} until {end} and by {next_owner} "
                f"from {start}: two owners"
            )


def check_redelivery(journals: dict[str, Journal], victim: str, victim_owned: set[int]) -> None:
    """Every record processed at least once; twice only where the victim had not committed."""
    every = [r for journal in journals.values() for r in journal.records]
    ids = {record_id for _, _, record_id in every}
    assert ids == set(range(KILL_RECORDS)), f"{KILL_RECORDS - len(ids)} records never processed"
    for partition, offset, record_id in every:
        assert record_id % KILL_PARTITIONS == partition, (partition, offset, record_id)
    counts = Counter((partition, offset) for partition, offset, _ in every)
    twice = {key for key, count in counts.items() if count > 1}
    victim_processed = {(p, o) for p, o, _ in journals[victim].records}
    for partition, offset in sorted(twice):
        assert partition in victim_owned, f"{partition}@{offset} processed twice, not the victim's"
        last_commit = journals[victim].committed.get(partition, 0)
        assert offset >= last_commit, f"{partition}@{offset} processed twice below its commit"
        assert (partition, offset) in victim_processed, f"{partition}@{offset} twice by survivors"
        assert counts[(partition, offset)] == 2, f"{partition}@{offset} processed 3 times"


def wait_balanced(journal_paths: dict[str, Path], each: int) -> None:
    def balanced() -> bool:
        owned = [read_journal(path).owned() for path in journal_paths.values()]
        return all(len(mine) == each for mine in owned)

    wait_until(f"every member owning {each} partitions", balanced, timeout_s=60)


def produce_kill_records(cluster: LocalCluster, failures: list[BaseException]) -> None:
    """On a thread: the ids 0..KILL_RECORDS-1, each in partition id % KILL_PARTITIONS."""
    try:
        values = {b"%d" % n: n % KILL_PARTITIONS for n in range(KILL_RECORDS)}
        produce(cluster, KILL_TOPIC, values)
    except BaseException as error:  # the test thread reports it
        failures.append(error)


def processed_count(journal_paths: dict[str, Path]) -> int:
    return sum(len(read_journal(path).records) for path in journal_paths.values())


def processed_ids(journal_paths: dict[str, Path]) -> set[int]:
    return {r[2] for path in journal_paths.values() for r in read_journal(path).records}


def kill_between_processing_and_commit(process: subprocess.Popen, journal_path: Path) -> int:
    """SIGKILL the member, preferably while its journal ends with records it has not committed
    yet (so that some are processed twice); the monotonic time of the kill."""
    deadline = time.monotonic() + KILL_AIM_S
    with open(journal_path, "rb") as journal:
        while time.monotonic() < deadline:
            size = journal.seek(0, os.SEEK_END)
            journal.seek(max(0, size - 200))
            lines = journal.read().split(b"\n")
            if len(lines) >= 2 and lines[-2].startswith(b"R "):
                break
    kill_ns = time.monotonic_ns()
    process.send_signal(signal.SIGKILL)
    process.wait(10)
    return kill_ns


def survivors_own_everything(cluster: LocalCluster, group_id: str) -> bool:
    with Admin({"bootstrap.servers": cluster.spec.bootstrap_servers}) as admin:
        group = admin.describe_consumer_groups([group_id])[group_id]
    owned = [tp for member in group.members for tp in member.assignment]
    every = {(KILL_TOPIC, p) for p in range(KILL_PARTITIONS)}
    return len(group.members) == 2 and len(owned) == len(set(owned)) and set(owned) == every


def test_kill_9_of_a_consumer_loses_nothing_and_redelivers_only_its_uncommitted_records(
    tmp_path: Path,
) -> None:
    group_id = "kill-consumer"
    workdir = tmp_path / "members"
    workdir.mkdir()
    journal_paths = {name: workdir / f"{name}.journal" for name in KILL_MEMBERS}
    with local_cluster(tmp_path / "cluster", 1, 2, SETTINGS, 1) as cluster:
        create_topics(cluster, NewTopic(KILL_TOPIC, KILL_PARTITIONS, 1))
        members: dict[str, subprocess.Popen] = {}
        try:
            for name in KILL_MEMBERS:
                members[name] = start_member(cluster, group_id, workdir, name)
            wait_balanced(journal_paths, KILL_PARTITIONS // len(KILL_MEMBERS))
            failures: list[BaseException] = []
            producer = threading.Thread(target=produce_kill_records, args=(cluster, failures))
            producer.start()
            wait_until(
                f"{KILL_AFTER_RECORDS} records processed",
                lambda: processed_count(journal_paths) >= KILL_AFTER_RECORDS,
                timeout_s=60,
            )
            victim = max(
                KILL_MEMBERS, key=lambda name: len(read_journal(journal_paths[name]).owned())
            )
            kill_ns = kill_between_processing_and_commit(members[victim], journal_paths[victim])
            producer.join(60)
            assert not producer.is_alive() and not failures, failures
            wait_until(
                "every record processed",
                lambda: len(processed_ids(journal_paths)) == KILL_RECORDS,
                timeout_s=60,
            )
            wait_until(
                "the survivors owning all partitions",
                lambda: survivors_own_everything(cluster, group_id),
                timeout_s=30,
            )
            survivors = [name for name in KILL_MEMBERS if name != victim]

            def journaled() -> list[set[int]] | None:
                owned = [read_journal(journal_paths[name]).owned() for name in survivors]
                return owned if owned[0] | owned[1] == set(range(KILL_PARTITIONS)) else None

            # A member journals a partition when its listener runs, after the heartbeat answer
            # the coordinator's view above already shows: wait for the journals to say so too.
            owned = wait_until("the survivors' journals owning all partitions", journaled, 30)
            assert not owned[0] & owned[1], owned
            for name in survivors:
                (workdir / f"{name}.stop").touch()
            for name in survivors:
                assert members[name].wait(20) == 0, (workdir / f"{name}.log").read_text()
        finally:
            for process in members.values():
                if process.poll() is None:
                    process.kill()
                    process.wait(10)
    journals = {name: read_journal(path) for name, path in journal_paths.items()}
    victim_journal = journals[victim]
    victim_owned = victim_journal.owned()
    assert victim_owned, "the victim owned partitions when it was killed"
    assert victim_journal.records and victim_journal.committed, "the victim was killed midway"
    check_redelivery(journals, victim, victim_owned)
    check_never_two_owners(ownership_intervals(journals, victim, kill_ns))
    for name in survivors:
        assert not journals[name].failures, journals[name].failures
        assert journals[name].owned() == set(), f"{name} gave everything back at close()"
