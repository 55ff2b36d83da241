"""Who a connection is: Kafka's principal, `User:<name>`, and how TLS derives it.

Kafka's DefaultKafkaPrincipalBuilder: a PLAINTEXT connection is `User:ANONYMOUS`; an SSL one is
`User:` + the client certificate's subject, as an RFC 2253 distinguished name (most specific
attribute first: `CN=alice,OU=eng,O=example,C=US`), mapped by `ssl.principal.mapping.rules`;
without a client certificate it is `User:ANONYMOUS`. A name no rule maps fails the connection.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from strom.config.security import PrincipalRule, map_principal

USER_TYPE = "User"


class KafkaPrincipal(NamedTuple):
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")


class PrincipalMappingError(Exception):
    """No ssl.principal.mapping.rules rule applies to a certificate's name."""


def distinguished_name(der: bytes) -> str:
    """The subject of a DER certificate as RFC 2253 prints it (Java's X500Principal.getName())."""
    from cryptography import x509

    return x509.load_der_x509_certificate(der).subject.rfc4514_string()


def ssl_principal(der: bytes | None, rules: Sequence[PrincipalRule]) -> KafkaPrincipal:
    """The principal of a TLS connection whose client sent certificate `der` (None: none)."""
    if der is None:
        return ANONYMOUS
    name = distinguished_name(der)
    mapped = map_principal(rules, name)
    if mapped is None:
        raise PrincipalMappingError(f"no ssl.principal.mapping.rules rule applies to {name}")
    return KafkaPrincipal(USER_TYPE, mapped)
