"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), as Kafka speaks them.

Credentials: a user's password never reaches the broker's storage; the metadata log keeps, per
user and mechanism, a random salt, an iteration count and two keys derived from the salted
password (`ScramCredential`): StoredKey = H(HMAC(SaltedPassword, "Client Key")) and
ServerKey = HMAC(SaltedPassword, "Server Key"), SaltedPassword = PBKDF2(password, salt, i).

The exchange (client first, server first, client final, server final)::

    C: n,,n=alice,r=<client nonce>
    S: r=<client nonce><server nonce>,s=<salt, base64>,i=4096
    C: c=biws,r=<both nonces>,p=<proof, base64>
    S: v=<server signature, base64>

The server checks the proof against StoredKey (a replayed or forged proof fails: the server's
nonce is new for every exchange), then proves it knows ServerKey. Channel binding is not used
(`n,,`), as in Kafka; Kafka's `tokenauth` extension (delegation tokens) is refused. Iterations
are 4096-16384 (Kafka's bounds). Pure: hashing and randomness only, no I/O. The stored form is
`strom.coordinator.metadata.image.ScramCredential`, derived by the controller
(`strom.coordinator.controller.scram`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable

from strom.coordinator.controller.scram import MAX_ITERATIONS, MIN_ITERATIONS, scram_credential
from strom.coordinator.metadata.image import ScramCredential

MECHANISMS = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
"""Mechanism names and the ids the SCRAM records and APIs use."""
MECHANISM_NAMES = {number: name for name, number in MECHANISMS.items()}
_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}

_CLIENT_FIRST = re.compile(
    r"(?P<gs2>n,(?:a=(?P<authzid>[^,]*))?,)n=(?P<user>[^,]*),r=(?P<nonce>[\x21-\x2b\x2d-\x7e]+)"
    r"(?P<extensions>(?:,[A-Za-z]+=[^,]*)*)"
)
_CLIENT_FINAL = re.compile(r"c=(?P<binding>[A-Za-z0-9+/=]*),r=(?P<nonce>[^,]+)(?:,[A-Za-z]=[^,]*)*,p=(?P<proof>[A-Za-z0-9+/=]+)")


class ScramError(Exception):
    """The exchange failed; the message is what the client may be told."""


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(_HASHES[mechanism], password.encode(), salt, iterations)


def make_credential(
    mechanism: str, password: str, iterations: int = MIN_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    """A stored credential for `password` (tests, `strom format --add-scram`)."""
    salt = salt if salt is not None else secrets.token_bytes(32)
    salted = salted_password(mechanism, password, salt, iterations)
    return scram_credential(MECHANISMS[mechanism], salted, salt, iterations)


def sasl_name(text: str) -> str:
    """RFC 5802's saslname escaping: = and , in a user name."""
    return text.replace("=", "=3D").replace(",", "=2C")


def _unescape(text: str) -> str:
    if re.search(r"=(?!2C|3D)", text):
        raise ScramError("Invalid user name")
    return text.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """The server side of one exchange: `evaluate(token)` for each client message."""

    def __init__(
        self,
        mechanism: str,
        lookup: Callable[[str], ScramCredential | None],
        nonce: Callable[[], str] | None = None,
    ) -> None:
        self.mechanism = mechanism
        self._lookup = lookup
        self._nonce = nonce or (lambda: secrets.token_urlsafe(24))
        self._state = "first"
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._gs2 = ""
        self._nonce_value = ""
        self.username: str | None = None
        self.complete = False

    def evaluate(self, token: bytes) -> bytes:
        """The reply to a client message; ScramError when authentication fails."""
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramError("Invalid SCRAM message: not UTF-8") from None
        if self._state == "first":
            return self._first(text)
        if self._state == "final":
            return self._final(text)
        raise ScramError("Unexpected SCRAM message after the exchange completed")

    def _first(self, text: str) -> bytes:
        match = _CLIENT_FIRST.fullmatch(text)
        if match is None:
            raise ScramError("Invalid SCRAM client first message")
        extensions = {
            k: v for k, _, v in (e.partition("=") for e in match["extensions"].split(",") if e)
        }
        if extensions.get("tokenauth", "false").lower() == "true":
            raise ScramError("Authentication failed: delegation tokens are not supported")
        user = _unescape(match["user"])
        authzid = match["authzid"]
        if authzid is not None and authzid and _unescape(authzid) != user:
            raise ScramError(
                "Authentication failed: Client requested an authorization id that is different "
                "from username"
            )
        credential = self._lookup(user)
        if credential is None:
            raise ScramError("Authentication failed: Invalid user credentials")
        self._credential = credential
        self.username = user
        self._gs2 = match["gs2"]
        self._client_first_bare = text[len(self._gs2) :]
        self._nonce_value = match["nonce"] + self._nonce()
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce_value},s={salt},i={credential.iterations}"
        self._state = "final"
        return self._server_first.encode()

    def _final(self, text: str) -> bytes:
        credential = self._credential
        assert credential is not None
        self._state = "failed"
        match = _CLIENT_FINAL.fullmatch(text)
        if match is None:
            raise ScramError("Invalid SCRAM client final message")
        if match["nonce"] != self._nonce_value:
            raise ScramError("Invalid SCRAM client final message: nonce mismatch")
        if match["binding"] != base64.b64encode(self._gs2.encode()).decode():
            raise ScramError("Invalid SCRAM client final message: channel binding mismatch")
        without_proof = text[: text.rindex(",p=")]
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        name = _HASHES[self.mechanism]
        try:
            proof = base64.b64decode(match["proof"], validate=True)
        except ValueError:
            raise ScramError("Invalid SCRAM client final message: proof") from None
        signature = hmac.digest(credential.stored_key, auth_message, name)
        if len(proof) != len(signature):
            raise ScramError("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(name, client_key).digest(), credential.stored_key):
            raise ScramError("Invalid client credentials")
        server_signature = hmac.digest(credential.server_key, auth_message, name)
        self._state = "done"
        self.complete = True
        return b"v=" + base64.b64encode(server_signature)


class ScramClient:
    """The client side of one exchange (a node authenticating to another)."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self.mechanism = mechanism
        self._username = username
        self._password = password
        self._nonce = secrets.token_urlsafe(24)
        self._client_first_bare = f"n={sasl_name(username)},r={self._nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._client_first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode()
        fields = dict(item.split("=", 1) for item in text.split(",") if "=" in item)
        nonce, salt, iterations = fields.get("r", ""), fields.get("s", ""), fields.get("i", "0")
        if not nonce.startswith(self._nonce) or not iterations.isdigit():
            raise ScramError("Invalid SCRAM server first message")
        if not MIN_ITERATIONS <= int(iterations) <= MAX_ITERATIONS:
            raise ScramError(f"Invalid SCRAM iteration count {iterations}")
        name = _HASHES[self.mechanism]
        salted = salted_password(self.mechanism, self._password, base64.b64decode(salt), int(iterations))
        client_key = hmac.digest(salted, b"Client Key", name)
        stored_key = hashlib.new(name, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
        signature = hmac.digest(stored_key, auth_message, name)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = hmac.digest(salted, b"Server Key", name)
        self._server_signature = hmac.digest(server_key, auth_message, name)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def check(self, server_final: bytes) -> None:
        text = server_final.decode(errors="replace")
        if not text.startswith("v=") or not hmac.compare_digest(
            base64.b64decode(text[2:]), self._server_signature
        ):
            raise ScramError("The server's SCRAM signature is wrong: it does not know the user")
