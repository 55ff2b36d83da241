"""The client side of SASL: how a node authenticates to another node's SASL listener (and how
Strom's tests and tools authenticate).

`SaslClient.for_listener(config, listener, mechanism)` takes the user from the listener's JAAS
entry for that mechanism, as Kafka's inter-broker clients do (`username`/`password` of the
PlainLoginModule or ScramLoginModule; `unsecuredLoginStringClaim_sub` of the
OAuthBearerLoginModule, which makes an unsecured token). `login(send, client)` runs
SaslHandshake v1 and SaslAuthenticate v2 over any request function.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Awaitable, Callable
from functools import partial

from strom.broker.security.scram import ScramClient, ScramError
from strom.config import BrokerConfig
from strom.config.security import listener_jaas
from strom.wire.errors import ErrorCode
from strom.wire.message import Message
from strom.wire.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from strom.wire.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse

HANDSHAKE_VERSION = 1
AUTHENTICATE_VERSION = 2
UNSECURED_TOKEN_LIFETIME_S = 3600


class SaslLoginError(Exception):
    """The peer refused the authentication; the message is its reason."""


def unsecured_token(subject: str, lifetime_s: int = UNSECURED_TOKEN_LIFETIME_S, **claims: object) -> str:
    """An unsecured JWS (`alg: none`), as Kafka's OAuthBearerUnsecuredLoginCallbackHandler makes."""

    def part(value: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    now = time.time()
    body: dict[str, object] = {"sub": subject, "iat": now, "exp": now + lifetime_s, **claims}
    return f"{part({'alg': 'none'})}.{part(body)}."


class SaslClient:
    """One mechanism's client exchange: `first()`, then `respond(challenge)` until None."""

    def __init__(self, mechanism: str, username: str, secret: str) -> None:
        self.mechanism = mechanism
        self._username = username
        self._secret = secret
        self._scram = ScramClient(mechanism, username, secret) if mechanism.startswith("SCRAM-") else None
        self._step = 0

    @classmethod
    def for_listener(cls, config: BrokerConfig, listener: str, mechanism: str) -> SaslClient:
        module = listener_jaas(listener, mechanism, partial(config.listener_value, listener))
        if module is None:
            raise SaslLoginError(f"listener {listener} has no JAAS entry for {mechanism}")
        options = module.options
        if mechanism == "OAUTHBEARER":
            subject = options.get("unsecuredLoginStringClaim_sub", "")
            return cls(mechanism, subject, unsecured_token(subject))
        return cls(mechanism, options.get("username", ""), options.get("password", ""))

    def first(self) -> bytes:
        if self._scram is not None:
            return self._scram.first()
        if self.mechanism == "PLAIN":
            return f"\x00{self._username}\x00{self._secret}".encode()
        return f"n,,\x01auth=Bearer {self._secret}\x01\x01".encode()

    def respond(self, challenge: bytes) -> bytes | None:
        """The next message, or None when the exchange is complete."""
        self._step += 1
        if self.mechanism == "OAUTHBEARER" and challenge and self._step == 1:
            return b"\x01"  # acknowledge the server's error challenge; it then fails
        if self._scram is None:
            return None
        try:
            if self._step == 1:
                return self._scram.final(challenge)
            self._scram.check(challenge)
        except ScramError as exc:
            raise SaslLoginError(str(exc)) from None
        return None


Send = Callable[[Message, int], Awaitable[Message]]


async def login(send: Send, client: SaslClient) -> int:
    """Authenticate with `client` over `send(body, version) -> response`; returns the session
    lifetime the server gave (0: none). SaslLoginError when the server refuses."""
    response = await send(SaslHandshakeRequest(mechanism=client.mechanism), HANDSHAKE_VERSION)
    assert isinstance(response, SaslHandshakeResponse)
    if response.error_code != ErrorCode.NONE:
        raise SaslLoginError(
            f"SaslHandshake for {client.mechanism} answered {ErrorCode(response.error_code).name}"
            f" (enabled: {', '.join(response.mechanisms)})"
        )
    token: bytes | None = client.first()
    lifetime = 0
    while token is not None:
        answer = await send(SaslAuthenticateRequest(auth_bytes=token), AUTHENTICATE_VERSION)
        assert isinstance(answer, SaslAuthenticateResponse)
        if answer.error_code != ErrorCode.NONE:
            raise SaslLoginError(answer.error_message or ErrorCode(answer.error_code).name)
        lifetime = answer.session_lifetime_ms
        token = client.respond(answer.auth_bytes)
    return lifetime
