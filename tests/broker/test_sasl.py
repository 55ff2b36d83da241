"""SASL listeners: SaslHandshake (v0, v1) and SaslAuthenticate (v0-v2) with PLAIN, SCRAM-SHA-256/512
and OAUTHBEARER (unsecured tokens), SCRAM credentials managed with AlterUserScramCredentials /
DescribeUserScramCredentials, re-authentication (KIP-368), and the hostile cases: requests
before authentication, a mechanism not enabled, wrong and replayed SCRAM proofs, oversized and
fuzzed SaslAuthenticate frames. Every refusal closes the connection; the broker keeps serving,
and no password appears in its log."""

from __future__ import annotations

import logging
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from strom.broker.security.sasl_client import SaslClient, SaslLoginError, login, unsecured_token
from strom.broker.security.scram import ScramClient, salted_password
from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker, open_broker
from strom.wire.errors import ErrorCode, ProtocolError
from strom.wire.message import Message
from strom.wire.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest as AlterScram,
)
from strom.wire.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsResponse,
)
from strom.wire.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from strom.wire.messages.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from strom.wire.messages.metadata import MetadataRequest, MetadataResponse
from strom.wire.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from strom.wire.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from strom.wire.primitives import INT32

ADMIN_SECRET = "admin-Secret-1"
ALICE_SECRET = "alice-Secret-2"
BOB_SECRET = "bob-Secret-3"
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'username="admin" password="{ADMIN_SECRET}" user_admin="{ADMIN_SECRET}" '
    f'user_alice="{ALICE_SECRET}";'
)
SCRAM_JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    f'username="admin" password="{ADMIN_SECRET}";'
)
OAUTH_JAAS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
    'unsecuredLoginStringClaim_sub="admin";'
)
SASL = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "inter.broker.listener.name": "PLAINTEXT",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
    "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
    "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
    "connection.failed.authentication.delay.ms": "0",
}

pytestmark = pytest.mark.trio


@pytest.fixture
def broker_overrides() -> dict[str, str]:
    return SASL


@pytest.fixture
async def broker(tmp_path: Path, broker_overrides: dict[str, str]) -> AsyncIterator[EmbeddedBroker]:
    async with open_broker(tmp_path / "data", broker_overrides) as running:
        yield running


def sasl_address(broker: EmbeddedBroker) -> str:
    endpoint = next(e for e in broker.endpoints if e.name == "SASL_PLAINTEXT")
    return f"{endpoint.host}:{endpoint.port}"


def plain_address(broker: EmbeddedBroker) -> str:
    endpoint = next(e for e in broker.endpoints if e.name == "PLAINTEXT")
    return f"{endpoint.host}:{endpoint.port}"


def sender(client: KafkaClient) -> Any:
    async def send(body: Message, version: int) -> Message:
        kinds = {17: SaslHandshakeResponse, 36: SaslAuthenticateResponse}
        assert body.API_KEY is not None
        return await client.request(body, version, kinds[body.API_KEY])

    return send


async def connect(broker: EmbeddedBroker) -> KafkaClient:
    return await KafkaClient.connect(sasl_address(broker))


async def metadata(client: KafkaClient) -> MetadataResponse:
    with trio.fail_after(10):
        return await client.request(MetadataRequest(topics=[]), 12, MetadataResponse)


async def closed(client: KafkaClient) -> bool:
    """Whether the broker has closed this connection (its next read sees the end); the client
    is closed afterwards."""
    try:
        with trio.fail_after(5):
            try:
                data = await client.stream.receive_some(65536)
            except trio.BrokenResourceError:
                return True
        return data == b""
    finally:
        await client.aclose()


async def add_scram_user(broker: EmbeddedBroker, user: str, secret: str, mechanism: int = 1,
                         iterations: int = 4096) -> AlterUserScramCredentialsResponse:  # fmt: skip
    name = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}[mechanism]
    salt = random.Random(user).randbytes(16)
    client = await KafkaClient.connect(plain_address(broker))
    try:
        request = AlterScram(deletions=[], upsertions=[AlterScram.ScramCredentialUpsertion(
            user, mechanism, iterations, salt, salted_password(name, secret, salt, iterations))])  # fmt: skip
        return await client.request(request, 0, AlterUserScramCredentialsResponse)
    finally:
        await client.aclose()


