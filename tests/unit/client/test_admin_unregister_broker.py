"""Goal: Admin.unregister_broker sends UnregisterBroker for the id asked, raises the
controller's refusal as a KafkaError with its code and message, and refuses an id that is not a
broker id (a bool, a str, out of int32 range) before anything is sent.

Method: the real Admin with its controller stub replaced by a fake that records each request
and refuses by rule (id 9 is not registered, id 2 still holds replicas).
"""

from __future__ import annotations

from typing import Any

import pytest

from samsa.client.admin import Admin
from samsa.client.errors import KafkaError
from samsa.common.errors import ErrorCode
from samsa.v1 import controller_pb2 as c


class FakeController:
    def __init__(self) -> None:
        self.asked: list[c.UnregisterBrokerRequest] = []

    def UnregisterBroker(self, request: Any, timeout: float) -> Any:
        self.asked.append(request)
        answer = c.UnregisterBrokerResponse()
        answer.status.metadata_offset = 40 + len(self.asked)
        if request.broker_id == 9:
            answer.status.error_code = ErrorCode.BROKER_ID_NOT_REGISTERED
            answer.status.error_message = "no broker is registered with id 9"
        elif request.broker_id == 2:
            answer.status.error_code = ErrorCode.INVALID_REQUEST
            answer.status.error_message = "broker 2 still holds replicas of 1 partition(s) (t-0)"
        return answer


@pytest.fixture
def controller() -> FakeController:
    return FakeController()


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch, controller: FakeController) -> Admin:
    admin = Admin({"bootstrap.servers": "127.0.0.1:1", "request.timeout.ms": 2000})
    monkeypatch.setattr(admin._controller._metadata, "stub", lambda endpoint: controller)
    return admin


def test_the_id_asked_is_sent_and_the_write_offset_read_after(
    admin: Admin, controller: FakeController
) -> None:
    admin.unregister_broker(3)
    assert controller.asked == [c.UnregisterBrokerRequest(broker_id=3)]
    assert admin._controller.metadata_offset == 41, "later reads wait for the unregistration"


@pytest.mark.parametrize(
    ("broker_id", "code", "words"),
    [
        (9, ErrorCode.BROKER_ID_NOT_REGISTERED, "no broker is registered with id 9"),
        (2, ErrorCode.INVALID_REQUEST, "still holds replicas"),
    ],
)
def test_a_refusal_is_raised_with_its_code_and_message(
    admin: Admin, broker_id: int, code: ErrorCode, words: str
) -> None:
    with pytest.raises(KafkaError) as refused:
        admin.unregister_broker(broker_id)
    assert refused.value.code == code and words in str(refused.value)
    assert not refused.value.retriable


@pytest.mark.parametrize("broker_id", [True, "2", 2.0, None, -1, 2**31])
def test_an_id_that_is_not_a_broker_id_is_refused_before_sending(
    admin: Admin, controller: FakeController, broker_id: object
) -> None:
    with pytest.raises(KafkaError) as refused:
        admin.unregister_broker(broker_id)  # type: ignore[arg-type]
    assert refused.value.code == ErrorCode.INVALID_REQUEST
    assert "broker id" in str(refused.value)
    assert controller.asked == []
