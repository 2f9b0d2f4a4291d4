"""The producer's aio channels carry the OpenTelemetry interceptor only when the application set a
tracer provider. Each case runs in a fresh interpreter: OTel's global provider can be set once."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import asyncio
from samsa.client.channels import AioChannels

async def interceptors():
    channels = AioChannels()
    channel = channels.get("127.0.0.1:1")
    found = channel._unary_unary_interceptors + channel._stream_stream_interceptors
    await channels.close()
    return len(found)

{setup}
print(asyncio.run(interceptors()))
"""

SET_PROVIDER = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
trace.set_tracer_provider(TracerProvider())
"""


def _interceptor_count(setup: str) -> int:
    result = subprocess.run(
        [sys.executable, "-c", PROBE.format(setup=setup)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return int(result.stdout.strip().splitlines()[-1])


def test_no_interceptor_without_a_tracer_provider() -> None:
    assert _interceptor_count("") == 0


def test_traced_once_the_application_set_a_tracer_provider() -> None:
    assert _interceptor_count(SET_PROVIDER) > 0
