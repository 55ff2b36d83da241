"""Which SASL mechanisms each SASL listener offers, built once from the configuration.

For every SASL_PLAINTEXT / SASL_SSL listener: its `sasl.enabled.mechanisms`, and for each a
factory of fresh server exchanges: PLAIN with the users of the listener's PlainLoginModule,
SCRAM against the credentials in the current metadata image (so a credential added with
AlterUserScramCredentials works on the next connection), OAUTHBEARER with Kafka's unsecured
validator, or signed JWTs against a JWKS when `sasl.server.callback.handler.class` names
Kafka's OAuthBearerValidatorCallbackHandler.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any

import trio

from strom.broker import runtime
from strom.broker.security.oauth import JwksError, JwksValidator
from strom.broker.security.sasl import (
    Authenticator,
    MechanismFactory,
    OAuthBearerServer,
    PlainServer,
    SaslServer,
    ScramSaslServer,
    TokenValidator,
    UnsecuredValidator,
    plain_users,
)
from strom.config import BrokerConfig
from strom.config.security import listener_jaas
from strom.coordinator.metadata.image import ScramCredential

log = logging.getLogger("strom.sasl")

Credentials = Callable[[str, int], ScramCredential | None]


class SaslListeners:
    """The mechanisms of every SASL listener of a broker."""

    def __init__(
        self,
        config: BrokerConfig,
        credentials: Credentials,
        clock: Callable[[], int],
        validators: dict[str, TokenValidator] | None = None,
    ) -> None:
        self._config = config
        self._clock = clock
        self._mechanisms: dict[str, dict[str, MechanismFactory]] = {}
        self.validators: dict[str, JwksValidator] = {}
        """Listeners whose OAUTHBEARER tokens are JWTs checked against a JWKS (KIP-768)."""
        for endpoint in config.listener_endpoints:
            name = endpoint.name
            if not config.protocol_map.get(name, "PLAINTEXT").startswith("SASL_"):
                continue
            lookup = partial(config.listener_value, name)
            enabled = lookup("sasl.enabled.mechanisms")
            assert isinstance(enabled, tuple)
            factories: dict[str, MechanismFactory] = {}
            handler = lookup("sasl.server.callback.handler.class", "OAUTHBEARER")
            if "OAUTHBEARER" in enabled and handler:
                self.validators[name] = self._jwks(name)
            for mechanism in enabled:
                module = listener_jaas(name, mechanism, lookup)
                assert module is not None  # the configuration's checks made sure
                if mechanism == "PLAIN":
                    factories[mechanism] = partial(_plain, plain_users(module.options))
                elif mechanism.startswith("SCRAM-"):
                    factories[mechanism] = partial(ScramSaslServer, mechanism, credentials)
                else:
                    validator: TokenValidator = (
                        (validators or {}).get(name)
                        or self.validators.get(name)
                        or UnsecuredValidator(module.options)
                    )
                    factories[mechanism] = partial(OAuthBearerServer, validator, clock)
            self._mechanisms[name] = factories

    def _jwks(self, listener: str) -> JwksValidator:
        def value(key: str) -> Any:
            return self._config.listener_value(listener, key, "OAUTHBEARER")

        return JwksValidator(
            str(value("sasl.oauthbearer.jwks.endpoint.url")),
            audience=tuple(value("sasl.oauthbearer.expected.audience")),
            issuer=value("sasl.oauthbearer.expected.issuer"),
            sub_claim=value("sasl.oauthbearer.sub.claim.name"),
            scope_claim=value("sasl.oauthbearer.scope.claim.name"),
            skew_s=value("sasl.oauthbearer.clock.skew.seconds"),
            refresh_ms=value("sasl.oauthbearer.jwks.endpoint.refresh.ms"),
        )

    async def load_keys(self) -> None:
        """Read every JWKS (start-up); JwksError naming the URL when one cannot be read, or
        when PyJWT is not installed."""
        for validator in self.validators.values():
            try:
                import jwt  # noqa: F401
            except ImportError:
                raise JwksError(
                    "OAUTHBEARER validation against a JWKS needs PyJWT: "
                    "pip install 'strom[security]'"
                ) from None
            await runtime.to_thread(validator.load)

    async def refresh_keys(self) -> None:
        """Read each JWKS again when due (see `strom.broker.security.oauth`); runs forever."""
        while True:
            await trio.sleep(5)
            for listener, validator in self.validators.items():
                if not validator.refresh_due():
                    continue
                try:
                    await runtime.to_thread(validator.load)
                except JwksError as exc:
                    log.warning("listener %s keeps its JWKS keys: %s", listener, exc)

    def __contains__(self, listener: str) -> bool:
        return listener in self._mechanisms

    def authenticator(self, listener: str) -> Authenticator | None:
        """A fresh authenticator for a connection to `listener` (None: not a SASL listener)."""
        factories = self._mechanisms.get(listener)
        if factories is None:
            return None
        return Authenticator(
            factories,
            reauth_ms=partial(self._reauth_ms, listener),
            clock=self._clock,
        )

    def _reauth_ms(self, listener: str, mechanism: str) -> int:
        value = self._config.listener_value(listener, "connections.max.reauth.ms", mechanism)
        assert isinstance(value, int)
        return value


def _plain(users: dict[str, str]) -> SaslServer:
    return PlainServer(users)
