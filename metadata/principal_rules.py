"""`ssl.principal.mapping.rules` (KIP-371): from a client certificate's subject DN to a principal.

Theory of operation. The setting is a comma-separated list of rules, each `DEFAULT` (the whole
DN) or `RULE:pattern/replacement/` with an optional `L` or `U` suffix (lower- or upper-case the
result). A `/` or `\\` inside the pattern or replacement is escaped with `\\`. The first rule
whose pattern matches the whole DN gives the name: the replacement with `$1`-style references
replaced by the pattern's groups (`\\$` is a literal dollar). A DN no rule matches is refused,
as Kafka fails such a TLS authentication; an empty setting is `DEFAULT`. Rules are split on the
commas followed by `RULE:` or `DEFAULT`, so a pattern may hold other commas (`CN=(.*),O=x`).
Patterns are Python regexes (the common Java syntax is the same), each at most
limits.acl_principal_rule_chars_max long. Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from samsa.common import limits

DEFAULT = "DEFAULT"
USER_PREFIX = "User:"

_SPLIT = re.compile(r",\s*(?=RULE:|DEFAULT)")
# RULE:pattern/replacement/[LU]; in both parts `\x` is an escape and `/` ends the part.
_RULE = re.compile(r"RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?)", re.DOTALL)
_REFERENCE = re.compile(r"\\(.)|\$(\d+)", re.DOTALL)


class NoMatchingRuleError(ValueError):
    """No rule of the setting matches a certificate's DN: the call is refused, as in Kafka."""


@dataclass(frozen=True)
class _Rule:
    text: str
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str
    case: str  # "", "L" or "U"

    def apply(self, subject_dn: str) -> str | None:
        if self.pattern is None:
            return subject_dn
        match = self.pattern.fullmatch(subject_dn)
        if match is None:
            return None

        def substitute(reference: re.Match[str]) -> str:
            if reference.group(1) is not None:  # an escaped character stands for itself
                return reference.group(1)
            return match.group(int(reference.group(2))) or ""  # a group that took no part: ""

        name = _REFERENCE.sub(substitute, self.replacement)
        if self.case == "L":
            return name.lower()
        if self.case == "U":
            return name.upper()
        return name


def _parse_rule(text: str) -> _Rule:
    if text == DEFAULT:
        return _Rule(text, None, "", "")
    if len(text) > limits.acl_principal_rule_chars_max:
        raise ValueError(
            f"ssl.principal.mapping.rules: rule {text[:40]!r}... is {len(text)} characters, "
            f"over {limits.acl_principal_rule_chars_max}; shorten its pattern"
        )
    parsed = _RULE.fullmatch(text)
    if parsed is None:
        raise ValueError(
            f"ssl.principal.mapping.rules: {text!r} is not a rule: write DEFAULT or "
            "RULE:pattern/replacement/ with an optional L or U after the last /"
        )
    source, replacement, case = parsed.groups()
    try:
        pattern = re.compile(source)
    except re.error as error:
        raise ValueError(
            f"ssl.principal.mapping.rules: in {text!r}, bad pattern: {error}"
        ) from None
    for reference in _REFERENCE.finditer(replacement):
        if reference.group(2) is not None and int(reference.group(2)) > pattern.groups:
            raise ValueError(
                f"ssl.principal.mapping.rules: in {text!r}, ${reference.group(2)} names a group "
                f"the pattern does not have (it has {pattern.groups})"
            )
    return _Rule(text, pattern, replacement, case)


class PrincipalRules:
    """Parsed `ssl.principal.mapping.rules`."""

    __slots__ = ("_rules",)

    def __init__(self, rules: tuple[_Rule, ...]) -> None:
        self._rules = rules

    @staticmethod
    def parse(text: str) -> PrincipalRules:
        """Parse the setting; ValueError with a message naming the bad rule."""
        text = text.strip()
        if not text:
            return PrincipalRules((_parse_rule(DEFAULT),))
        return PrincipalRules(tuple(_parse_rule(part.strip()) for part in _SPLIT.split(text)))

    def principal(self, subject_dn: str) -> str:
        """ "User:" + the name the first matching rule gives `subject_dn`.

        NoMatchingRuleError (a ValueError) when no rule matches and the setting has no DEFAULT.
        """
        for rule in self._rules:
            name = rule.apply(subject_dn)
            if name is not None:
                return USER_PREFIX + name
        rules = ", ".join(rule.text for rule in self._rules)
        raise NoMatchingRuleError(
            f"no rule of ssl.principal.mapping.rules ({rules}) matches the certificate's subject "
            f"{subject_dn!r}: add one that does, or end the rules with DEFAULT"
        )

    def __repr__(self) -> str:
        return f"PrincipalRules({', '.join(rule.text for rule in self._rules)})"