async def test_plain_authenticates_then_serves(broker: EmbeddedBroker) -> None:
    client = await connect(broker)
    assert await login(sender(client), SaslClient("PLAIN", "alice", ALICE_SECRET)) == 0
    assert (await metadata(client)).brokers
    await client.aclose()


async def test_wrong_password_fails_with_kafkas_error_and_closes(
    broker: EmbeddedBroker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    client = await connect(broker)
    with pytest.raises(SaslLoginError, match="Authentication failed: Invalid username or password"):
        await login(sender(client), SaslClient("PLAIN", "alice", "not-" + ALICE_SECRET))
    assert await closed(client)
    client = await connect(broker)
    with pytest.raises(SaslLoginError, match="Invalid username or password"):
        await login(sender(client), SaslClient("PLAIN", "mallory", ALICE_SECRET))
    assert await closed(client)
    for secret in (ADMIN_SECRET, ALICE_SECRET, "not-" + ALICE_SECRET):
        assert secret not in caplog.text


async def test_requests_before_authentication_close_the_connection(broker: EmbeddedBroker) -> None:
    client = await connect(broker)
    versions = await client.request(
        ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3,
        ApiVersionsResponse,
    )  # fmt: skip
    assert versions.error_code == 0
    assert {17, 36} <= {k.api_key for k in versions.api_keys}
    with pytest.raises((ProtocolError, trio.BrokenResourceError)):
        await metadata(client)
    await client.aclose()
    client = await connect(broker)  # SaslAuthenticate without a handshake
    with pytest.raises((ProtocolError, trio.BrokenResourceError)):
        await client.request(SaslAuthenticateRequest(auth_bytes=b"\0a\0b"), 2,
                             SaslAuthenticateResponse)  # fmt: skip
    await client.aclose()
    plain = await KafkaClient.connect(plain_address(broker))  # others are unaffected
    assert (await metadata(plain)).brokers
    await plain.aclose()


async def test_a_mechanism_not_enabled_is_refused(broker: EmbeddedBroker) -> None:
    client = await connect(broker)
    response = await client.request(SaslHandshakeRequest(mechanism="GSSAPI"), 1,
                                    SaslHandshakeResponse)  # fmt: skip
    assert response.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert response.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
    assert await closed(client)


@pytest.mark.parametrize("mechanism", [1, 2])
async def test_scram_with_credentials_from_the_metadata_log(
    broker: EmbeddedBroker, mechanism: int
) -> None:
    name = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}[mechanism]
    client = await connect(broker)
    with pytest.raises(SaslLoginError, match=f"invalid credentials with SASL mechanism {name}"):
        await login(sender(client), SaslClient(name, "bob", BOB_SECRET))  # no credential yet
    await client.aclose()
    response = await add_scram_user(broker, "bob", BOB_SECRET, mechanism, 8192)
    assert [(r.user, r.error_code) for r in response.results] == [("bob", 0)]
    client = await connect(broker)
    await login(sender(client), SaslClient(name, "bob", BOB_SECRET))
    assert (await metadata(client)).brokers
    await client.aclose()
    client = await connect(broker)
    with pytest.raises(SaslLoginError, match="invalid credentials"):
        await login(sender(client), SaslClient(name, "bob", "not-" + BOB_SECRET))
    await client.aclose()


async def test_a_replayed_scram_proof_fails(broker: EmbeddedBroker) -> None:
    """A proof captured from one exchange is useless in another: the server's nonce differs."""
    await add_scram_user(broker, "bob", BOB_SECRET)
    first = await connect(broker)
    send = sender(first)
    await send(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 1)
    scram = ScramClient("SCRAM-SHA-256", "bob", BOB_SECRET)
    client_first = scram.first()
    server_first = (await send(SaslAuthenticateRequest(auth_bytes=client_first), 2)).auth_bytes
    client_final = scram.final(server_first)
    answer = await send(SaslAuthenticateRequest(auth_bytes=client_final), 2)
    assert answer.error_code == 0
    await first.aclose()
    replay = await connect(broker)
    send = sender(replay)
    await send(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 1)
    assert (await send(SaslAuthenticateRequest(auth_bytes=client_first), 2)).error_code == 0
    answer = await send(SaslAuthenticateRequest(auth_bytes=client_final), 2)
    assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert await closed(replay)


