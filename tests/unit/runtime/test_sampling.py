"""The services' sampler (runtime/sampling.py): OTEL_TRACES_SAMPLER(_ARG) with the SDK's meanings,
except that a heartbeat, poll or health check never starts a trace of its own, yet follows a
caller that is tracing. Method: call should_sample directly with and without a parent context."""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.sampling import Decision
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from samsa.services.runtime.sampling import SamplerConfigError, sampler_from_env

HEARTBEAT = "/samsa.v1.ControllerService/BrokerHeartbeat"
CREATE_TOPICS = "/samsa.v1.ControllerService/CreateTopics"
TRACE_ID = 0x4BF92F3577B34DA6A3CE929D0E0E4736


def caller(sampled: bool):
    flags = TraceFlags(TraceFlags.SAMPLED if sampled else TraceFlags.DEFAULT)
    context = SpanContext(TRACE_ID, 0x00F067AA0BA902B7, is_remote=True, trace_flags=flags)
    return trace.set_span_in_context(NonRecordingSpan(context))


def decision(env, name, parent=None, trace_id=TRACE_ID):
    return sampler_from_env(env).should_sample(parent, trace_id, name).decision


def test_quiet_rpcs_start_no_trace_but_follow_a_tracing_caller():
    assert decision({}, HEARTBEAT) is Decision.DROP
    assert decision({}, "/grpc.health.v1.Health/Check") is Decision.DROP
    assert decision({}, "/samsa.v1.BrokerService/Fetch") is Decision.DROP
    assert decision({}, HEARTBEAT, caller(sampled=True)) is Decision.RECORD_AND_SAMPLE
    assert decision({}, HEARTBEAT, caller(sampled=False)) is Decision.DROP
    assert decision({}, CREATE_TOPICS) is Decision.RECORD_AND_SAMPLE  # the default: always on


def test_the_ratio_keeps_that_share_of_new_traces_and_follows_callers():
    env = {"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.01"}
    low, high = 1, (1 << 128) - 1  # the ratio samples trace ids below ratio * 2**64 (low bits)
    assert decision(env, CREATE_TOPICS, trace_id=low) is Decision.RECORD_AND_SAMPLE
    assert decision(env, CREATE_TOPICS, trace_id=high) is Decision.DROP
    assert decision(env, CREATE_TOPICS, caller(sampled=True), high) is Decision.RECORD_AND_SAMPLE
    assert decision(env, HEARTBEAT, trace_id=low) is Decision.DROP
    always_off = {"OTEL_TRACES_SAMPLER": "always_off"}
    assert decision(always_off, CREATE_TOPICS, caller(sampled=True)) is Decision.DROP


def test_a_sampler_samsa_does_not_know_is_refused_by_name():
    with pytest.raises(SamplerConfigError, match="OTEL_TRACES_SAMPLER='jaeger_remote'"):
        sampler_from_env({"OTEL_TRACES_SAMPLER": "jaeger_remote"})
    for bad in ("2", "-0.5", "half"):
        env = {"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": bad}
        with pytest.raises(SamplerConfigError, match="OTEL_TRACES_SAMPLER_ARG"):
            sampler_from_env(env)
