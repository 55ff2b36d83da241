"""Shared fixtures: an in-process broker on a free port and a raw protocol client to it.

A test folder changes the broker's configuration by overriding `broker_overrides`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker, open_broker


@pytest.fixture
def broker_overrides() -> dict[str, str]:
    """Config keys on top of the embedded test defaults."""
    return {}


@pytest.fixture
async def broker(tmp_path: Path, broker_overrides: dict[str, str]) -> AsyncIterator[EmbeddedBroker]:
    async with open_broker(tmp_path / "data", broker_overrides) as running:
        yield running


@pytest.fixture
async def client(broker: EmbeddedBroker) -> AsyncIterator[KafkaClient]:
    kafka = await KafkaClient.connect(broker.bootstrap)
    try:
        yield kafka
    finally:
        await kafka.aclose()
