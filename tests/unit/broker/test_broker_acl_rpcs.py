"""Goal: a broker serves the ACL RPCs as a controller would (KIP-590), so that `samsa acls` and
Admin's ACL calls work through any bootstrap server: CreateAcls and DeleteAcls are forwarded to
the active controller, and so is DescribeAcls (whether authorization is on, and so whether the
answer is SECURITY_DISABLED, is the controllers' to say); each answer is answered as it came.
A request naming more bindings than a request may carry is refused at the broker.

Method: the real BrokerMetadataServicer over the stand-in channel of
test_broker_metadata_servicer.py.
"""

from __future__ import annotations

import grpc
import pytest
from test_broker_metadata_servicer import Aborted, FakeChannel, FakeContext, run, servicer

from samsa.common import limits
from samsa.v1 import controller_pb2 as c
from samsa.v1 import metadata_pb2 as m

BINDING = c.AclBinding(
    resource_type=m.ACL_RESOURCE_TYPE_TOPIC,
    resource_name="orders",
    pattern_type=m.ACL_PATTERN_TYPE_LITERAL,
    principal="User:alice",
    host="*",
    operation=m.ACL_OPERATION_READ,
    permission=m.ACL_PERMISSION_ALLOW,
)


@pytest.mark.parametrize(
    ("method", "request_", "answer"),
    [
        ("CreateAcls", c.CreateAclsRequest(creations=[BINDING]), c.CreateAclsResponse()),
        (
            "DeleteAcls",
            c.DeleteAclsRequest(filters=[c.AclBindingFilter(resource_name="orders")]),
            c.DeleteAclsResponse(),
        ),
        ("DescribeAcls", c.DescribeAclsRequest(), c.DescribeAclsResponse()),
    ],
)
def test_acl_calls_are_forwarded_and_the_answer_answered(
    method: str, request_: object, answer: object
) -> None:
    answer.status.metadata_offset = 42  # type: ignore[attr-defined]
    channel = FakeChannel(answer=answer)
    got = run(getattr(servicer(channel=channel), method)(request_, FakeContext(3.0)))
    assert got is answer
    assert [(forwarded, sent) for forwarded, sent, _ in channel.forwarded] == [(method, request_)]


def test_too_many_bindings_are_refused_before_forwarding() -> None:
    channel = FakeChannel(answer=c.CreateAclsResponse())
    request = c.CreateAclsRequest(creations=[BINDING] * (limits.admin_request_items_max + 1))
    with pytest.raises(Aborted) as refused:
        run(servicer(channel=channel).CreateAcls(request, FakeContext(3.0)))
    assert refused.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert channel.forwarded == []
