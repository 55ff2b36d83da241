"""TLS contexts from Kafka's ssl.* settings: a listener's server context and a node's client one.

Key stores (the node's certificate chain and private key):
- `PEM` (KIP-651): a file holding the private key and the chain (`ssl.keystore.location`, the
  key's password in `ssl.key.password`), or both inline: `ssl.keystore.key` (PKCS#8, possibly
  encrypted with `ssl.key.password`) and `ssl.keystore.certificate.chain`;
- `PKCS12`: `ssl.keystore.location` with `ssl.keystore.password`, read with the `cryptography`
  package (`pip install 'strom[security]'`);
- `JKS` (Kafka's default type) cannot be read outside a JVM: refused, saying how to convert it.

Trust stores (the CAs a peer's certificate is checked against) are PEM (a file, or inline in
`ssl.truststore.certificates`) or PKCS12; with none configured the system's CAs are used.

Python's `ssl` loads a certificate chain only from a path, so inline PEM and PKCS12 contents are
handed to it through an anonymous in-memory file (`memfd_create`), never written to disk.

Versions come from `ssl.enabled.protocols` (capped at TLS 1.2 by `ssl.protocol=TLSv1.2`);
`ssl.cipher.suites` restricts the TLS 1.2 suites and takes IANA (Java) or OpenSSL names. Python's
`ssl` cannot restrict TLS 1.3 suites, so a list naming only some of them is refused rather than
silently widened. `ssl.client.auth`: required (the client must present a certificate the trust
store accepts), requested (checked if presented), none.

Every failure is a `TlsConfigError` whose one-line message names the key to change; it never
shows a password or a key.
"""

from __future__ import annotations

import contextlib
import os
import re
import ssl
from collections.abc import Iterator
from pathlib import Path

from strom.config import BrokerConfig
from strom.config.security import SslSettings
from strom.config.values import Password

TLS13_SUITES = frozenset({"TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
                          "TLS_AES_128_GCM_SHA256"})  # fmt: skip
"""OpenSSL's default TLS 1.3 suites, the ones Python's ssl always enables."""
_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL, "none": ssl.CERT_NONE}
_KX = {"ECDHE_ECDSA": "ECDHE-ECDSA-", "ECDHE_RSA": "ECDHE-RSA-", "DHE_RSA": "DHE-RSA-",
       "DHE_DSS": "DHE-DSS-", "RSA": ""}  # fmt: skip
_CIPHER = {"AES_128_GCM": "AES128-GCM", "AES_256_GCM": "AES256-GCM", "AES_128_CBC": "AES128",
           "AES_256_CBC": "AES256", "CHACHA20_POLY1305": "CHACHA20-POLY1305",
           "AES_128_CCM": "AES128-CCM", "AES_256_CCM": "AES256-CCM"}  # fmt: skip
JKS_HELP = (
    "JKS key stores cannot be read by Strom; convert it with `keytool -importkeystore "
    "-srcstoretype JKS -deststoretype PKCS12` and set {key}=PKCS12 (or use PEM)"
)


