"""Goal: subscription regexes cannot stall the coordinator, and mean what they meant. Patterns are
RE2 (Kafka's RE2/J syntax): a pattern that makes a backtracking engine run for minutes matches in
linear time and correctly; what RE2 refuses (lookaround, backreferences, possessive quantifiers,
bad syntax) is answered INVALID_REGULAR_EXPRESSION, with a message saying RE2 syntax is expected,
and writes nothing; ordinary patterns match exactly the names Python's `re.fullmatch` matched;
a refused pattern already in a group's log (from a release that used `re`) matches nothing
rather than failing the coordinator; and the SDK's subscribe(pattern=...) accepts exactly what
the coordinator accepts.

Method: GroupHarness heartbeats (each compared with a replay of its records), `resolve` on tables
of patterns and names against `re.fullmatch` as the reference, and the SDK's subscription_of
against the coordinator's validate over one table of patterns. The catastrophic case asserts the
answer, not a duration; its timeout mark only turns a regression into a prompt failure.
"""

from __future__ import annotations

import re

import pytest
from group_harness import GroupHarness, assignment_of

from samsa.client.rebalance import subscription_of
from samsa.common.errors import ErrorCode
from samsa.common.topic_regex import TOPIC_REGEX_LENGTH_MAX
from samsa.services.coordinator.group_assignment import resolve
from samsa.services.coordinator.group_heartbeat_validation import validate
from samsa.v1 import coordinator_pb2 as c

LONG_A = "a" * 249  # the longest topic name, all a's


@pytest.mark.timeout(30)
def test_a_catastrophic_pattern_matches_long_names_correctly() -> None:
    # Python's re needs about 2^n steps for (a*)*b against n a's: n = 249 never ends.
    h = GroupHarness({LONG_A: 2, LONG_A[:-1] + "b": 1, "audit": 1})
    answer = h.join("a", regex="(a*)*b")
    assert answer.error_code == ErrorCode.NONE
    assert assignment_of(answer) == {LONG_A[:-1] + "b": {0}}
    topics = {"a" * n + suffix: 1 for n in range(200, 250) for suffix in ("", "!")}
    assert resolve((), "(a|aa)*c", topics) == frozenset()
    assert resolve((), "(a|a)*", topics) == {name for name in topics if "!" not in name}


REFUSED = [
    "(?=orders)orders.*",  # lookahead
    "(?!audit).*",  # negative lookahead
    "(?<=x)y",  # lookbehind
    r"(o)\1rders",  # backreference
    "orders.*+",  # possessive quantifier
    "(orders",  # bad syntax
    r"orders\Z",  # Python's end anchor (RE2's is \z)
]


@pytest.mark.parametrize("pattern", REFUSED)
def test_what_re2_refuses_is_an_invalid_regular_expression(pattern: str) -> None:
    h = GroupHarness({"orders": 1})
    answer = h.join("a", regex=pattern)
    assert answer.error_code == ErrorCode.INVALID_REGULAR_EXPRESSION
    assert "is not a valid regular expression" in answer.error_message
    assert "RE2 syntax" in answer.error_message
    assert h.log == [] and h.state.groups == {}


def test_a_changed_subscription_to_a_refused_pattern_leaves_the_member_as_it_was() -> None:
    h = GroupHarness({"orders.eu": 1})
    h.join("a", regex=r"orders\..*")
    before = list(h.log)
    bad = c.ConsumerGroupSubscription(topic_regex=r"(?=orders)orders\..*")
    answer = h.heartbeat("a", 1, owned={"orders.eu": [0]}, subscription=bad)
    assert answer.error_code == ErrorCode.INVALID_REGULAR_EXPRESSION
    assert h.log == before and h.member("a").topic_regex == r"orders\..*"


NAMES = [
    "orders",
    "orders.eu",
    "orders.us.v2",
    "orders-eu",
    "ORDERS.eu",
    "payments.v12",
    "payments.v",
    "metrics_07",
    "metrics_7",
    "t",
    "t1",
    "xyz",
    "yy",
    "a.b-c_d",
    "__consumer_offsets",
]
ORDINARY = [
    r"orders\..*",
    "orders-.*",
    "orders",  # a whole name, not a prefix
    "orders.",  # any character after "orders"
    ".*eu",
    r"(orders|payments)\.v[0-9]+",
    r"[a-z]+_\d{2}",
    "(?i)orders.*",
    "t.*",
    "x?y+z*",
    ".*",
    r"[^.]+",
    r"\w+\.\w+",
    r"(?P<kind>orders|payments)\..+",
]


@pytest.mark.parametrize("pattern", ORDINARY)
def test_ordinary_patterns_match_what_python_re_matched(pattern: str) -> None:
    topics = dict.fromkeys(NAMES, 1)
    expected = {name for name in NAMES if not name.startswith("__") and re.fullmatch(pattern, name)}
    assert resolve((), pattern, topics) == expected


def test_a_refused_pattern_already_in_the_log_matches_nothing() -> None:
    # A release that compiled with Python's re accepted lookarounds; replaying such a member
    # must not fail the coordinator: its pattern resolves to no topic.
    assert resolve(["audit"], "(?=orders)orders.*", {"orders": 1, "audit": 1}) == {"audit"}


def coordinator_accepts(pattern: str) -> bool:
    request = c.ConsumerGroupHeartbeatRequest(
        group_id="g",
        member_id="m",
        member_epoch=0,
        rebalance_timeout_ms=1000,
        subscription=c.ConsumerGroupSubscription(topic_regex=pattern),
    )
    return validate(request) is None


def client_accepts(pattern: str) -> bool:
    try:
        subscription_of((), pattern)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize(
    "pattern", [*REFUSED, *ORDINARY, "", "x" * TOPIC_REGEX_LENGTH_MAX, "x" * 256, "a{1001}"]
)
def test_the_sdk_accepts_exactly_what_the_coordinator_accepts(pattern: str) -> None:
    assert client_accepts(pattern) == coordinator_accepts(pattern)
