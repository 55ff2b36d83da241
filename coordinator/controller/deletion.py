"""DeleteTopics (v1-6): by name (all versions) or by topic id (v6), as KRaft answers.

Order of results, as Kafka builds them before it shuffles (Strom does not
shuffle): request-shape errors (neither or both of name and id), duplicate
names, duplicate ids, unknown ids (UNKNOWN_TOPIC_ID), unknown names
(UNKNOWN_TOPIC_OR_PARTITION), a name that maps to an id also given, then the
deleted topics. `delete.topic.enable=false` fails every topic: INVALID_REQUEST
before v3, TOPIC_DELETION_DISABLED from v3. Each deletion is one
RemoveTopicRecord; replay drops the topic's partitions and configs with it.
"""

from __future__ import annotations

import uuid

from strom.coordinator.controller.result import ApiError, Context, ControllerResult
from strom.wire.errors import ErrorCode
from strom.wire.formats.metadata.remove_topic_record import RemoveTopicRecord
from strom.wire.message import Message
from strom.wire.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from strom.wire.primitives import ZERO_UUID

Result = DeleteTopicsResponse.DeletableTopicResult
BOTH_GIVEN = "You may not specify both topic name and topic id."
NAME_MAPS_TO_GIVEN_ID = "The provided topic name maps to an ID that was already supplied."


def _invalid(message: str) -> ApiError:
    return ApiError(ErrorCode.INVALID_REQUEST, message)


def delete_topics(
    ctx: Context, request: DeleteTopicsRequest, version: int
) -> ControllerResult[DeleteTopicsResponse]:
    states = (
        request.topics
        if version >= 6
        else [DeleteTopicsRequest.DeleteTopicState(name=n) for n in request.topic_names]
    )
    response = DeleteTopicsResponse(responses=[])
    out = response.responses

    def add(name: str | None, topic_id: uuid.UUID, error: ApiError) -> None:
        out.append(Result(name, topic_id, error.code, error.message))

    if not ctx.static_config.delete_topic_enable:
        code = ErrorCode.INVALID_REQUEST if version < 3 else ErrorCode.TOPIC_DELETION_DISABLED
        for state in states:
            add(state.name, state.topic_id, ApiError(code))
        return ControllerResult(response)

    names: dict[str, None] = {}
    duplicate_names: dict[str, None] = {}
    ids: dict[uuid.UUID, None] = {}
    duplicate_ids: dict[uuid.UUID, None] = {}
    for state in states:
        if state.name is None:
            if state.topic_id == ZERO_UUID:
                add(None, ZERO_UUID, _invalid("Neither topic name nor id were specified."))
            elif state.topic_id in ids or state.topic_id in duplicate_ids:
                ids.pop(state.topic_id, None)
                duplicate_ids[state.topic_id] = None
            else:
                ids[state.topic_id] = None
        elif state.topic_id != ZERO_UUID:
            add(state.name, state.topic_id, _invalid(BOTH_GIVEN))
        elif state.name in names or state.name in duplicate_names:
            names.pop(state.name, None)
            duplicate_names[state.name] = None
        else:
            names[state.name] = None
    for name in duplicate_names:
        add(name, ZERO_UUID, _invalid("Duplicate topic name."))
    for topic_id in duplicate_ids:
        add(None, topic_id, _invalid("Duplicate topic id."))

    doomed: dict[uuid.UUID, str] = {}
    for topic_id in ids:
        topic = ctx.image.topic_by_id(topic_id)
        if topic is None:
            add(None, topic_id, ApiError.default(ErrorCode.UNKNOWN_TOPIC_ID))
        else:
            doomed[topic_id] = topic.name
    for name in names:
        found = ctx.image.topic(name)
        if found is None:
            add(name, ZERO_UUID, ApiError.default(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        elif found.topic_id in doomed or found.topic_id in duplicate_ids:
            doomed.pop(found.topic_id, None)
            duplicate_ids[found.topic_id] = None
            add(name, found.topic_id, _invalid(NAME_MAPS_TO_GIVEN_ID))
        else:
            doomed[found.topic_id] = name

    records: list[Message] = []
    for topic_id, name in doomed.items():
        records.append(RemoveTopicRecord(topic_id))
        add(name, topic_id, ApiError(ErrorCode.NONE))
    return ControllerResult(response, records)
