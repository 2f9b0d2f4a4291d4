"""Goal: the scale bench reads /proc the way proc(5) lays it out (CPU ticks after a command name
that may hold spaces and parentheses, VmRSS in KiB), turns ticks into % of one core, runs the
steps the options ask for, and prints issue 10's targets as met, missed or n/a from the figures.

Method: the pure helpers run on hand-made /proc text and hand-made step figures with known
answers; no cluster is started.
"""

from __future__ import annotations

import pytest

from bench import scale_bench as sb

# A /proc/<pid>/stat line whose comm holds a space and a parenthesis; utime 250, stime 50.
STAT = "4242 (python -m x) y) S 1 4242 4242 0 -1 4194304 900 0 0 0 250 50 0 0 20 0 5 0 99 1 2"


def test_cpu_ticks_are_utime_plus_stime_counted_after_the_command_name() -> None:
    assert sb.cpu_ticks(STAT) == 300


def test_cpu_percent_is_of_one_core() -> None:
    assert sb.cpu_percent(1_000, 1_300, seconds=3.0, hertz=100) == 100.0
    assert sb.cpu_percent(1_000, 1_015, seconds=3.0, hertz=100) == 5.0
    assert sb.cpu_percent(1_000, 1_000, seconds=0.0, hertz=100) == 0.0


def test_rss_is_read_from_vmrss_in_kib() -> None:
    status = "Name:\tpython\nVmPeak:\t  900000 kB\nVmRSS:\t   81234 kB\nThreads:\t7\n"
    assert sb.rss_kib(status) == 81_234
    assert sb.rss_kib("Name:\tzombie\n") == 0


def test_steps_follow_quick_and_scale_max() -> None:
    assert sb.steps_for(quick=False, scale_max=None) == (0, 1_000, 3_000)
    assert sb.steps_for(quick=True, scale_max=10_000) == (0, 1_000)
    assert sb.steps_for(quick=False, scale_max=10_000) == (0, 1_000, 3_000, 10_000)
    assert sb.steps_for(quick=False, scale_max=2_000) == (0, 1_000, 2_000)


@pytest.mark.parametrize("scale_max", [1_250, 50, -100])
def test_a_step_that_is_not_whole_topics_is_refused(scale_max: int) -> None:
    """A step creates topics of TOPIC_PARTITIONS: --scale-max 1250 created 1,200 partitions and
    reported (and divided RSS growth by) 1,250."""
    with pytest.raises(ValueError, match="multiple of 100"):
        sb.steps_for(quick=False, scale_max=scale_max)


def _step(partitions: int, p50_ms: float, cpu: float, broker_rss_kib: int) -> sb.StepFigures:
    names = ("broker-1", "broker-2", "broker-3")
    return sb.StepFigures(
        partitions,
        create_s=0.1,
        ready_s=0.5,
        quiet_s=1.0,
        p50_ms=p50_ms,
        p99_ms=2 * p50_ms,
        cpu_percent={"controller-1": 1.0, **dict.fromkeys(names, cpu)},
        rss_kib={"controller-1": 50_000, **dict.fromkeys(names, broker_rss_kib)},
        cluster_cmd_s=0.3,
        restart_s=1.5,
        isr_back_s=2.5,
    )


NAMES = ("broker-1", "broker-2", "broker-3", "controller-1")


def test_targets_missed_when_an_idle_partition_costs_something() -> None:
    # 3,000 partitions at RF 3 on 3 brokers: 3,000 replicas each; +300,000 KiB is 100 KiB each.
    steps = [_step(0, 1.0, 2.0, 60_000), _step(3_000, 186.0, 40.0, 360_000)]
    text = sb.format_targets(steps, NAMES)
    assert "186.0x  MISSED" in text
    assert "worst 40.0 % (broker-1)  MISSED" in text
    assert "worst 100.0 KiB  MISSED" in text


def test_targets_met_when_the_largest_step_costs_as_little_as_the_empty_one() -> None:
    steps = [_step(0, 1.0, 2.0, 60_000), _step(3_000, 1.2, 3.0, 90_000)]
    text = sb.format_targets(steps, NAMES)
    assert "1.2x  met" in text and "worst 3.0 % (broker-1)  met" in text
    assert "worst 10.0 KiB  met" in text
    assert "restart-to-serving time: 1.5 s (full ISR again after 2.5 s)" in text
    assert "MISSED" not in text


def test_table_has_a_row_per_step_and_a_missing_figure_reads_na() -> None:
    failed = sb.StepFigures(1_000, create_s=0.4, notes=["sync produce: failed: TimeoutError"])
    text = sb.format_table([_step(0, 0.9, 2.0, 60_000), failed], NAMES)
    lines = text.splitlines()
    assert lines[0].split()[0] == "partitions"
    assert lines[1].split()[0] == "0" and lines[2].split()[0] == "1,000"
    assert "n/a" in lines[2] and "n/a" not in lines[1]
    assert "note (1,000): sync produce: failed: TimeoutError" in text
    assert len({len(line) for line in lines[:3]}) == 1  # the columns line up


def test_quiet_once_the_metadata_offset_has_not_moved_for_the_window() -> None:
    moving = [(0.0, 10), (1.0, 12), (2.0, 15), (3.0, 15), (4.0, 15)]
    assert sb.quiet_after_s(moving, quiet_s=5.0) is None  # moved at 2.0, only 2 s since
    settled = [*moving, (6.0, 15), (7.0, 15)]
    assert sb.quiet_after_s(settled, quiet_s=5.0) == 2.0
    assert sb.quiet_after_s([(0.0, 7), (5.0, 7)], quiet_s=5.0) == 0.0  # never moved
    assert sb.quiet_after_s([], quiet_s=5.0) is None
