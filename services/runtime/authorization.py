"""ACL enforcement on a gRPC server: who calls (the principal), and the interceptor that decides.

Theory of operation. With `authorizer.class.name` set, every listener of the process gets an
`AuthorizingInterceptor` (innermost, inside the RPC guard). It wraps each method's handler once
(WrappingInterceptor) so that, before the servicer runs:
1. a call carrying a valid membership proof (membership.verify_any, ~5 µs: the same check the
   servicers make) is the cluster itself and is not subject to ACLs. A broker forwarding an
   admin write to the controller signs it (controller_channel.py), so that hop is not checked
   against the broker's own principal: the decision was made on the hop that saw the client's
   certificate, by the broker's own interceptor;
2. otherwise the principal is read from the call (`principal_of`: its SASL user when the SASL
   gate admitted it with a ticket, else the TLS session's client certificate's subject through
   ssl.principal.mapping.rules, or User:ANONYMOUS) and the host
   from the peer address, and the method's requirement (access_rules.py, pure) is decided
   against the process's current ACLs (`acls()`, its metadata image's). A refusal answers
   PERMISSION_DENIED with a message naming the principal, the operation, the resource and the
   command that would grant it. Produce and Fetch decide their topics in the handler instead
   (their rule is "anyone" but for the cluster's own parts), which answers a refused topic's
   partitions TOPIC_AUTHORIZATION_FAILED and serves the others, as Kafka does (caller.py).
For request streams, the principal is read once per call (a stream is one connection's) and
each message is decided as it is read; a refused message ends the call through the guard's
path for a bad message (UndecodableRequestError, with PERMISSION_DENIED), raised in whichever
task reads the stream and aborted from the handler's own.

Around the servicer's call, the wrapper sets caller.CALLER to an `AclCaller` for the call, so
that the handlers of listing calls (whose rule is "anyone") can filter what they answer by what
the caller may DESCRIBE, and Produce and Fetch answer per topic (caller.py). It computes nothing
until a handler asks; the ACLs are read at each question, so that a long stream sees them change.

With authorization off there is no interceptor at all: zero cost.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import grpc

from samsa.metadata.acls import (
    ANONYMOUS,
    Acls,
    AuthorizerSettings,
    Operation,
    ResourceType,
    authorize,
)
from samsa.metadata.principal_rules import PrincipalRules
from samsa.services.runtime import access_rules, membership
from samsa.services.runtime.caller import CALLER
from samsa.services.runtime.member_auth import proof_in
from samsa.services.runtime.request_iterators import close_requests
from samsa.services.runtime.sasl_gate import SASL_PRINCIPAL
from samsa.services.runtime.server import UndecodableRequestError
from samsa.services.runtime.service_config import ServiceConfig
from samsa.services.runtime.session_access import SessionGrant
from samsa.services.runtime.wrapping_interceptor import WrappingInterceptor, behaviour_of, rebuilt


def principal_of(context: grpc.aio.ServicerContext, rules: PrincipalRules) -> str:
    """The caller's principal: its SASL user (User:<name>, set by the SASL gate for the call,
    sasl_gate.py) ahead of anything else; else its TLS client certificate's subject mapped by
    `rules`, or User:ANONYMOUS (plaintext, or TLS without a client certificate)."""
    sasl_principal = SASL_PRINCIPAL.get()
    if sasl_principal is not None:
        return sasl_principal
    subjects = (context.auth_context() or {}).get("x509_subject")
    if not subjects:
        return ANONYMOUS
    subject = subjects[0]
    return rules.principal(subject.decode("utf-8") if isinstance(subject, bytes) else subject)


def host_of(peer: str | None) -> str:
    """The peer's IP from grpc's peer string ("ipv4:127.0.0.1:5555", "ipv6:[::1]:5555"); ""
    for anything else (a unix socket), which only host `*` ACLs match."""
    if not peer:
        return ""
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        return rest.rpartition(":")[0]
    if kind == "ipv6":
        return rest.rpartition(":")[0].strip("[]")
    return ""


async def _principal(context: grpc.aio.ServicerContext, rules: PrincipalRules) -> str:
    """principal_of, or UNAUTHENTICATED when no mapping rule fits the certificate (as Kafka
    fails such a client's authentication rather than guess a name)."""
    try:
        return principal_of(context, rules)
    except ValueError as error:
        refused = access_rules.members_only_refusal(str(error))
        await context.abort(
            grpc.StatusCode.UNAUTHENTICATED, str(refused), refused.trailing_metadata
        )
        raise  # abort raises; this is for the type checker


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class Authorization:
    """One process's authorizer: its settings, and where its ACLs and topic names come from."""

    settings: AuthorizerSettings
    rules: PrincipalRules
    acls: Callable[[], Acls]
    member_key: bytes
    topic_name: access_rules.TopicNames = lambda _topic_id: None

    def is_member(self, context: grpc.aio.ServicerContext, method: str) -> bool:
        """Whether the call carries a valid membership proof for `method`."""
        proof = proof_in(context)
        if proof is None:
            return False
        return membership.verify_any(self.member_key, proof, method, _now_ms()) is None

    def refusal(
        self, method: str, request: Any, principal: str, host: str
    ) -> access_rules.Refusal | None:
        """Why `principal` at `host` may not make this call (with the code and resource sent as
        trailing metadata); None when it may."""
        requirement = access_rules.requirement(method, request, self.topic_name)
        if requirement.members_only is not None:
            return access_rules.members_only_refusal(
                f"{principal} may not call {method.rpartition('/')[2]}: "
                f"{requirement.members_only} (only calls with the cluster's membership proof)"
            )
        if not requirement.needs:
            return None
        acls = self.acls()

        def allowed(access: access_rules.Access) -> bool:
            if access.name == access_rules.ANY_NAME:
                return access_rules.allowed_on_some(
                    acls, self.settings, principal, host, access.operation, access.resource_type
                )
            return authorize(
                acls,
                self.settings,
                principal,
                host,
                access.operation,
                access.resource_type,
                access.name,
            )

        need = access_rules.first_unmet(requirement, allowed)
        if need is not None:
            return access_rules.refusal(principal, need)
        return None


class AclCaller:
    """The caller of one call, for its handler (caller.Caller): a member's call may do
    anything, anyone else what the process's ACLs allow its principal at its host. Lazy: the
    membership proof, the principal and the ACLs are read at the first question, once."""

    def __init__(
        self, authorization: Authorization, context: grpc.aio.ServicerContext, method: str
    ) -> None:
        self._authorization, self._context, self._method = authorization, context, method
        self._who: tuple[str, str] | None = None
        self._member: bool | None = None

    def may(self, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        authorization = self._authorization
        if self._member is None:
            self._member = authorization.is_member(self._context, self._method)
        if self._member:
            return True
        principal, host = self._who_calls()
        return authorize(
            authorization.acls(),
            authorization.settings,
            principal,
            host,
            operation,
            resource_type,
            name,
        )

    def principal(self) -> str:
        return self._who_calls()[0]

    def grant(self) -> SessionGrant:
        principal, host = self._who_calls()
        return SessionGrant(self._authorization.acls(), principal, host)

    def _who_calls(self) -> tuple[str, str]:
        if self._who is None:
            # The interceptor has already answered UNAUTHENTICATED where this raises.
            principal = principal_of(self._context, self._authorization.rules)
            self._who = (principal, host_of(self._context.peer()))
        return self._who


@dataclass(frozen=True)
class AuthorizerConfig:
    """A process's authorizer settings, from its config; `authorization` binds them to where
    its ACLs come from (its metadata image)."""

    settings: AuthorizerSettings
    rules: PrincipalRules

    @staticmethod
    def of(config: ServiceConfig) -> AuthorizerConfig | None:
        """None when authorizer.class.name is off."""
        if not config.authorizer_enabled:
            return None
        settings = AuthorizerSettings(
            super_users=config.super_users, allow_if_no_acl=config.allow_everyone_if_no_acl_found
        )
        return AuthorizerConfig(settings, config.ssl_principal_mapping_rules)

    def authorization(
        self,
        member_key: bytes,
        acls: Callable[[], Acls],
        topic_name: access_rules.TopicNames = lambda _topic_id: None,
    ) -> Authorization:
        return Authorization(self.settings, self.rules, acls, member_key, topic_name)


class AccessDeniedError(UndecodableRequestError):
    """A stream's message refused: the guard (server.py) aborts with PERMISSION_DENIED from the
    handler's task, with the refusal's code and resource as trailing metadata."""

    def __init__(self, message: str) -> None:
        trailing = message.trailing_metadata if isinstance(message, access_rules.Refusal) else ()
        super().__init__(str(message), grpc.StatusCode.PERMISSION_DENIED, trailing)


Behaviour = Callable[[Any, grpc.aio.ServicerContext], Any]


class AuthorizingInterceptor(WrappingInterceptor):
    """Decides each call (each message of a request stream) before the servicer sees it."""

    def __init__(self, authorization: Authorization) -> None:
        super().__init__()
        self.authorization = authorization

    def wrap_handler(self, handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
        wrapped = self._wrap(behaviour_of(handler), method, handler.request_streaming)
        return handler if wrapped is None else rebuilt(handler, wrapped)

    def _wrap(self, behaviour: Behaviour, method: str, streaming_in: bool) -> Behaviour | None:
        admitted = self._admitted_stream if streaming_in else self._admitted_request
        if inspect.isasyncgenfunction(behaviour):

            async def stream_out(request: Any, context: grpc.aio.ServicerContext) -> Any:
                request = await admitted(request, context, method)
                self._set_caller(context, method)  # the call's own task: no reset needed
                async for response in behaviour(request, context):
                    yield response

            return stream_out
        if inspect.iscoroutinefunction(behaviour):

            async def unary_out(request: Any, context: grpc.aio.ServicerContext) -> Any:
                request = await admitted(request, context, method)
                self._set_caller(context, method)  # the call's own task: no reset needed
                return await behaviour(request, context)

            return unary_out
        return None

    def _set_caller(self, context: grpc.aio.ServicerContext, method: str) -> None:
        """Let the servicer ask about its caller (caller.py): listing calls filter by it."""
        CALLER.set(AclCaller(self.authorization, context, method))

    async def _admitted_request(
        self, request: Any, context: grpc.aio.ServicerContext, method: str
    ) -> Any:
        authorization = self.authorization
        if authorization.is_member(context, method):
            return request
        principal = await _principal(context, authorization.rules)
        refusal = authorization.refusal(method, request, principal, host_of(context.peer()))
        if refusal is not None:
            await context.abort(  # grpc takes an exact str
                grpc.StatusCode.PERMISSION_DENIED, str(refusal), refusal.trailing_metadata
            )
        return request

    async def _admitted_stream(
        self, requests: AsyncIterator[Any], context: grpc.aio.ServicerContext, method: str
    ) -> AsyncIterator[Any]:
        authorization = self.authorization
        if authorization.is_member(context, method):
            return requests  # checked once, as the stream opens
        principal = await _principal(context, authorization.rules)
        host = host_of(context.peer())
        return self._decided(requests, method, principal, host)

    async def _decided(
        self, requests: AsyncIterator[Any], method: str, principal: str, host: str
    ) -> AsyncIterator[Any]:
        refusal_of = self.authorization.refusal
        try:
            async for request in requests:
                refusal = refusal_of(method, request, principal, host)
                if refusal is not None:
                    raise AccessDeniedError(refusal)
                yield request
        finally:
            await close_requests(requests)  # closed with this one: request_iterators.py
