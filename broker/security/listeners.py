"""TLS on the broker's listeners: the contexts in force, the handshake, and reloads.

`ListenerTls` holds one server context per SSL/SASL_SSL listener, built from the listener's
effective ssl.* settings (the file's, then dynamic per-broker configs from the metadata log).
`refresh(config)` is called with every new effective configuration: a listener whose settings
changed gets a new context, which new connections use at once (connections already open keep
theirs, as in Kafka). An `AlterConfigs` of `listener.name.<l>.ssl.keystore.location`, even to the
same path, stores a new value and so reloads the file: that is how a renewed certificate is
picked up. A reloaded key store must keep the old certificate's subject and subject alternative
names unless `ssl.allow.dn.changes` / `ssl.allow.san.changes` say otherwise (Kafka's rule, so a
wrong file cannot silently change who the broker is); a rejected reload keeps the old context and
logs one line.

`handshake` runs the server side of a TLS handshake within `HANDSHAKE_TIMEOUT_S`: a client that
stalls (or speaks plaintext to a TLS port) costs one connection slot for at most that long.
"""

from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass

import trio

from strom.broker.security.principal import (
    ANONYMOUS,
    KafkaPrincipal,
    PrincipalMappingError,
    distinguished_name,
    ssl_principal,
)
from strom.broker.security.tls import TlsConfigError, server_context
from strom.config import BrokerConfig
from strom.config.security import PrincipalRule, SslSettings, parse_principal_mapping_rules

log = logging.getLogger("strom.tls")

HANDSHAKE_TIMEOUT_S = 10.0
"""Longest a TLS handshake may take (Kafka has no key of its own for it)."""


@dataclass(frozen=True)
class ListenerContext:
    settings: SslSettings
    context: ssl.SSLContext
    rules: tuple[PrincipalRule, ...]
    identity: tuple[str, tuple[str, ...]] | None
    """The key store certificate's subject and subject alternative names (reload checks)."""


class ListenerTls:
    """The TLS contexts of a broker's TLS listeners."""

    def __init__(self, config: BrokerConfig) -> None:
        """Build every TLS listener's context; TlsConfigError (naming the key) if one fails."""
        self._contexts: dict[str, ListenerContext] = {}
        for listener in config.listener_endpoints:
            if config.uses_tls(listener.name):
                self._contexts[listener.name] = _build(config.ssl_settings(listener.name))

    def __contains__(self, listener: str) -> bool:
        return listener in self._contexts

    def context(self, listener: str) -> ListenerContext | None:
        return self._contexts.get(listener)

    def refresh(self, config: BrokerConfig, *, reload: bool = False) -> None:
        """Rebuild the contexts whose settings changed in `config`, or every one with `reload`
        (the files may have been rewritten); see the module docstring."""
        for name, current in list(self._contexts.items()):
            settings = config.ssl_settings(name)
            if settings == current.settings and not reload:
                continue
            try:
                fresh = _build(settings)
                _check_identity(current, fresh, settings)
            except TlsConfigError as exc:
                log.error("listener %s keeps its TLS certificate: %s", name, exc)
                continue
            self._contexts[name] = fresh
            log.info("listener %s: TLS key and trust stores reloaded (new connections use them)",
                     name)  # fmt: skip


def validate(config: BrokerConfig, current: ListenerTls | None) -> str | None:
    """Why `config`'s TLS settings cannot be used (None: they can), for a dynamic change."""
    for listener in config.listener_endpoints:
        if not config.uses_tls(listener.name):
            continue
        settings = config.ssl_settings(listener.name)
        try:
            fresh = _build(settings)
            existing = None if current is None else current.context(listener.name)
            if existing is not None and existing.settings != settings:
                _check_identity(existing, fresh, settings)
        except TlsConfigError as exc:
            return str(exc)
    return None


def _build(settings: SslSettings) -> ListenerContext:
    context, certificate = server_context(settings)
    rules = parse_principal_mapping_rules(settings.principal_mapping_rules)
    return ListenerContext(settings, context, rules, _identity(certificate))


def _identity(der: bytes | None) -> tuple[str, tuple[str, ...]] | None:
    """Subject and SANs of the listener's own certificate (None without `cryptography`)."""
    if der is None:
        return None
    try:
        from cryptography import x509
    except ImportError:
        return None
    cert = x509.load_der_x509_certificate(der)
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        names = tuple(sorted(str(n.value) for n in san))
    except x509.ExtensionNotFound:
        names = ()
    return distinguished_name(der), names


def _check_identity(current: ListenerContext, fresh: ListenerContext, settings: SslSettings) -> None:
    if current.identity is None or fresh.identity is None:
        return
    (old_dn, old_san), (new_dn, new_san) = current.identity, fresh.identity
    if old_dn != new_dn and not settings.allow_dn_changes:
        raise TlsConfigError(
            f"the new key store's certificate of listener {settings.listener} has another "
            f"subject ({new_dn}, was {old_dn}); set ssl.allow.dn.changes=true to allow it"
        )
    if old_san != new_san and not settings.allow_san_changes:
        raise TlsConfigError(
            f"the new key store's certificate of listener {settings.listener} has other subject "
            "alternative names; set ssl.allow.san.changes=true to allow it"
        )


async def handshake(
    stream: trio.abc.Stream, tls: ListenerContext, host: str, conn_id: int
) -> tuple[trio.SSLStream[trio.abc.Stream], KafkaPrincipal] | None:
    """The server side of the handshake: the TLS stream and the client's principal, or None
    (logged; the caller closes the connection) if it failed, stalled or no rule maps the
    client's certificate."""
    wrapped = trio.SSLStream(stream, tls.context, server_side=True)
    with trio.move_on_after(HANDSHAKE_TIMEOUT_S):
        try:
            await wrapped.do_handshake()
        except trio.BrokenResourceError as exc:
            reason = exc.__cause__ if exc.__cause__ is not None else exc
            log.info("TLS handshake with %s (connection %d) failed: %s", host, conn_id,
                     getattr(reason, "reason", None) or reason)  # fmt: skip
            return None
        der = wrapped.getpeercert(binary_form=True)
        try:
            principal = ssl_principal(der, tls.rules) if der else ANONYMOUS
        except PrincipalMappingError as exc:
            log.info("closing TLS connection %d from %s: %s", conn_id, host, exc)
            return None
        return wrapped, principal
    log.info("TLS handshake with %s (connection %d) did not finish within %.0f s", host,
             conn_id, HANDSHAKE_TIMEOUT_S)  # fmt: skip
    return None
