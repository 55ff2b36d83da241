"""OAUTHBEARER tokens checked against a JWKS: Kafka's OAuthBearerValidatorCallbackHandler
(KIP-768), for production.

A listener whose OAUTHBEARER mechanism sets
`sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler`
validates each token as a signed JWT:

- the signature, with the key of the token's `kid` from the JWKS at
  `sasl.oauthbearer.jwks.endpoint.url` (an `https://` URL, or a `file:` URL for a JWKS on
  disk); only asymmetric algorithms (RS*, PS*, ES*, EdDSA): `none` and HMAC are refused, so a
  public key can never be used as a shared secret;
- `exp` (required), `nbf` and `iat`, with `sasl.oauthbearer.clock.skew.seconds` of leeway;
- `aud` among `sasl.oauthbearer.expected.audience` and `iss` equal to
  `sasl.oauthbearer.expected.issuer`, when those are set;
- the principal is the `sasl.oauthbearer.sub.claim.name` claim (`sub`), the scopes the
  `sasl.oauthbearer.scope.claim.name` claim (`scope`).

The JWKS is read at start-up (a JWKS that cannot be read stops start-up in one line) and again
every `sasl.oauthbearer.jwks.endpoint.refresh.ms`; a token whose `kid` is unknown also asks for
an early refresh (at most once a minute), so a key rotated in at the identity provider is
picked up. A failed refresh keeps the keys already known and logs one line.

PyJWT (with `cryptography`) does the JOSE work: `pip install 'strom[security]'`.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

from strom.broker.security.sasl import BearerToken, SaslFailure, checked_claims, jws_parts

log = logging.getLogger("strom.oauth")

ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512",
              "EdDSA")  # fmt: skip
EARLY_REFRESH_S = 60.0
FETCH_TIMEOUT_S = 10.0
MAX_JWKS_BYTES = 1 << 20


class JwksError(Exception):
    """The JWKS cannot be read; the message says where and why."""


def fetch_jwks(url: str) -> Mapping[str, Any]:
    """The JWKS document at `url` (https: or file:), parsed."""
    from urllib.request import url2pathname, urlopen  # loaded only where a JWKS is read

    parsed = urllib.parse.urlparse(url)
    try:
        if parsed.scheme == "file":
            with open(url2pathname(parsed.path), "rb") as f:
                data = f.read(MAX_JWKS_BYTES + 1)
        elif parsed.scheme == "https":
            with urlopen(url, timeout=FETCH_TIMEOUT_S) as response:
                data = response.read(MAX_JWKS_BYTES + 1)
        else:
            raise JwksError(f"the JWKS URL {url} is neither https: nor file:")
    except OSError as exc:
        raise JwksError(f"cannot read the JWKS at {url}: {exc}") from None
    if len(data) > MAX_JWKS_BYTES:
        raise JwksError(f"the JWKS at {url} is larger than {MAX_JWKS_BYTES} bytes")
    try:
        document = json.loads(data)
    except ValueError:
        raise JwksError(f"the JWKS at {url} is not JSON") from None
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise JwksError(f"the JWKS at {url} has no keys array")
    return document


class JwksValidator:
    """Validates signed JWTs (see the module docstring); `load()` before the first use."""

    def __init__(
        self,
        url: str,
        *,
        audience: tuple[str, ...] = (),
        issuer: str | None = None,
        sub_claim: str = "sub",
        scope_claim: str = "scope",
        skew_s: int = 30,
        refresh_ms: int = 3_600_000,
        fetch: Callable[[str], Mapping[str, Any]] = fetch_jwks,
    ) -> None:
        self.url = url
        self.audience = audience
        self.issuer = issuer
        self.sub_claim = sub_claim
        self.scope_claim = scope_claim
        self.skew_s = skew_s
        self.refresh_s = refresh_ms / 1000
        self._fetch = fetch
        self._keys: dict[str, Any] = {}
        self._loaded_at = 0.0
        self.early_refresh_wanted = False

    def load(self) -> None:
        """Read the JWKS (blocking; run it in a worker thread). JwksError if it cannot."""
        import jwt

        document = self._fetch(self.url)
        try:
            keys = jwt.PyJWKSet.from_dict(dict(document))
        except jwt.exceptions.PyJWTError as exc:
            raise JwksError(f"the JWKS at {self.url} holds no usable key: {exc}") from None
        self._keys = {k.key_id or "": k for k in keys.keys}
        self._loaded_at = time.monotonic()
        self.early_refresh_wanted = False

    def refresh_due(self) -> bool:
        since = time.monotonic() - self._loaded_at
        return since >= self.refresh_s or (self.early_refresh_wanted and since >= EARLY_REFRESH_S)

    def validate(self, token: str, now_ms: int) -> BearerToken:
        import jwt

        header, _ = jws_parts(token)
        algorithm = header.get("alg")
        if algorithm not in ALGORITHMS:
            raise SaslFailure(f"the token's algorithm {str(algorithm)[:16]!r} is not accepted")
        kid = header.get("kid")
        key = self._keys.get(kid if isinstance(kid, str) else "")
        if key is None:
            self.early_refresh_wanted = True
            raise SaslFailure("the token's key id is not in the JWKS")
        try:
            claims = jwt.decode(
                token,
                key=key.key,
                algorithms=[algorithm],
                audience=list(self.audience) or None,
                issuer=self.issuer,
                leeway=self.skew_s,
                options={"require": ["exp"], "verify_aud": bool(self.audience),
                         "verify_iss": self.issuer is not None},
            )
        except jwt.exceptions.PyJWTError as exc:
            raise SaslFailure(f"the token is not valid: {exc}") from None
        return checked_claims(claims, now_ms, self.skew_s * 1000, self.sub_claim, self.scope_claim)
