"""DeleteTopics on the pure state machine: by name, by id, and every error."""

from __future__ import annotations

import uuid

import pytest

from strom.coordinator.controller import Controller
from strom.coordinator.metadata.image import TOPIC_RESOURCE
from strom.wire.errors import ErrorCode
from strom.wire.formats.metadata.remove_topic_record import RemoveTopicRecord
from strom.wire.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from strom.wire.primitives import ZERO_UUID
from tests.controller.helpers import commit, create, make_controller, topic

State = DeleteTopicsRequest.DeleteTopicState
UNKNOWN_TOPIC = "This server does not host this topic-partition."
UNKNOWN_ID = "This server does not host this topic ID."


def _setup(props: dict[str, str] | None = None) -> tuple[Controller, uuid.UUID, uuid.UUID]:
    controller = make_controller(props)
    create(controller, topic("a", 2, configs={"retention.ms": "1"}), topic("b"))
    a, b = controller.image.topic("a"), controller.image.topic("b")
    assert a is not None
    assert b is not None
    return controller, a.topic_id, b.topic_id


def _rows(response: DeleteTopicsResponse) -> list[tuple[str | None, uuid.UUID, int, str | None]]:
    return [(r.name, r.topic_id, r.error_code, r.error_message) for r in response.responses]


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5])
def test_delete_by_name_old_versions(version: int) -> None:
    controller, a_id, _ = _setup()
    request = DeleteTopicsRequest(topic_names=["a", "zzz"])
    result = controller.delete_topics(request, version)
    assert result.records == [RemoveTopicRecord(a_id)]
    assert _rows(result.response) == [
        ("zzz", ZERO_UUID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC),
        ("a", a_id, 0, None),
    ]
    DeleteTopicsResponse.decode(result.response.encode(version), version)
    commit(controller, result)
    image = controller.image
    assert image.topic_names() == ["b"]
    assert image.topic_by_id(a_id) is None
    assert (TOPIC_RESOURCE, "a") not in image.configs


def test_delete_by_id_and_name_v6() -> None:
    controller, a_id, b_id = _setup()
    missing = uuid.UUID(int=999)
    request = DeleteTopicsRequest(
        topics=[State(topic_id=a_id), State(name="b"), State(topic_id=missing)]
    )
    result = controller.delete_topics(request, 6)
    assert result.records == [RemoveTopicRecord(a_id), RemoveTopicRecord(b_id)]
    assert _rows(result.response) == [
        (None, missing, ErrorCode.UNKNOWN_TOPIC_ID, UNKNOWN_ID),
        ("a", a_id, 0, None),
        ("b", b_id, 0, None),
    ]
    DeleteTopicsResponse.decode(result.response.encode(6), 6)


def test_request_shape_errors_v6() -> None:
    controller, a_id, _b_id = _setup()
    request = DeleteTopicsRequest(
        topics=[
            State(),
            State(name="a", topic_id=a_id),
            State(name="b"),
            State(name="b"),
            State(topic_id=a_id),
            State(topic_id=a_id),
        ]
    )
    result = controller.delete_topics(request, 6)
    assert result.records == []
    assert _rows(result.response) == [
        (None, ZERO_UUID, ErrorCode.INVALID_REQUEST, "Neither topic name nor id were specified."),
        ("a", a_id, ErrorCode.INVALID_REQUEST, "You may not specify both topic name and topic id."),
        ("b", ZERO_UUID, ErrorCode.INVALID_REQUEST, "Duplicate topic name."),
        (None, a_id, ErrorCode.INVALID_REQUEST, "Duplicate topic id."),
    ]


def test_name_mapping_to_a_given_id() -> None:
    controller, a_id, _ = _setup()
    request = DeleteTopicsRequest(topics=[State(topic_id=a_id), State(name="a")])
    result = controller.delete_topics(request, 6)
    assert result.records == []
    assert _rows(result.response) == [
        (
            "a",
            a_id,
            ErrorCode.INVALID_REQUEST,
            "The provided topic name maps to an ID that was already supplied.",
        )
    ]


@pytest.mark.parametrize(
    ("version", "code"),
    [(2, ErrorCode.INVALID_REQUEST), (3, ErrorCode.TOPIC_DELETION_DISABLED), (6, ErrorCode.TOPIC_DELETION_DISABLED)],
)  # fmt: skip
def test_deletion_disabled(version: int, code: int) -> None:
    controller, _a_id, _ = _setup({"delete.topic.enable": "false"})
    if version >= 6:
        request = DeleteTopicsRequest(topics=[State(name="a")])
    else:
        request = DeleteTopicsRequest(topic_names=["a"])
    result = controller.delete_topics(request, version)
    assert result.records == []
    assert [(r.name, r.error_code) for r in result.response.responses] == [("a", code)]
    assert controller.image.topic("a") is not None


def test_recreate_after_delete_gets_new_id() -> None:
    controller, a_id, _ = _setup()
    commit(controller, controller.delete_topics(DeleteTopicsRequest(topic_names=["a"]), 5))
    create(controller, topic("a"))
    again = controller.image.topic("a")
    assert again is not None
    assert again.topic_id != a_id
    assert controller.image.topic_config_overrides("a") == {}
