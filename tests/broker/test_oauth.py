"""OAUTHBEARER with Kafka's OAuthBearerValidatorCallbackHandler (KIP-768): signed JWTs checked
against a JWKS file, made at test time. A valid token authenticates (its `sub` is the
principal); an expired one, another audience or issuer, an unknown key id, `alg: none`, an
HMAC token signed with the public key, and a token signed by another key are each refused with
SASL_AUTHENTICATION_FAILED; a key added to the JWKS later is picked up by a refresh."""

from __future__ import annotations

import base64
import hmac
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import jwt
import pytest
import trio
import trio.lowlevel
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from strom.broker.security.oauth import JwksValidator
from strom.broker.security.sasl import SaslFailure
from strom.broker.security.sasl_client import SaslClient, SaslLoginError, unsecured_token
from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker, open_broker

VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"


def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def jwk(key: rsa.RSAPrivateKey, kid: str) -> dict[str, Any]:
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    return {**public, "kid": kid, "use": "sig", "alg": "RS256"}


def token(key: Any, kid: str = "k1", alg: str = "RS256", **claims: Any) -> str:
    now = int(time.time())
    body = {"sub": "svc-orders", "iss": "https://idp.example", "aud": "kafka", "iat": now,
            "exp": now + 300, **claims}  # fmt: skip
    return jwt.encode(body, key, algorithm=alg, headers={"kid": kid})


def hmac_token(secret: bytes) -> str:
    """HS256 signed with `secret` (PyJWT refuses to make one with a public key: by hand)."""

    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    signing = f"{part({'alg': 'HS256', 'kid': 'k1'})}.{part({'sub': 'x', 'exp': time.time() + 60})}"
    signature = hmac.digest(secret, signing.encode(), "sha256")
    return f"{signing}.{base64.urlsafe_b64encode(signature).rstrip(b'=').decode()}"


@pytest.fixture
def keys(tmp_path: Path) -> tuple[rsa.RSAPrivateKey, Path]:
    key = rsa_key()
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [jwk(key, "k1")]}))
    return key, path


@pytest.fixture
async def broker(tmp_path: Path, keys: tuple[rsa.RSAPrivateKey, Path]) -> AsyncIterator[EmbeddedBroker]:
    overrides = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
            'unsecuredLoginStringClaim_sub="broker";',
        "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": VALIDATOR,
        "sasl.oauthbearer.jwks.endpoint.url": keys[1].as_uri(),
        "sasl.oauthbearer.expected.audience": "kafka",
        "sasl.oauthbearer.expected.issuer": "https://idp.example",
        "connection.failed.authentication.delay.ms": "0",
    }  # fmt: skip
    async with open_broker(tmp_path / "data", overrides) as running:
        yield running


async def login(broker: EmbeddedBroker, bearer: str) -> None:
    client = await KafkaClient.connect(broker.bootstrap)
    try:
        await client.login(SaslClient("OAUTHBEARER", "", bearer))
    finally:
        await client.aclose()


@pytest.mark.trio
async def test_valid_and_invalid_tokens(
    broker: EmbeddedBroker, keys: tuple[rsa.RSAPrivateKey, Path]
) -> None:
    key, _ = keys
    await login(broker, token(key))
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    bad = {
        "expired": token(key, exp=int(time.time()) - 600),
        "audience": token(key, aud="someone-else"),
        "issuer": token(key, iss="https://evil.example"),
        "unknown kid": token(key, kid="k9"),
        "alg none": unsecured_token("svc-orders"),
        "hmac with the public key": hmac_token(public_pem),
        "another key": token(rsa_key()),
    }  # fmt: skip
    for why, bearer in bad.items():
        with pytest.raises(SaslLoginError, match="Authentication failed"):
            await login(broker, bearer)
        del why


def test_a_key_rotated_in_is_picked_up(keys: tuple[rsa.RSAPrivateKey, Path]) -> None:
    key, path = keys
    validator = JwksValidator(path.as_uri(), audience=("kafka",), issuer="https://idp.example",
                              refresh_ms=1)  # fmt: skip
    validator.load()
    new_key = rsa_key()
    rotated = token(new_key, kid="k2")
    with pytest.raises(SaslFailure, match="key id"):
        validator.validate(rotated, int(time.time() * 1000))
    path.write_text(json.dumps({"keys": [jwk(key, "k1"), jwk(new_key, "k2")]}))
    assert validator.refresh_due()
    validator.load()
    assert validator.validate(rotated, int(time.time() * 1000)).principal == "svc-orders"


@pytest.mark.trio
async def test_an_unreadable_jwks_stops_start_up(tmp_path: Path) -> None:
    from strom.broker.process.app import StartupError

    overrides = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
            'unsecuredLoginStringClaim_sub="broker";',
        "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": VALIDATOR,
        "sasl.oauthbearer.jwks.endpoint.url": (tmp_path / "missing.json").as_uri(),
    }  # fmt: skip
    with pytest.RaisesGroup(pytest.RaisesExc(StartupError, match="cannot read the JWKS"),
                            flatten_subgroups=True):  # fmt: skip
        async with open_broker(tmp_path / "data", overrides):
            await trio.lowlevel.checkpoint()
