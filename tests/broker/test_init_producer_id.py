"""InitProducerId: every version, id blocks, transactional ids, validation."""

from __future__ import annotations

from pathlib import Path

import pytest

from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker, open_broker
from strom.wire.errors import ErrorCode
from strom.wire.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from tests.broker.test_produce_helpers import batch, create_topic, produce

pytestmark = pytest.mark.trio


async def _init(client: KafkaClient, version: int = 5, **kw: object) -> InitProducerIdResponse:
    request = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000)
    for key, value in kw.items():
        setattr(request, key, value)
    return await client.request(request, version, InitProducerIdResponse)


@pytest.mark.parametrize("version", range(6))
async def test_every_version(broker: EmbeddedBroker, client: KafkaClient, version: int) -> None:
    first = await _init(client, version)
    second = await _init(client, version)
    assert (first.error_code, first.producer_epoch) == (ErrorCode.NONE, 0)
    assert second.producer_id == first.producer_id + 1


async def test_ids_feed_idempotent_produce(broker: EmbeddedBroker, client: KafkaClient) -> None:
    await create_topic(broker, "t")
    pid = (await _init(client)).producer_id
    assert (await produce(client, "t", batch(pid=pid, epoch=0, seq=0))).error_code == 0


async def test_ids_never_repeat_across_restarts(tmp_path: Path) -> None:
    seen = set()
    for _ in range(2):
        async with open_broker(tmp_path) as broker:
            client = await KafkaClient.connect(broker.bootstrap)
            for _ in range(3):
                seen.add((await _init(client)).producer_id)
            await client.aclose()
    assert len(seen) == 6


async def test_validation(client: KafkaClient) -> None:
    half = await _init(client, producer_id=5, producer_epoch=-1)
    assert (half.error_code, half.producer_id, half.producer_epoch) == (
        ErrorCode.INVALID_REQUEST,
        -1,
        -1,
    )
    bumped = await _init(client, producer_id=5, producer_epoch=2)
    assert (bumped.error_code, bumped.producer_epoch) == (ErrorCode.NONE, 0)


async def test_transactional_ids(client: KafkaClient) -> None:
    assert (await _init(client, transactional_id="")).error_code == ErrorCode.INVALID_REQUEST
    for bad in (0, -5, 10**9):
        response = await _init(client, transactional_id="tx", transaction_timeout_ms=bad)
        assert response.error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    ok = await _init(client, 0, transactional_id="tx", transaction_timeout_ms=60_000)
    assert (ok.error_code, ok.producer_epoch) == (ErrorCode.NONE, 0)
    assert ok.producer_id >= 0
