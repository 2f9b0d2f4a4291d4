"""Which spans a service records: OpenTelemetry's standard sampler variables, minus quiet roots.

`sampler_from_env` reads OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG with the SDK's meanings
(default parentbased_always_on; parentbased_traceidratio with 0.01 keeps 1 % of new traces and
follows the caller's decision for the rest). `QuietRootSampler` wraps it: a heartbeat, metadata
poll, long-poll fetch or health check (common/quiet_rpcs.py) that starts a trace of its own is
dropped, since every process makes several a second and they would bury everything else; one
whose caller is tracing still follows the caller. Pure: the environment is passed in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    Decision,
    ParentBased,
    Sampler,
    SamplingResult,
    TraceIdRatioBased,
)
from opentelemetry.trace import Link, SpanKind
from opentelemetry.util.types import Attributes

from samsa.common.quiet_rpcs import is_quiet

SAMPLER_VARIABLE = "OTEL_TRACES_SAMPLER"
SAMPLER_ARG_VARIABLE = "OTEL_TRACES_SAMPLER_ARG"
SAMPLER_NAMES = (
    "always_on",
    "always_off",
    "traceidratio",
    "parentbased_always_on",
    "parentbased_always_off",
    "parentbased_traceidratio",
)


class SamplerConfigError(ValueError):
    """OTEL_TRACES_SAMPLER or its argument is not one Samsa understands."""


def sampler_from_env(env: Mapping[str, str]) -> Sampler:
    """The sampler OTEL_TRACES_SAMPLER(_ARG) name, wrapped in QuietRootSampler."""
    name = env.get(SAMPLER_VARIABLE, "").strip().lower() or "parentbased_always_on"
    if name not in SAMPLER_NAMES:
        raise SamplerConfigError(
            f"{SAMPLER_VARIABLE}={name!r}: Samsa supports {', '.join(SAMPLER_NAMES)}"
        )
    inner: Sampler
    if name.endswith("always_on"):
        inner = ALWAYS_ON
    elif name.endswith("always_off"):
        inner = ALWAYS_OFF
    else:
        inner = TraceIdRatioBased(_ratio(env.get(SAMPLER_ARG_VARIABLE, "")))
    return QuietRootSampler(ParentBased(inner) if name.startswith("parentbased_") else inner)


def _ratio(text: str) -> float:
    if not text.strip():
        return 1.0  # the SDK's default when the argument is missing
    try:
        ratio = float(text)
    except ValueError:
        ratio = -1.0
    if not 0.0 <= ratio <= 1.0:
        raise SamplerConfigError(f"{SAMPLER_ARG_VARIABLE}={text!r}: a ratio from 0.0 to 1.0")
    return ratio


class QuietRootSampler(Sampler):
    """`inner`, except that a quiet RPC's span with no parent is dropped (see the module doc)."""

    def __init__(self, inner: Sampler) -> None:
        self.inner = inner

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: trace.TraceState | None = None,
    ) -> SamplingResult:
        if is_quiet(name):
            parent = trace.get_current_span(parent_context).get_span_context()
            if not parent.is_valid:
                return SamplingResult(Decision.DROP)
        return self.inner.should_sample(
            parent_context, trace_id, name, kind, attributes, links, trace_state
        )

    def get_description(self) -> str:
        return f"QuietRootSampler{{{self.inner.get_description()}}}"
