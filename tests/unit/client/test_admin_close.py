"""Goal: Admin.close() leaves nothing open: a call made after it, or one still retrying when it
came, ends with an error saying the client is closed instead of opening channels nobody will
close (or retrying until request.timeout.ms).

Method: Admins whose bootstrap server refuses connections (127.0.0.1:1, nothing listens, so every
call retries until request.timeout.ms); a call on another thread is closed under.
"""

from __future__ import annotations

import threading
import time

import pytest
from admin_call_kinds import each_kind_of_admin_call

from samsa.client.admin import Admin
from samsa.client.errors import KafkaError
from samsa.common.errors import ErrorCode

REFUSED = "127.0.0.1:1"


def refused_admin() -> Admin:
    return Admin({"bootstrap.servers": REFUSED, "request.timeout.ms": 20_000})


@each_kind_of_admin_call
def test_a_call_after_close_is_refused_at_once(call) -> None:  # type: ignore[no-untyped-def]
    admin = refused_admin()
    admin.close()
    started = time.monotonic()
    with pytest.raises(KafkaError, match="closed") as raised:
        call(admin)
    assert time.monotonic() - started < 1.0, "refused, not retried until request.timeout.ms"
    assert raised.value.code == ErrorCode.INVALID_REQUEST
    assert not raised.value.retriable


@pytest.mark.parametrize(
    "call",
    [
        lambda admin: admin.list_topics(),
        lambda admin: admin.create_topic("t", 1, 1),
        lambda admin: admin.list_consumer_groups(),
    ],
    ids=["read", "write", "listing"],
)
def test_close_ends_a_call_that_is_retrying(call) -> None:  # type: ignore[no-untyped-def]
    admin = refused_admin()
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            call(admin)
        except BaseException as error:  # handed to the test's thread
            outcome.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(0.5)  # the call is retrying the refused server
    closed_at = time.monotonic()
    admin.close()
    thread.join(5.0)
    assert not thread.is_alive(), "the call went on retrying after close()"
    assert time.monotonic() - closed_at < 2.0
    assert len(outcome) == 1 and isinstance(outcome[0], KafkaError)
    assert "closed" in str(outcome[0])
    assert admin._channels._channels == {}, "no channel opened after close()"
