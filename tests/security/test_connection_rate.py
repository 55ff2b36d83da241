"""KIP-612's connection creation rate: the acceptor's token bucket, on a fake clock, and the
key (broker-wide and per listener); the `ip` entity's `connection_creation_rate` quota, its
validation, its windowed rate and its enforcement by a broker on loopback."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from strom.broker.network.server import TokenBucket
from strom.broker.security.quotas import (
    CONNECTION_RATE,
    MAX_CONNECTION_THROTTLE_MS,
    SWEEP_EVERY_S,
    IpConnectionQuotas,
)
from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import open_broker
from strom.config import load_config
from strom.config.values import INT_MAX
from strom.coordinator.metadata.image import QuotaEntity
from strom.wire.errors import ErrorCode, ProtocolError
from strom.wire.messages.alter_client_quotas import AlterClientQuotasRequest as Alter
from strom.wire.messages.alter_client_quotas import AlterClientQuotasResponse
from strom.wire.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from strom.wire.messages.describe_client_quotas import (
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)

INVALID = ErrorCode.INVALID_REQUEST


def test_a_burst_then_one_per_interval() -> None:
    now = [0.0]
    bucket = TokenBucket(4, lambda: now[0])
    assert [bucket.take() for _ in range(4)] == [0.0] * 4  # a one-second burst
    assert bucket.take() == 0.25  # the fifth waits a quarter second
    now[0] += 1.0
    assert bucket.take() == 0.0
    assert TokenBucket(INT_MAX, lambda: 0.0).take() == 0.0  # Kafka's default: unlimited


def test_the_key_broker_wide_and_per_listener() -> None:
    config = load_config(extra={
        "listeners": "PLAINTEXT://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT",
        "max.connection.creation.rate": "100",
        "listener.name.external.max.connection.creation.rate": "10",
    })  # fmt: skip
    assert config.listener_value("PLAINTEXT", "max.connection.creation.rate") == 100
    assert config.listener_value("EXTERNAL", "max.connection.creation.rate") == 10


def test_an_ips_own_quota_overrides_the_default() -> None:
    rates = IpConnectionQuotas(lambda: 0.0)
    quotas: dict[QuotaEntity, dict[str, float]] = {
        (("ip", None),): {CONNECTION_RATE: 5.0},
        (("ip", "10.0.0.1"),): {CONNECTION_RATE: 50.0},
        (("ip", "::1"),): {CONNECTION_RATE: 7.0},
        (("user", None),): {"producer_byte_rate": 1.0},
    }
    assert rates.limit(quotas, "10.0.0.1") == 50.0
    assert rates.limit(quotas, "::ffff:10.0.0.1") == 50.0  # an IPv4 peer on a dual-stack socket
    assert rates.limit(quotas, "0:0:0:0:0:0:0:1") == 7.0
    assert rates.limit(quotas, "10.0.0.2") == 5.0
    assert rates.limit({(("ip", "10.0.0.1"),): {CONNECTION_RATE: 1.0}}, "10.0.0.2") is None


def test_the_rate_over_the_window_and_the_throttle() -> None:
    now = [0.0]
    rates = IpConnectionQuotas(lambda: now[0])
    quotas: dict[QuotaEntity, dict[str, float]] = {(("ip", "10.0.0.1"),): {CONNECTION_RATE: 2.0}}
    # 2 per second over the 10 s window: a burst of 20 is within it, the 21st is over
    assert [rates.admit(quotas, "10.0.0.1") for _ in range(20)] == [0] * 20
    assert rates.admit(quotas, "10.0.0.1") == 500  # 2.1/s against 2: 5 % of the 10 s window
    assert rates.admit(quotas, "10.0.0.1") == 500  # the refused one was not counted
    assert rates.admit(quotas, "10.0.0.2") == 0  # another address: no quota
    heavy: dict[QuotaEntity, dict[str, float]] = {(("ip", None),): {CONNECTION_RATE: 0.01}}
    assert rates.admit(heavy, "10.0.0.3") == MAX_CONNECTION_THROTTLE_MS  # bounded by one sample
    now[0] = 11.0  # the first sample has left the window
    assert rates.admit(quotas, "10.0.0.1") == 0


def test_idle_addresses_are_dropped() -> None:
    now = [0.0]
    rates = IpConnectionQuotas(lambda: now[0])
    quotas: dict[QuotaEntity, dict[str, float]] = {(("ip", None),): {CONNECTION_RATE: 100.0}}
    for second in range(600):
        now[0] = float(second)
        rates.admit(quotas, f"10.0.{second // 256}.{second % 256}")
    assert len(rates) <= SWEEP_EVERY_S + 12


async def _connect_from(source: str, bootstrap: str) -> KafkaClient:
    host, port = bootstrap.rsplit(":", 1)
    sock = trio.socket.socket()
    await sock.bind((source, 0))
    await sock.connect((host, int(port)))
    return KafkaClient(trio.SocketStream(sock))


async def _served(source: str, bootstrap: str) -> bool:
    """Whether a new connection from `source` is answered (else the broker closes it)."""
    client = await _connect_from(source, bootstrap)
    try:
        with trio.fail_after(10):
            await client.request(ApiVersionsRequest(), 0, ApiVersionsResponse)
        return True
    except (ProtocolError, trio.BrokenResourceError):
        return False
    finally:
        await client.aclose()


@pytest.mark.trio
async def test_ip_quotas_on_a_broker(tmp_path: Path) -> None:
    async with open_broker(tmp_path / "data") as broker:
        admin = await KafkaClient.connect(broker.bootstrap)

        async def alter(entity: list[tuple[str, str | None]], key: str, value: float,
                        remove: bool = False) -> tuple[int, str | None]:  # fmt: skip
            request = Alter(entries=[Alter.EntryData(
                [Alter.EntityData(t, n) for t, n in entity], [Alter.OpData(key, value, remove)])])  # fmt: skip
            entry = (await admin.request(request, 1, AlterClientQuotasResponse)).entries[0]
            return entry.error_code, entry.error_message

        # Kafka's validation of ip entities
        assert (await alter([("ip", "not-an-ip")], CONNECTION_RATE, 5))[0] == INVALID
        assert (await alter([("ip", "1.2.3.4")], "producer_byte_rate", 5))[0] == INVALID
        assert (await alter([("user", "x")], CONNECTION_RATE, 5))[0] == INVALID
        assert (await alter([("ip", None), ("client-id", "x")], CONNECTION_RATE, 5))[0] == INVALID
        assert (await alter([("ip", "1.2.3.4")], CONNECTION_RATE, 2.5))[0] == INVALID
        assert (await alter([("ip", "1.2.3.4")], CONNECTION_RATE, 0))[0] == INVALID
        assert (await alter([("ip", "1.2.3.4")], CONNECTION_RATE, 2.0**31))[0] == INVALID
        assert await alter([("ip", "1.2.3.4")], CONNECTION_RATE, 5) == (0, None)
        assert await alter([("ip", "1.2.3.4")], CONNECTION_RATE, 0, remove=True) == (0, None)

        # a tiny default for every address, a generous one of its own for 127.0.0.2
        assert await alter([("ip", None)], CONNECTION_RATE, 1) == (0, None)
        assert await alter([("ip", "127.0.0.2")], CONNECTION_RATE, 1000) == (0, None)
        described = await admin.request(DescribeClientQuotasRequest(
            components=[DescribeClientQuotasRequest.ComponentData("ip", 2, None)], strict=True),
            1, DescribeClientQuotasResponse)  # fmt: skip
        assert described.entries is not None
        assert [([(e.entity_type, e.entity_name) for e in d.entity], [(v.key, v.value) for v in d.values])
                for d in described.entries] == [([("ip", "127.0.0.2")], [(CONNECTION_RATE, 1000.0)])]  # fmt: skip

        # 1 per second over the 10 s window: of a burst of 15 from 127.0.0.1 (the admin
        # connection was made before the quota), the ones past about 10 are closed unserved
        served = [await _served("127.0.0.1", broker.bootstrap) for _ in range(15)]
        assert served[:5] == [True] * 5
        assert served.count(False) >= 4
        assert served[-1] is False
        # 127.0.0.2 has its own quota, which overrides the default: all served
        assert [await _served("127.0.0.2", broker.bootstrap) for _ in range(15)] == [True] * 15
        # the admin's connection, made before, is unaffected
        assert (await alter([("ip", None)], CONNECTION_RATE, 1, remove=True)) == (0, None)
        assert await _served("127.0.0.1", broker.bootstrap)  # no quota for it any more
        await admin.aclose()
