"""A server interceptor that wraps each method's handler once, and serves the wrapped twin from
then on: the RPC guard (server.py) and the RPC metrics (metrics.py) are both such wrappers, so an
RPC costs them a dict lookup, not a rebuilt handler."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

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
