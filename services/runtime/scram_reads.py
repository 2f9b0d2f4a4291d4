"""DescribeUserScramCredentials (KIP-554) from a metadata image: which users have SCRAM
credentials, for which mechanisms and iterations, never a key or a salt. Controllers and brokers
answer it alike, each from its own replica of the metadata log (like metadata_reads.py's reads).

Named users are answered in the request's order, each once: RESOURCE_NOT_FOUND for one without any
credential, DUPLICATE_RESOURCE for one named twice (as Kafka answers). No user named: every user
that has a credential, by name. The servers refuse a request naming more than
limits.admin_request_items_max users whole (RESOURCE_EXHAUSTED). Pure: no I/O.
"""

from __future__ import annotations

from samsa.common import scram
from samsa.common.errors import ErrorCode
from samsa.metadata.scram_credentials import ScramCredentials
from samsa.v1 import controller_pb2 as c


def describe_user_scram_credentials(
    credentials: ScramCredentials, request: c.DescribeUserScramCredentialsRequest
) -> c.DescribeUserScramCredentialsResponse:
    """The answer, from an image's credentials (see the module doc)."""
    by_user: dict[str, list[scram.ScramCredential]] = {}
    for (name, _), credential in sorted(credentials.items()):
        by_user.setdefault(name, []).append(credential)
    response = c.DescribeUserScramCredentialsResponse()
    named: dict[str, int] = {}
    for name in request.users:
        named[name] = named.get(name, 0) + 1
    for name in named if request.users else sorted(by_user):
        result = response.results.add(name=name)
        if named.get(name, 0) > 1:
            result.error_code = ErrorCode.DUPLICATE_RESOURCE  # type: ignore[assignment]
            result.error_message = f"user {name!r} is named twice; name each user once"
        elif name not in by_user:
            result.error_code = ErrorCode.RESOURCE_NOT_FOUND  # type: ignore[assignment]
            result.error_message = f"user {name!r} has no SCRAM credential"
        else:
            for credential in by_user[name]:
                result.credentials.add(
                    mechanism=credential.mechanism.number,  # type: ignore[arg-type]
                    iterations=credential.iterations,
                )
    return response
