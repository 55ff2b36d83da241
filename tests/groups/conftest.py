"""An in-process broker and a raw protocol client for the group handler tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from broker.client import KafkaClient
from broker.embedded import EmbeddedBroker, open_broker


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[EmbeddedBroker]:
    async with open_broker(tmp_path / "data", {"offsets.topic.num.partitions": "5"}) as running:
        yield running


@pytest.fixture
async def client(broker: EmbeddedBroker) -> AsyncIterator[KafkaClient]:
    kafka = await KafkaClient.connect(broker.bootstrap)
    try:
        yield kafka
    finally:
        await kafka.aclose()
