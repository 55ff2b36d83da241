"""The group handler tests use the shared in-process broker with a small offsets topic."""

from __future__ import annotations

import pytest


@pytest.fixture
def broker_overrides() -> dict[str, str]:
    return {"offsets.topic.num.partitions": "5"}
