"""SASL on a listener: the server side of PLAIN, SCRAM and OAUTHBEARER, and the per-connection
authentication state machine (Kafka's SaslServerAuthenticator).

A connection to a SASL listener (SASL_PLAINTEXT, SASL_SSL) starts unauthenticated. Until it has
authenticated it may send only ApiVersions, SaslHandshake and SaslAuthenticate; anything else
closes it, as Kafka does. The exchange:

- SaslHandshake v1 names a mechanism; one the listener does not enable is answered
  UNSUPPORTED_SASL_MECHANISM with the enabled ones, and the connection closes. Then
  SaslAuthenticate requests carry the mechanism's tokens until it completes.
- SaslHandshake v0 (old clients): the tokens follow as raw size-prefixed frames, without Kafka
  headers, answered the same way; a failure closes the connection (v0 has no error channel).
- A failed authentication is answered SASL_AUTHENTICATION_FAILED with Kafka's message (never
  a password), and the connection closes after `connection.failed.authentication.delay.ms`.
- Until authenticated, frames are limited to `sasl.server.max.receive.size` (512 KiB).

Re-authentication (KIP-368): with `connections.max.reauth.ms` > 0 the SaslAuthenticate that
completes an exchange carries `session_lifetime_ms` (the smaller of that and the time left on
an OAUTHBEARER token). The client must re-authenticate on the same connection (SaslHandshake
then SaslAuthenticate, same mechanism, same principal) before the session ends; a request
after the end closes the connection. A connection begins re-authenticating at most once a
second, as Kafka's KafkaChannel allows: a SaslHandshake sooner is answered ILLEGAL_SASL_STATE.

Mechanisms (`SaslServer`s, sans-IO: `evaluate(token)` per client message):
- PLAIN: users and passwords are the `user_<name>="<password>"` options of the listener's
  PlainLoginModule (Kafka's JAAS server users), compared in constant time.
- SCRAM-SHA-256/512: credentials from the metadata image (`strom.broker.security.scram`).
- OAUTHBEARER: unsecured JWS tokens (`alg: none`, for development; Kafka's default validator)
  or signed JWTs checked against a JWKS (`strom.broker.security.oauth`).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from strom.broker.security.principal import USER_TYPE, KafkaPrincipal
from strom.broker.security.scram import ScramError, ScramServer
from strom.coordinator.metadata.image import ScramCredential
from strom.wire.errors import ErrorCode
from strom.wire.message import Message
from strom.wire.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from strom.wire.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
SCRAM_IDS = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}


class SaslFailure(Exception):
    """Authentication failed; the message is what the client is told."""


class SaslServer(Protocol):
    @property
    def complete(self) -> bool: ...

    def evaluate(self, token: bytes) -> bytes: ...

    @property
    def authorization_id(self) -> str | None: ...

    @property
    def expires_at_ms(self) -> int | None:
        """When the credential ends (an OAUTHBEARER token's exp), if it does."""
        ...


# --- PLAIN ----------------------------------------------------------------------------------------


class PlainServer:
    """RFC 4616: one message `authzid NUL authcid NUL password`."""

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.complete = False
        self._user: str | None = None

    @property
    def authorization_id(self) -> str | None:
        return self._user

    @property
    def expires_at_ms(self) -> int | None:
        return None

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslFailure("Authentication failed: unexpected message after completion")
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise SaslFailure("Invalid SASL/PLAIN response: expected 3 tokens")
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise SaslFailure("Invalid SASL/PLAIN response: not UTF-8") from None
        if not user:
            raise SaslFailure("Authentication failed: username not specified")
        if not password:
            raise SaslFailure("Authentication failed: password not specified")
        expected = self._users.get(user)
        # compare even for unknown users, so the time taken does not tell which users exist
        good = hmac.compare_digest(password.encode(), (expected or "\x00" + password).encode())
        if expected is None or not good:
            raise SaslFailure("Authentication failed: Invalid username or password")
        if authzid and authzid != user:
            raise SaslFailure(
                "Authentication failed: Client requested an authorization id that is different "
                "from username"
            )
        self._user = user
        self.complete = True
        return b""


def plain_users(options: Mapping[str, str]) -> dict[str, str]:
    """The `user_<name>` options of a PlainLoginModule: the listener's users."""
    return {key[5:]: value for key, value in options.items() if key.startswith("user_")}


# --- SCRAM ----------------------------------------------------------------------------------------


class ScramSaslServer:
    def __init__(self, mechanism: str, lookup: Callable[[str, int], ScramCredential | None]) -> None:
        mechanism_id = SCRAM_IDS[mechanism]
        self._server = ScramServer(mechanism, lambda user: lookup(user, mechanism_id))
        self._mechanism = mechanism

    @property
    def complete(self) -> bool:
        return self._server.complete

    @property
    def authorization_id(self) -> str | None:
        return self._server.username if self._server.complete else None

    @property
    def expires_at_ms(self) -> int | None:
        return None

    def evaluate(self, token: bytes) -> bytes:
        try:
            return self._server.evaluate(token)
        except ScramError:
            # Kafka tells the client no more than this (which user, which step: not said)
            raise SaslFailure(
                "Authentication failed during authentication due to invalid credentials with "
                f"SASL mechanism {self._mechanism}"
            ) from None


# --- OAUTHBEARER ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class BearerToken:
    principal: str
    expires_at_ms: int
    scopes: frozenset[str]


class TokenValidator(Protocol):
    def validate(self, token: str, now_ms: int) -> BearerToken:
        """The token's principal and expiry; SaslFailure (a reason) when it is not valid."""
        ...


_OAUTH_INITIAL = re.compile(
    rb"n,(?:a=(?P<authzid>[^,]*))?,\x01(?P<pairs>(?:[A-Za-z]+=[\x21-\x7e \t\r\n]*\x01)*)\x01"
)


class OAuthBearerServer:
    """RFC 7628 as Kafka's OAuthBearerSaslServer: the client's one message carries
    `auth=Bearer <token>`; an invalid token is answered with a JSON error challenge, which the
    client acknowledges with a lone 0x01, and then fails."""

    def __init__(self, validator: TokenValidator, clock: Callable[[], int]) -> None:
        self._validator = validator
        self._clock = clock
        self.complete = False
        self._token: BearerToken | None = None
        self._error: str | None = None

    @property
    def authorization_id(self) -> str | None:
        return None if self._token is None else self._token.principal

    @property
    def expires_at_ms(self) -> int | None:
        return None if self._token is None else self._token.expires_at_ms

    def evaluate(self, token: bytes) -> bytes:
        if self._error is not None:
            if token == b"\x01":
                raise SaslFailure(self._error)
            raise SaslFailure("Authentication failed: unexpected message after an error")
        if self.complete:
            raise SaslFailure("Authentication failed: unexpected message after completion")
        match = _OAUTH_INITIAL.fullmatch(token)
        if match is None:
            raise SaslFailure("Invalid OAUTHBEARER client first message")
        pairs = dict(
            p.split(b"=", 1) for p in match["pairs"].split(b"\x01") if p
        )
        auth = pairs.get(b"auth", b"").decode("ascii", "replace")
        if not auth.startswith("Bearer ") or not auth[7:].strip():
            raise SaslFailure("Invalid OAUTHBEARER client first message: no bearer token")
        try:
            parsed = self._validator.validate(auth[7:].strip(), self._clock())
        except SaslFailure as exc:
            self._error = f"Authentication failed: {exc}"
            return json.dumps({"status": "invalid_token"}).encode()
        authzid = match["authzid"]
        if authzid and authzid.decode("utf-8", "replace") != parsed.principal:
            raise SaslFailure(
                "Authentication failed: the authorization id differs from the token's principal"
            )
        self._token = parsed
        self.complete = True
        return b""


def _b64url(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def jws_parts(token: str) -> tuple[dict[str, object], dict[str, object]]:
    """The header and claims of a compact JWS (not checked); SaslFailure if malformed."""
    parts = token.split(".")
    if len(parts) != 3:
        raise SaslFailure("the token is not a compact JWS (three dot-separated parts)")
    try:
        header, claims = json.loads(_b64url(parts[0])), json.loads(_b64url(parts[1]))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise SaslFailure("the token's header or claims are not base64url JSON") from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise SaslFailure("the token's header and claims must be JSON objects")
    return header, claims


class UnsecuredValidator:
    """Kafka's OAuthBearerUnsecuredValidatorCallbackHandler: a token with `alg: none` and no
    signature, for development. Its JAAS options: unsecuredValidatorPrincipalClaimName (sub),
    unsecuredValidatorScopeClaimName (scope), unsecuredValidatorRequiredScope,
    unsecuredValidatorAllowableClockSkewMs (0). The token needs `exp`."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self._principal_claim = options.get("unsecuredValidatorPrincipalClaimName", "sub")
        self._scope_claim = options.get("unsecuredValidatorScopeClaimName", "scope")
        self._required = frozenset(options.get("unsecuredValidatorRequiredScope", "").split())
        skew = options.get("unsecuredValidatorAllowableClockSkewMs", "0")
        self._skew_ms = int(skew) if skew.isdigit() else 0

    def validate(self, token: str, now_ms: int) -> BearerToken:
        header, claims = jws_parts(token)
        if header.get("alg") != "none" or token.split(".")[2]:
            raise SaslFailure("an unsecured token must have alg none and no signature")
        return checked_claims(
            claims, now_ms, self._skew_ms, self._principal_claim, self._scope_claim, self._required
        )


def checked_claims(
    claims: Mapping[str, object],
    now_ms: int,
    skew_ms: int,
    principal_claim: str,
    scope_claim: str,
    required_scopes: frozenset[str] = frozenset(),
) -> BearerToken:
    """The principal, expiry and scopes of a token's claims; SaslFailure when they do not do."""
    principal = claims.get(principal_claim)
    if not isinstance(principal, str) or not principal.strip():
        raise SaslFailure(f"the token has no {principal_claim} claim naming the principal")
    exp = claims.get("exp")
    if not isinstance(exp, int | float) or isinstance(exp, bool) or not math.isfinite(exp):
        raise SaslFailure("the token has no exp (expiration time) claim")
    expires = int(exp * 1000)
    if expires + skew_ms <= now_ms:
        raise SaslFailure("the token has expired")
    for claim in ("iat", "nbf"):
        value = claims.get(claim)
        if claim == "nbf" and isinstance(value, int | float) and value * 1000 > now_ms + skew_ms:
            raise SaslFailure("the token is not valid yet (nbf)")
    raw_scope = claims.get(scope_claim)
    scopes: frozenset[str]
    if isinstance(raw_scope, str):
        scopes = frozenset(raw_scope.split())
    elif isinstance(raw_scope, list):
        scopes = frozenset(str(s) for s in raw_scope)
    else:
        scopes = frozenset()
    missing = required_scopes - scopes
    if missing:
        raise SaslFailure(f"the token lacks the required scope(s) {' '.join(sorted(missing))}")
    return BearerToken(principal.strip(), expires, scopes)


# --- the connection's authenticator ----------------------------------------------------------------


class Action(Enum):
    PASS = "pass"
    """Not an authentication request: dispatch it to its handler."""
    REPLY = "reply"
    """Send `response`, then go on."""
    REPLY_AND_CLOSE = "reply-and-close"
    """Send `response`, then close (after the failed-authentication delay if `delayed`)."""
    CLOSE = "close"
    """Close without an answer."""


@dataclass(frozen=True)
class Verdict:
    action: Action
    response: Message | None = None
    delayed: bool = False
    reason: str = ""
    """For the log, when the connection closes."""


PASS = Verdict(Action.PASS)
MIN_REAUTH_INTERVAL_MS = 1000
"""Kafka's KafkaChannel lets a connection begin re-authenticating at most once a second."""

MechanismFactory = Callable[[], SaslServer]


class State(Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    RAW = "raw"
    AUTHENTICATED = "authenticated"
    REAUTHENTICATE = "reauthenticate"


class Authenticator:
    """One connection's SASL state (see the module docstring); sans-IO: requests in, verdicts
    out. `clock` is wall-clock milliseconds."""

    def __init__(
        self,
        mechanisms: Mapping[str, MechanismFactory],
        *,
        reauth_ms: Callable[[str], int],
        clock: Callable[[], int],
    ) -> None:
        self._factories = mechanisms
        self._reauth_ms = reauth_ms
        self._clock = clock
        self.state = State.HANDSHAKE
        self._mechanism: str | None = None
        self._server: SaslServer | None = None
        self.principal: KafkaPrincipal | None = None
        self.session_expires_ms: int | None = None
        self._reauth_started_ms: int | None = None
        self.reauthentications = 0
        self.passes = False
        """Set by the server: whether the last request went on to its handler."""

    @property
    def authenticated(self) -> bool:
        return self.state in (State.AUTHENTICATED, State.REAUTHENTICATE)

    @property
    def raw_tokens(self) -> bool:
        """SaslHandshake v0 was answered: the next frames are raw SASL tokens."""
        return self.state is State.RAW

    def expired(self) -> bool:
        return self.session_expires_ms is not None and self._clock() >= self.session_expires_ms

    def on_request(self, api_key: int, version: int, body: Message) -> Verdict:
        """What to do with a decoded request on this connection."""
        if self.state in (State.HANDSHAKE, State.AUTHENTICATE):
            if api_key == API_VERSIONS and self.state is State.HANDSHAKE:
                return PASS
            if api_key == SASL_HANDSHAKE and self.state is State.HANDSHAKE:
                assert isinstance(body, SaslHandshakeRequest)
                return self._handshake(body.mechanism, version, reauth=False)
            if api_key == SASL_AUTHENTICATE and self.state is State.AUTHENTICATE:
                assert isinstance(body, SaslAuthenticateRequest)
                return self._authenticate(body.auth_bytes, version)
            return Verdict(
                Action.CLOSE,
                reason=f"unexpected request (API key {api_key}) before SASL authentication",
            )
        reauth = (
            api_key == SASL_HANDSHAKE
            and self.state is State.AUTHENTICATED
            and self._may_reauthenticate()
        )
        if self.expired() and not (reauth or self.state is State.REAUTHENTICATE):
            return Verdict(Action.CLOSE, reason="the SASL session expired without re-authentication")
        if reauth:
            assert isinstance(body, SaslHandshakeRequest)
            self._reauth_started_ms = self._clock()
            return self._handshake(body.mechanism, version, reauth=True)
        if api_key == SASL_AUTHENTICATE and self.state is State.REAUTHENTICATE:
            assert isinstance(body, SaslAuthenticateRequest)
            return self._authenticate(body.auth_bytes, version)
        return PASS  # a SaslHandshake that begins no re-authentication: ILLEGAL_SASL_STATE

    def _may_reauthenticate(self) -> bool:
        """Kafka's KafkaChannel: only a session that ends is re-authenticated, and at most once
        a second (a SaslHandshake sooner goes to its handler, which answers it
        ILLEGAL_SASL_STATE; the connection stays open)."""
        if self.session_expires_ms is None:
            return False
        started = self._reauth_started_ms
        return started is None or self._clock() - started >= MIN_REAUTH_INTERVAL_MS

    def on_raw_token(self, token: bytes) -> bytes | None:
        """A raw token after SaslHandshake v0: the raw reply, or None (close: it failed)."""
        try:
            reply = self._evaluate(token)
        except SaslFailure:
            return None
        return reply

    def _handshake(self, mechanism: str, version: int, *, reauth: bool) -> Verdict:
        enabled = list(self._factories)
        if mechanism not in self._factories:
            return Verdict(
                Action.REPLY_AND_CLOSE,
                SaslHandshakeResponse(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                                      mechanisms=enabled),
                reason=f"SASL mechanism {mechanism[:64]!r} is not enabled",
            )
        if reauth and (version < 1 or mechanism != self._mechanism):
            return Verdict(
                Action.REPLY_AND_CLOSE,
                SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=enabled),
                reason="re-authentication must use SaslHandshake v1+ and the same mechanism",
            )
        self._mechanism = mechanism
        self._server = self._factories[mechanism]()
        if reauth:
            self.state = State.REAUTHENTICATE
        else:
            self.state = State.AUTHENTICATE if version >= 1 else State.RAW
        return Verdict(
            Action.REPLY, SaslHandshakeResponse(error_code=ErrorCode.NONE, mechanisms=enabled)
        )

    def _authenticate(self, token: bytes, version: int) -> Verdict:
        try:
            reply = self._evaluate(token)
        except SaslFailure as exc:
            return Verdict(
                Action.REPLY_AND_CLOSE,
                SaslAuthenticateResponse(
                    error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
                    error_message=str(exc),
                    auth_bytes=b"",
                ),
                delayed=True,
                reason=f"SASL authentication failed: {exc}",
            )
        server = self._server
        lifetime = 0
        if server is not None and server.complete and self.session_expires_ms is not None:
            lifetime = max(0, self.session_expires_ms - self._clock())
        return Verdict(
            Action.REPLY,
            SaslAuthenticateResponse(
                error_code=ErrorCode.NONE,
                error_message=None,
                auth_bytes=reply,
                session_lifetime_ms=lifetime if version >= 1 else 0,
            ),
        )

    def _evaluate(self, token: bytes) -> bytes:
        server = self._server
        assert server is not None
        assert self._mechanism is not None
        reply = server.evaluate(token)
        if not server.complete:
            return reply
        name = server.authorization_id
        assert name is not None
        principal = KafkaPrincipal(USER_TYPE, name)
        if self.state is State.REAUTHENTICATE and principal != self.principal:
            raise SaslFailure(
                f"Cannot change principals during re-authentication from {self.principal} to "
                f"{principal}"
            )
        now = self._clock()
        expires = server.expires_at_ms
        if expires is not None and expires <= now:
            raise SaslFailure("Authentication failed: the credential has expired")
        reauth = self._reauth_ms(self._mechanism)
        if reauth > 0:
            limit = now + reauth
            self.session_expires_ms = min(limit, expires) if expires is not None else limit
        else:
            self.session_expires_ms = None
        if self.state is State.REAUTHENTICATE:
            self.reauthentications += 1
        self.principal = principal
        self.state = State.AUTHENTICATED
        return reply
