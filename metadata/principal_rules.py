"""`ssl.principal.mapping.rules` (KIP-371): from a client certificate's subject DN to a principal.

Theory of operation. The setting is a comma-separated list of rules, `RULE:pattern/replacement/`
with an optional `L` or `U` suffix (lower- or upper-case the result), and `DEFAULT` (the whole
DN). The first rule whose pattern matches the whole DN gives the name; `$1`-style references in
the replacement take the pattern's groups. No rule matching means DEFAULT. Pure: no I/O.
"""

from __future__ import annotations


class PrincipalRules:
    """Parsed `ssl.principal.mapping.rules`."""

    def __init__(self) -> None:
        pass

    @staticmethod
    def parse(text: str) -> PrincipalRules:
        """Parse the setting; ValueError with a message naming the bad rule."""
        return PrincipalRules()

    def principal(self, subject_dn: str) -> str:
        """ "User:" + the name the first matching rule gives `subject_dn`."""
        return "User:" + subject_dn
