"""Topic regexes of consumer subscriptions: RE2 syntax, matched in time linear in the name.

A member may subscribe with a regular expression instead of topic names (KIP-848's
`subscribed_topic_regex`). The coordinator matches it against every topic name on its single
event loop, so a pattern must never be able to stall it: Python's `re` backtracks, and `(a*)*b`
against a long name of a's runs for minutes. Kafka compiles these patterns with RE2/J; we use
Google's RE2 (the `google-re2` package), whose automata match in time linear in the text and which
refuses what would need backtracking (backreferences, lookaround, possessive quantifiers).

One module for both sides: the coordinator (services/coordinator/group_assignment.py) and the
Python SDK's `subscribe(pattern=...)` check a pattern with `pattern_error`, so the client accepts
exactly what the coordinator accepts. A pattern matches a whole topic name (`fullmatch`, as Kafka).

Cost: compiling is bounded by the length limit and RE2's memory budget (8 MiB per pattern, its
default); compiled patterns are cached by the re2 module (its LRU of 128).
"""

from __future__ import annotations

from collections.abc import Callable

import re2

# The longest topic regex accepted: it is compiled and matched against every topic name.
TOPIC_REGEX_LENGTH_MAX = 255

# Where a person finds what the syntax allows.
RE2_SYNTAX_URL = "https://github.com/google/re2/wiki/Syntax"

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is the client's error, not a line in our log


def pattern_error(pattern: str) -> str | None:
    """Why RE2 refuses the pattern (in words that say RE2 syntax is expected), or None."""
    try:
        re2.compile(pattern, _OPTIONS)
    except re2.error as error:
        reason = error.args[0] if error.args else ""
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        return (
            f"{reason}; topic regexes use RE2 syntax, as Kafka's (RE2/J): no backreferences "
            f"or lookaround, see {RE2_SYNTAX_URL}"
        )
    return None


def matcher(pattern: str) -> Callable[[str], bool]:
    """A test for "this topic name matches the whole pattern". A pattern RE2 refuses matches
    nothing: heartbeats refuse such patterns, but a group's log may hold one accepted by a
    release that compiled them with Python's `re` (a lookahead, `\\Z`), and replaying it must
    not fail the coordinator."""
    try:
        compiled = re2.compile(pattern, _OPTIONS)
    except re2.error:
        return lambda name: False
    return lambda name: compiled.fullmatch(name) is not None
