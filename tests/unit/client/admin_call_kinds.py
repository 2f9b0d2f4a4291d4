"""One Admin call of each path a call takes (a metadata read, a controller write, a group
coordinator call, a listing asked of every broker), for tests of what must hold on every path:
`@each_kind_of_admin_call` gives the test a `call` taking the Admin."""

from __future__ import annotations

import pytest

each_kind_of_admin_call = pytest.mark.parametrize(
    "call",
    [
        lambda admin: admin.list_topics(),
        lambda admin: admin.create_topic("t", 1, 1),
        lambda admin: admin.describe_consumer_groups(["g"]),
        lambda admin: admin.list_transactions(),
    ],
    ids=["read", "write", "group", "listing"],
)
