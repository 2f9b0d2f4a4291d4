"""A server interceptor that wraps each method's handler once, and serves the wrapped twin from
then on: the RPC guard (server.py) and the RPC metrics (metrics.py) are both such wrappers, so an
RPC costs them a dict lookup, not a rebuilt handler."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc


class WrappingInterceptor(grpc.aio.ServerInterceptor):
    """Subclasses say how to wrap one method's handler (`wrap_handler`)."""

    def __init__(self) -> None:
        # method -> (the handler grpc found, its wrapped twin). Only methods a service serves get
        # here (an unknown method has no handler), so this holds one entry per served method.
        self._wrapped: dict[str, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method
        cached = self._wrapped.get(method)
        if cached is not None and cached[0] is handler:
            return cached[1]
        wrapped = self.wrap_handler(handler, method)
        self._wrapped[method] = (handler, wrapped)
        return wrapped

    def wrap_handler(self, handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
        raise NotImplementedError


def behaviour_of(handler: grpc.RpcMethodHandler) -> Callable[..., Any]:
    """The servicer's function a handler calls, whichever of the four kinds it is."""
    if handler.request_streaming:
        return handler.stream_stream if handler.response_streaming else handler.stream_unary
    return handler.unary_stream if handler.response_streaming else handler.unary_unary


def rebuilt(
    handler: grpc.RpcMethodHandler,
    behaviour: Callable[..., Any],
    request_deserializer: Callable[[bytes], Any] | None = None,
) -> grpc.RpcMethodHandler:
    """A handler of `handler`'s kind calling `behaviour`, with `handler`'s serializers (or the
    request deserializer given)."""
    build = {
        (False, False): grpc.unary_unary_rpc_method_handler,
        (False, True): grpc.unary_stream_rpc_method_handler,
        (True, False): grpc.stream_unary_rpc_method_handler,
        (True, True): grpc.stream_stream_rpc_method_handler,
    }[(handler.request_streaming, handler.response_streaming)]
    return build(
        behaviour,
        request_deserializer=request_deserializer or handler.request_deserializer,
        response_serializer=handler.response_serializer,
    )