async def test_scram_credential_apis(broker: EmbeddedBroker) -> None:
    await add_scram_user(broker, "bob", BOB_SECRET, 1)
    await add_scram_user(broker, "bob", BOB_SECRET, 2, 8192)
    await add_scram_user(broker, "carol", BOB_SECRET, 1)
    client = await KafkaClient.connect(plain_address(broker))
    described = await client.request(DescribeUserScramCredentialsRequest(users=None), 0,
                                     DescribeUserScramCredentialsResponse)  # fmt: skip
    assert [(r.user, [(c.mechanism, c.iterations) for c in r.credential_infos])
            for r in described.results] == [("bob", [(1, 4096), (2, 8192)]), ("carol", [(1, 4096)])]  # fmt: skip
    named = await client.request(
        DescribeUserScramCredentialsRequest(users=[
            DescribeUserScramCredentialsRequest.UserName("nobody"),
            DescribeUserScramCredentialsRequest.UserName("carol"),
        ]), 0, DescribeUserScramCredentialsResponse,
    )  # fmt: skip
    assert [(r.user, r.error_code) for r in named.results] == [
        ("nobody", ErrorCode.RESOURCE_NOT_FOUND), ("carol", 0)]  # fmt: skip
    up = AlterScram.ScramCredentialUpsertion
    bad = AlterScram(
        deletions=[AlterScram.ScramCredentialDeletion("dave", 1),
                   AlterScram.ScramCredentialDeletion("carol", 1)],
        upsertions=[up("erin", 1, 1000, b"s", b"p"), up("frank", 3, 4096, b"s", b"p"),
                    up("carol", 1, 4096, b"s", b"p")],
    )  # fmt: skip
    response = await client.request(bad, 0, AlterUserScramCredentialsResponse)
    assert [(r.user, r.error_code) for r in response.results] == [
        ("dave", ErrorCode.RESOURCE_NOT_FOUND),
        ("carol", ErrorCode.DUPLICATE_RESOURCE),
        ("erin", ErrorCode.UNACCEPTABLE_CREDENTIAL),
        ("frank", ErrorCode.UNSUPPORTED_SASL_MECHANISM),
    ]  # fmt: skip
    delete = AlterScram(deletions=[AlterScram.ScramCredentialDeletion("carol", 1)], upsertions=[])
    assert (await client.request(delete, 0, AlterUserScramCredentialsResponse)).results[0].error_code == 0
    after = await client.request(DescribeUserScramCredentialsRequest(users=None), 0,
                                 DescribeUserScramCredentialsResponse)  # fmt: skip
    assert [r.user for r in after.results] == ["bob"]
    await client.aclose()


async def test_handshake_v0_then_raw_tokens(broker: EmbeddedBroker) -> None:
    client = await connect(broker)
    response = await client.request(SaslHandshakeRequest(mechanism="PLAIN"), 0,
                                    SaslHandshakeResponse)  # fmt: skip
    assert response.error_code == 0
    token = f"\0alice\0{ALICE_SECRET}".encode()
    await client.stream.send_all(INT32.pack(len(token)) + token)
    with trio.fail_after(5):
        assert await client.stream.receive_some(4) == INT32.pack(0)  # the empty PLAIN reply
    assert (await metadata(client)).brokers
    await client.aclose()
    client = await connect(broker)
    await client.request(SaslHandshakeRequest(mechanism="PLAIN"), 0, SaslHandshakeResponse)
    token = b"\0alice\0wrong"
    await client.stream.send_all(INT32.pack(len(token)) + token)
    assert await closed(client)


