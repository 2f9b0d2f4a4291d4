"""Admin's SCRAM credential methods (confluent-kafka's alter_user_scram_credentials and
describe_user_scram_credentials, KIP-554): a base class of Admin (admin.py), so that admin.py
keeps to topics, partitions, the cluster and quotas. scram_admin.py is the pure half; this draws
the salts and `self._controller` (controller_calls.py) carries the calls: the write to the active
controller (through a broker, which forwards it), the read at or after this client's last write.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable

from samsa.client import scram_admin
from samsa.client.controller_calls import ControllerCalls
from samsa.client.errors import KafkaError
from samsa.client.scram_admin import Alteration, ScramCredentialInfo
from samsa.common import scram


class ScramAdmin:
    """Admin's SCRAM credential methods."""

    _controller: ControllerCalls

    def alter_user_scram_credentials(
        self, alterations: Iterable[Alteration]
    ) -> dict[str, KafkaError | None]:
        """Set (UserScramCredentialUpsertion) or delete (UserScramCredentialDeletion) users'
        SCRAM credentials: per user, None once all of its changes applied, or the KafkaError
        that refused them all (UNACCEPTABLE_CREDENTIAL, UNSUPPORTED_SASL_MECHANISM,
        RESOURCE_NOT_FOUND for deleting a credential that does not exist, DUPLICATE_RESOURCE for
        a (user, mechanism) named twice); the other users' changes apply. The password is salted
        here (a random 32-byte salt unless the upsertion gives one) and never sent. ValueError,
        nothing sent, for an unknown mechanism or iterations out of 4096..16384."""
        request = scram_admin.alter_request(
            alterations, lambda: secrets.token_bytes(scram.SALT_BYTES_DEFAULT)
        )
        if not request.deletions and not request.upsertions:
            return {}
        answer = self._controller.write("AlterUserScramCredentials", request)
        return scram_admin.altered(answer)

    def describe_user_scram_credentials(
        self, users: Iterable[str] | None = None
    ) -> dict[str, list[ScramCredentialInfo]]:
        """Each user's SCRAM credentials (mechanism and iterations; never a key): every user
        that has one (None), or the users named, in order, a user without any credential with
        an empty list."""
        if users is not None:
            users = list(users)
            if not users:
                return {}
        request = scram_admin.describe_request(users, self._controller.metadata_offset)
        answer = self._controller.read("DescribeUserScramCredentials", request)
        return scram_admin.described(answer)
