"""Certificates made at test time: a throwaway CA and the certificates it signs.

Tests never check keys in; they make them here (with the `cryptography` package) in a temporary
directory: a CA, a server certificate for 127.0.0.1/localhost, client certificates with a
chosen subject. `TlsFiles` writes them in the forms Kafka's ssl.* keys take: PEM files, inline
PEM strings, PKCS12 stores (and the CA as a PEM trust store).
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID

PASSWORD = "test-secret-0"
"""The password of every encrypted key and PKCS12 store made here."""


@dataclass(frozen=True)
class Issued:
    """A certificate with its private key (and the chain up to the CA)."""

    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate
    chain: tuple[x509.Certificate, ...] = ()

    @property
    def cert_pem(self) -> str:
        return "".join(
            c.public_bytes(serialization.Encoding.PEM).decode() for c in (self.cert, *self.chain)
        )

    def key_pem(self, password: str | None = None) -> str:
        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(password.encode())
            if password
            else serialization.NoEncryption()
        )
        return self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
        ).decode()

    def pkcs12(self, password: str = PASSWORD) -> bytes:
        return pkcs12.serialize_key_and_certificates(
            b"strom", self.key, self.cert, list(self.chain),
            serialization.BestAvailableEncryption(password.encode()),
        )  # fmt: skip

    def write_pem(self, path: Path, password: str | None = None) -> Path:
        """Key and chain in one PEM file (Kafka's PEM key store file)."""
        path.write_text(self.key_pem(password) + self.cert_pem)
        path.chmod(0o600)
        return path


def _name(subject: str) -> x509.Name:
    return x509.Name.from_rfc4514_string(subject)


def make_ca(subject: str = "CN=Strom Test CA,O=Strom") -> Issued:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(_name(subject))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    return Issued(key, cert)


def issue(
    ca: Issued,
    subject: str,
    *,
    hosts: tuple[str, ...] = ("localhost", "127.0.0.1"),
    days: int = 2,
) -> Issued:
    """A certificate for `subject`, valid for server and client use on `hosts`."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False,
        )
    )
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return Issued(key, builder.sign(ca.key, hashes.SHA256()), (ca.cert,))


@dataclass(frozen=True)
class TlsFiles:
    """A CA, a broker certificate and the files tests point ssl.* keys at."""

    directory: Path
    ca: Issued
    broker: Issued

    @classmethod
    def make(cls, directory: Path, broker_subject: str = "CN=broker,O=Strom") -> TlsFiles:
        directory.mkdir(parents=True, exist_ok=True)
        ca = make_ca()
        files = cls(directory, ca, issue(ca, broker_subject))
        files.ca_pem.write_text(ca.cert_pem)
        return files

    @property
    def ca_pem(self) -> Path:
        return self.directory / "ca.pem"

    def client(self, subject: str) -> Issued:
        return issue(self.ca, subject)

    def pem_keystore(self, name: str = "broker", issued: Issued | None = None) -> Path:
        """An encrypted PEM key store file (key password: PASSWORD)."""
        return (issued or self.broker).write_pem(self.directory / f"{name}.pem", PASSWORD)

    def pkcs12_keystore(self, name: str = "broker", issued: Issued | None = None) -> Path:
        path = self.directory / f"{name}.p12"
        path.write_bytes((issued or self.broker).pkcs12())
        return path

    def pem_listener(self, listener: str = "ssl", client_auth: str = "none") -> dict[str, str]:
        """ssl.* overrides for `listener` with a PEM key store file and the CA as trust store."""
        prefix = f"listener.name.{listener.lower()}."
        return {
            prefix + "ssl.keystore.type": "PEM",
            prefix + "ssl.keystore.location": str(self.pem_keystore()),
            prefix + "ssl.key.password": PASSWORD,
            prefix + "ssl.truststore.type": "PEM",
            prefix + "ssl.truststore.location": str(self.ca_pem),
            prefix + "ssl.client.auth": client_auth,
        }