async def test_oversized_and_fuzzed_sasl_frames(broker: EmbeddedBroker) -> None:
    """A frame over sasl.server.max.receive.size is refused as soon as its size is read (no
    memory for it is taken); random SaslAuthenticate tokens to every mechanism fail cleanly."""
    client = await connect(broker)
    await client.stream.send_all(INT32.pack(100 * 1024 * 1024) + b"\0\x24\0\2")
    assert await closed(client)
    rng = random.Random(20)
    mechanisms = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
    for i in range(60):
        client = await connect(broker)
        send = sender(client)
        await send(SaslHandshakeRequest(mechanism=mechanisms[i % 4]), 1)
        token = rng.randbytes(rng.randrange(0, 300))
        if i % 3 == 0:
            token = b"n,,n=" + token  # SCRAM-looking
        if i % 5 == 0:
            token = b"n,,\x01auth=Bearer " + token + b"\x01\x01"
        try:
            for _ in range(3):
                answer = await send(SaslAuthenticateRequest(auth_bytes=token), 2)
                if answer.error_code:
                    assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
                    break
                token = b"\x01"  # OAUTHBEARER's error challenge is acknowledged, then fails
            else:
                pytest.fail("a random token authenticated")
        except (ProtocolError, trio.BrokenResourceError):
            pass
        await client.aclose()
    plain = await KafkaClient.connect(plain_address(broker))
    assert (await metadata(plain)).brokers
    await plain.aclose()


async def test_oauthbearer_unsecured_tokens(broker: EmbeddedBroker) -> None:
    client = await connect(broker)
    await login(sender(client), SaslClient("OAUTHBEARER", "svc", unsecured_token("svc")))
    assert (await metadata(client)).brokers
    await client.aclose()
    client = await connect(broker)
    with pytest.raises(SaslLoginError, match="the token has expired"):
        await login(sender(client), SaslClient("OAUTHBEARER", "svc", unsecured_token("svc", -10)))
    await client.aclose()


@pytest.mark.parametrize("broker_overrides", [{**SASL, "connections.max.reauth.ms": "400"}])
async def test_reauthentication(broker: EmbeddedBroker) -> None:
    """KIP-368: the session lifetime is given; re-authenticating (same principal) keeps the
    connection, at most once a second (sooner: ILLEGAL_SASL_STATE, the connection stays open,
    as Kafka answers), even after the session ended; another principal, or a request after the
    session ended, closes it."""
    client = await connect(broker)
    lifetime = await login(sender(client), SaslClient("PLAIN", "alice", ALICE_SECRET))
    assert 0 < lifetime <= 400
    assert await login(sender(client), SaslClient("PLAIN", "alice", ALICE_SECRET)) > 0
    with pytest.raises(SaslLoginError, match="ILLEGAL_SASL_STATE"):
        await login(sender(client), SaslClient("PLAIN", "alice", ALICE_SECRET))
    assert (await metadata(client)).brokers
    await trio.sleep(1.05)  # a second after the last re-authentication began; the session ended
    with pytest.raises(SaslLoginError, match="Cannot change principals"):
        await login(sender(client), SaslClient("PLAIN", "admin", ADMIN_SECRET))
    assert await closed(client)
    client = await connect(broker)
    await login(sender(client), SaslClient("PLAIN", "alice", ALICE_SECRET))
    await trio.sleep(0.5)  # the session ends
    with pytest.raises((ProtocolError, trio.BrokenResourceError)):
        await metadata(client)
    await client.aclose()


@pytest.mark.trio
async def test_format_add_scram_seeds_the_first_user(tmp_path: Path) -> None:
    """`strom format --add-scram` (kafka-storage's syntax): the user can authenticate with
    SCRAM on the cluster's first start, before any AlterUserScramCredentials."""
    import subprocess
    import sys

    from strom.broker.testing.embedded import child_environment

    data = tmp_path / "data"
    result = await trio.to_thread.run_sync(lambda: subprocess.run(
        [sys.executable, "-m", "strom", "format", "-t", "AAAAAAAAAAAAAAAAAAAAAA",
         "--override", f"log.dirs={data}",
         "--add-scram", f"SCRAM-SHA-256=[name=admin,password={ADMIN_SECRET}]",
         "--add-scram", f'SCRAM-SHA-512=[name="bob",password="{BOB_SECRET}",iterations=8192]'],
        capture_output=True, text=True, timeout=30, env=child_environment(),
    ))  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert ADMIN_SECRET not in (data / "bootstrap.checkpoint").read_bytes().decode("latin-1")
    async with open_broker(data, SASL) as broker:
        client = await connect(broker)
        await login(sender(client), SaslClient("SCRAM-SHA-256", "admin", ADMIN_SECRET))
        await client.aclose()
        client = await connect(broker)
        await login(sender(client), SaslClient("SCRAM-SHA-512", "bob", BOB_SECRET))
        await client.aclose()