_FIRST_CERT = re.compile(rb"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.DOTALL)


class TlsConfigError(Exception):
    """TLS settings that cannot make a context; the message names the key to change."""


def server_context(settings: SslSettings) -> tuple[ssl.SSLContext, bytes | None]:
    """The TLS context of a listener that serves clients (SSL, SASL_SSL), and the DER
    certificate it presents (the first of its chain)."""
    where = f"listener {settings.listener}"
    if not settings.has_keystore:
        raise TlsConfigError(
            f"{where} needs a key store: set ssl.keystore.location (or ssl.keystore.key and "
            f"ssl.keystore.certificate.chain), for example as listener.name."
            f"{settings.listener.lower()}.ssl.keystore.location"
        )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _configure(context, settings)
    leaf = _load_keystore(context, settings)
    context.verify_mode = _CLIENT_AUTH[settings.client_auth]
    if context.verify_mode != ssl.CERT_NONE:
        _cryptography(settings, f"ssl.client.auth={settings.client_auth} (client certificate names)")
        _load_truststore(context, settings)
    return context, leaf


def client_context(settings: SslSettings, *, check_hostname: bool | None = None) -> ssl.SSLContext:
    """The TLS context a node connects to another node's listener with: that listener's trust
    store checks the peer, its key store (if any) is presented as the client certificate."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _configure(context, settings)
    if settings.has_keystore:
        _load_keystore(context, settings)
    _load_truststore(context, settings)
    if check_hostname is None:
        check_hostname = settings.endpoint_identification_algorithm == "https"
    context.check_hostname = check_hostname
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def _configure(context: ssl.SSLContext, settings: SslSettings) -> None:
    versions = sorted(_VERSIONS[v] for v in settings.enabled_protocols)
    highest = versions[-1]
    if settings.protocol == "TLSv1.2":
        highest = ssl.TLSVersion.TLSv1_2
    context.minimum_version, context.maximum_version = versions[0], max(highest, versions[0])
    context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_NO_RENEGOTIATION
    if settings.cipher_suites:
        _set_ciphers(context, settings)


def _set_ciphers(context: ssl.SSLContext, settings: SslSettings) -> None:
    tls13 = {s for s in settings.cipher_suites if s in TLS13_SUITES}
    tls12 = [s for s in settings.cipher_suites if s not in TLS13_SUITES]
    uses_13 = context.maximum_version >= ssl.TLSVersion.TLSv1_3
    if uses_13 and tls13 and tls13 != TLS13_SUITES:
        raise TlsConfigError(
            f"ssl.cipher.suites of listener {settings.listener} names only some TLS 1.3 suites "
            f"({', '.join(sorted(tls13))}); Strom cannot restrict TLS 1.3 suites: name all of "
            f"{', '.join(sorted(TLS13_SUITES))} or none, or drop TLSv1.3 from ssl.enabled.protocols"
        )
    if not tls12:
        if context.minimum_version < ssl.TLSVersion.TLSv1_3:
            context.minimum_version = ssl.TLSVersion.TLSv1_3  # no TLS 1.2 suite is enabled
        return
    names = [openssl_cipher_name(s) for s in tls12]
    try:
        context.set_ciphers(":".join(names))
    except ssl.SSLError:
        raise TlsConfigError(
            f"ssl.cipher.suites of listener {settings.listener}: none of "
            f"{', '.join(tls12)} is a TLS 1.2 cipher suite OpenSSL knows"
        ) from None
    available = {c["name"] for c in context.get_ciphers()}
    missing = [s for s, n in zip(tls12, names, strict=True) if n not in available]
    if missing:
        raise TlsConfigError(
            f"ssl.cipher.suites of listener {settings.listener}: unknown or disabled cipher "
            f"suite(s) {', '.join(missing)}"
        )


def openssl_cipher_name(name: str) -> str:
    """An IANA (Java) TLS 1.2 suite name in OpenSSL's spelling; OpenSSL names pass unchanged.

    TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 -> ECDHE-RSA-AES128-GCM-SHA256;
    TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256 -> ECDHE-RSA-CHACHA20-POLY1305.
    """
    if not name.startswith("TLS_") or "_WITH_" not in name:
        return name
    kx, _, rest = name[4:].partition("_WITH_")
    for cipher, spelled in _CIPHER.items():
        if rest.startswith(cipher + "_") and kx in _KX:
            mac = rest[len(cipher) + 1 :]
            if cipher == "CHACHA20_POLY1305":
                return _KX[kx] + spelled
            if cipher.endswith(("GCM", "CCM")) or mac != "SHA":
                return f"{_KX[kx]}{spelled}-{mac}"
            return f"{_KX[kx]}{spelled}-SHA"
    return name


def _secret(value: Password | str | None) -> str | None:
    if value is None:
        return None
    return value.reveal() if isinstance(value, Password) else value


def _load_keystore(context: ssl.SSLContext, settings: SslSettings) -> bytes | None:
    """Load the key store into `context`; the DER of its first certificate."""
    kind = settings.keystore_type.upper()
    key_password = _secret(settings.key_password)
    inline = settings.keystore_key is not None or settings.keystore_certificate_chain is not None
    if kind == "JKS":
        raise TlsConfigError(
            f"listener {settings.listener}: " + JKS_HELP.format(key="ssl.keystore.type")
        )
    if inline:
        if kind != "PEM":
            raise TlsConfigError(
                f"listener {settings.listener}: ssl.keystore.key and ssl.keystore.certificate.chain"
                f" need ssl.keystore.type=PEM (it is {settings.keystore_type})"
            )
        if settings.keystore_key is None or settings.keystore_certificate_chain is None:
            raise TlsConfigError(
                f"listener {settings.listener}: set both ssl.keystore.key and "
                "ssl.keystore.certificate.chain"
            )
        if settings.keystore_location is not None:
            raise TlsConfigError(
                f"listener {settings.listener}: ssl.keystore.location cannot be set with "
                "ssl.keystore.key (choose the file or the inline PEM)"
            )
        pem = (_secret(settings.keystore_certificate_chain) or "").strip() + "\n"
        pem += (_secret(settings.keystore_key) or "").strip() + "\n"
        return _load_chain(context, pem.encode(), key_password, settings, "ssl.keystore.key")
    location = settings.keystore_location
    assert location is not None
    if kind == "PEM":
        if settings.keystore_password is not None:
            raise TlsConfigError(
                f"listener {settings.listener}: a PEM key store takes its key's password in "
                "ssl.key.password, not ssl.keystore.password"
            )
        data = _read(location, "ssl.keystore.location", settings)
        return _load_chain(context, data, key_password, settings, "ssl.keystore.location")
    stored = _pkcs12_keystore(
        _read(location, "ssl.keystore.location", settings),
        _secret(settings.keystore_password),
        settings,
    )
    return _load_chain(context, stored, None, settings, "ssl.keystore.location")


def _load_chain(
    context: ssl.SSLContext, pem: bytes, password: str | None, settings: SslSettings, key: str
) -> bytes | None:
    with _memory_file(pem) as path:
        try:
            context.load_cert_chain(path, password=password or None)
        except ssl.SSLError as exc:
            reason = str(exc.reason or "unreadable").lower().replace("_", " ")
            hint = (
                "is ssl.key.password right?"
                if b"ENCRYPTED" in pem
                else "it must hold a PEM private key and its certificate chain"
            )
            raise TlsConfigError(
                f"listener {settings.listener}: cannot use the key store of {key} "
                f"({reason}; {hint})"
            ) from None
        except (TypeError, ValueError):
            raise TlsConfigError(
                f"listener {settings.listener}: the private key of {key} is encrypted: set "
                "ssl.key.password"
            ) from None
    first = _FIRST_CERT.search(pem)
    return None if first is None else ssl.PEM_cert_to_DER_cert(first.group(0).decode())


def _load_truststore(context: ssl.SSLContext, settings: SslSettings) -> None:
    kind = settings.truststore_type.upper()
    inline = settings.truststore_certificates
    location = settings.truststore_location
    if inline is None and location is None:
        context.load_default_certs(
            ssl.Purpose.CLIENT_AUTH if context.protocol == ssl.PROTOCOL_TLS_SERVER
            else ssl.Purpose.SERVER_AUTH
        )  # fmt: skip
        return
    if kind == "JKS":
        raise TlsConfigError(
            f"listener {settings.listener}: " + JKS_HELP.format(key="ssl.truststore.type")
        )
    if inline is not None:
        if kind != "PEM":
            raise TlsConfigError(
                f"listener {settings.listener}: ssl.truststore.certificates needs "
                f"ssl.truststore.type=PEM (it is {settings.truststore_type})"
            )
        pem = _secret(inline) or ""
    else:
        assert location is not None
        data = _read(location, "ssl.truststore.location", settings)
        if kind == "PEM":
            pem = data.decode("ascii", "replace")
        else:
            pem = _pkcs12_truststore(data, _secret(settings.truststore_password), settings)
    try:
        context.load_verify_locations(cadata=pem)
    except (ssl.SSLError, ValueError):
        raise TlsConfigError(
            f"listener {settings.listener}: the trust store holds no readable PEM certificate "
            f"({'ssl.truststore.certificates' if inline is not None else 'ssl.truststore.location'})"
        ) from None


def _read(path: str, key: str, settings: SslSettings) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise TlsConfigError(
            f"listener {settings.listener}: cannot read {key} {path} ({exc.strerror})"
        ) from None


def _cryptography(settings: SslSettings, what: str) -> None:
    try:
        import cryptography  # noqa: F401
    except ImportError:
        raise TlsConfigError(
            f"listener {settings.listener}: {what} needs the cryptography package: "
            "pip install 'strom[security]'"
        ) from None


def _pkcs12_keystore(data: bytes, password: str | None, settings: SslSettings) -> bytes:
    _cryptography(settings, "a PKCS12 key store")
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    try:
        key, cert, extra = pkcs12.load_key_and_certificates(
            data, password.encode() if password else None
        )
    except ValueError:
        raise TlsConfigError(
            f"listener {settings.listener}: cannot open the PKCS12 key store "
            "ssl.keystore.location (is ssl.keystore.password right?)"
        ) from None
    if key is None or cert is None:
        raise TlsConfigError(
            f"listener {settings.listener}: the PKCS12 key store ssl.keystore.location holds no "
            "private key with its certificate"
        )
    pem = cert.public_bytes(serialization.Encoding.PEM)
    pem += b"".join(c.public_bytes(serialization.Encoding.PEM) for c in extra)
    return pem + key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _pkcs12_truststore(data: bytes, password: str | None, settings: SslSettings) -> str:
    _cryptography(settings, "a PKCS12 trust store")
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    try:
        loaded = pkcs12.load_pkcs12(data, password.encode() if password else None)
    except ValueError:
        raise TlsConfigError(
            f"listener {settings.listener}: cannot open the PKCS12 trust store "
            "ssl.truststore.location (is ssl.truststore.password right?)"
        ) from None
    certs = [c.certificate for c in loaded.additional_certs]
    if loaded.cert is not None:
        certs.append(loaded.cert.certificate)
    return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs).decode()


@contextlib.contextmanager
def _memory_file(data: bytes) -> Iterator[str]:
    """A path whose file holds `data` only in memory (an anonymous memfd), closed after use."""
    fd = os.memfd_create("strom-tls", os.MFD_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        yield f"/proc/self/fd/{fd}"
    finally:
        os.close(fd)


def peer_context(config: BrokerConfig, listener: str) -> ssl.SSLContext | None:
    """The client context a node reaches another node's `listener` with (an inter-broker or a
    controller listener), None when that listener is not TLS. Built from the same listener's
    ssl.* settings, as Kafka's inter-broker clients are: its trust store checks the peer, its
    key store is presented when the peer asks for a client certificate."""
    if not config.uses_tls(listener):
        return None
    return client_context(config.ssl_settings(listener))
