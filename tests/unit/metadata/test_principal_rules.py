"""Goal: `PrincipalRules` maps a certificate's subject DN to a principal as KIP-371 describes:
first matching rule wins, `$n` references, L/U suffixes, DEFAULT, commas inside a pattern, escaped
slashes; an unmatched DN is refused with what to do; a bad rule is named when parsed, including
one over limits.acl_principal_rule_chars_max.

Method: the rules of Kafka's documentation and a few of our own, applied to fixed DNs.
"""

from __future__ import annotations

import pytest

from samsa.common import limits
from samsa.metadata.principal_rules import NoMatchingRuleError, PrincipalRules

KAFKA_EXAMPLE = (
    r"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
    r"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
    r"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,"
    "DEFAULT"
)


@pytest.mark.parametrize(
    ("dn", "principal"),
    [
        ("CN=kafka1,OU=ServiceUsers,O=Org,C=US", "User:kafka1"),
        ("CN=Adam,OU=Sales,O=Org,L=Town,ST=State,C=US", "User:adam@sales"),
        ("OU=x,cn=Bob.Smith,O=y", "User:bob.smith"),
        ("O=no-common-name", "User:O=no-common-name"),
    ],
)
def test_kafka_documentation_example(dn: str, principal: str) -> None:
    assert PrincipalRules.parse(KAFKA_EXAMPLE).principal(dn) == principal


def test_default_and_empty_setting_keep_the_whole_dn() -> None:
    for text in ("", "  ", "DEFAULT"):
        assert PrincipalRules.parse(text).principal("CN=alice,O=samsa") == "User:CN=alice,O=samsa"


def test_first_match_wins_and_suffixes_change_case() -> None:
    rules = PrincipalRules.parse("RULE:CN=([^,]*),.*/$1/U, RULE:CN=(.*)/$1/, DEFAULT")
    assert rules.principal("CN=alice,O=samsa") == "User:ALICE"
    assert rules.principal("CN=Bob") == "User:Bob"
    assert rules.principal("O=samsa") == "User:O=samsa"


def test_commas_inside_a_pattern_and_whitespace_between_rules() -> None:
    rules = PrincipalRules.parse("RULE:CN=(.*),O=samsa/$1/,\n  RULE:CN=(.*),O=(.*)/$2-$1/")
    assert rules.principal("CN=alice,O=samsa") == "User:alice"
    assert rules.principal("CN=alice,O=other") == "User:other-alice"


def test_escapes_in_pattern_and_replacement() -> None:
    rules = PrincipalRules.parse(r"RULE:CN=(.*)\/(.*)/$1\/$2\$/")
    assert rules.principal("CN=a/b") == "User:a/b$"


def test_the_pattern_must_match_the_whole_dn() -> None:
    rules = PrincipalRules.parse("RULE:CN=alice/admin/")
    assert rules.principal("CN=alice") == "User:admin"
    with pytest.raises(NoMatchingRuleError, match="end the rules with DEFAULT"):
        rules.principal("CN=alice,O=samsa")


def test_an_unused_optional_group_is_empty() -> None:
    rules = PrincipalRules.parse("RULE:CN=([^,]*)(,O=(.*))?/$1@$3/")
    assert rules.principal("CN=bob") == "User:bob@"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("RULE:CN=(.*)/$1", "'RULE:CN=\\(.\\*\\)/\\$1' is not a rule: write DEFAULT or RULE:"),
        ("RULE:CN=(.*)/$1/X", "is not a rule"),
        ("DEFAULT, RULE:bad", "'RULE:bad' is not a rule"),
        ("USER:alice", "'USER:alice' is not a rule"),
        ("RULE:CN=(.*/$1/", "bad pattern: missing \\)"),
        ("RULE:CN=(.*)/$2/", "\\$2 names a group the pattern does not have \\(it has 1\\)"),
    ],
)
def test_bad_rules_are_named(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PrincipalRules.parse(text)


def test_rules_are_bounded() -> None:
    fits = "RULE:" + "a" * (limits.acl_principal_rule_chars_max - 9) + "/b/"
    assert len(fits) <= limits.acl_principal_rule_chars_max
    PrincipalRules.parse(fits)
    with pytest.raises(ValueError, match="characters, over"):
        PrincipalRules.parse("RULE:" + "a" * limits.acl_principal_rule_chars_max + "/b/")
