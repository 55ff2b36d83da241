"""Every message, every valid version: encode then decode gives it back.

The second encode must also produce the same bytes, which catches fields that
decode to something that re-encodes differently (tag order, null vs empty).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strom.wire.codegen.schema import Message
from strom.wire.message import Message as MessageClass
from tests.wire.schema_strategies import all_messages, struct_strategy

CASES = [(m, cls, v) for m, cls in all_messages() for v in m.versions()]


@pytest.mark.parametrize(
    ("schema", "cls", "version"), CASES, ids=[f"{m.name}-v{v}" for m, _, v in CASES]
)
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_round_trip(schema: Message, cls: type[MessageClass], version: int, data: Any) -> None:
    value = data.draw(struct_strategy(schema, cls, schema.fields, version))
    encoded = value.encode(version)
    decoded = cls.decode(encoded, version)
    assert decoded == value
    assert decoded.encode(version) == encoded


def test_every_api_key_is_covered() -> None:
    keys = {m.api_key for m, _, _ in CASES if m.kind == "request"}
    assert len(keys) >= 80
