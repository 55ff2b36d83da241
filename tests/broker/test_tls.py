"""TLS listeners with Kafka's ssl.* keys: key and trust stores in every form Strom reads (PEM
file, inline PEM, PKCS12), JKS refused, mTLS (ssl.client.auth), principals from certificates,
protocol and cipher settings, a key store reloaded by AlterConfigs, a plaintext client and a
stalled handshake on a TLS port, and fetches served over TLS (no sendfile there).
Certificates are made at test time (`strom.broker.testing.certs`)."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
import trio

from strom.broker.security import listeners as listener_tls
from strom.broker.security.principal import ANONYMOUS, KafkaPrincipal, ssl_principal
from strom.broker.security.tls import TlsConfigError, openssl_cipher_name, server_context
from strom.broker.testing.certs import PASSWORD, TlsFiles
from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker, open_broker
from strom.config import load_config
from strom.config.security import SslSettings, parse_principal_mapping_rules
from strom.wire.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from strom.wire.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResponse
from strom.wire.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

LISTENERS = {"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0"}


@pytest.fixture
def files(tmp_path: Path) -> TlsFiles:
    return TlsFiles.make(tmp_path / "certs")


def ssl_endpoint(broker: EmbeddedBroker) -> str:
    endpoint = next(e for e in broker.endpoints if e.name == "SSL")
    return f"{endpoint.host}:{endpoint.port}"


def client_context(files: TlsFiles, subject: str | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(files.ca_pem))
    if subject is not None:
        path = files.client(subject).write_pem(files.directory / "client.pem")
        context.load_cert_chain(str(path))
    return context


async def api_versions(address: str, context: ssl.SSLContext) -> ApiVersionsResponse:
    client = await KafkaClient.connect(address, ssl_context=context)
    try:
        request = ApiVersionsRequest(client_software_name="t", client_software_version="1")
        return await client.request(request, 3, ApiVersionsResponse)
    finally:
        await client.aclose()


def settings(files: TlsFiles, extra: dict[str, str] | None = None) -> SslSettings:
    return load_config(extra={**LISTENERS, **files.pem_listener(), **(extra or {})}).ssl_settings(
        "SSL"
    )


@pytest.mark.trio
async def test_ssl_listener_serves_beside_plaintext(tmp_path: Path, files: TlsFiles) -> None:
    async with open_broker(tmp_path / "data", {**LISTENERS, **files.pem_listener()}) as broker:
        response = await api_versions(ssl_endpoint(broker), client_context(files))
        assert response.error_code == 0
        assert response.api_keys
        plain = await KafkaClient.connect(broker.bootstrap)  # the PLAINTEXT listener still works
        request = ApiVersionsRequest(client_software_name="t", client_software_version="1")
        assert (await plain.request(request, 3, ApiVersionsResponse)).error_code == 0
        await plain.aclose()


@pytest.mark.parametrize("form", ["inline-pem", "pkcs12"])
@pytest.mark.trio
async def test_key_store_forms(tmp_path: Path, files: TlsFiles, form: str) -> None:
    prefix = "listener.name.ssl."
    if form == "inline-pem":
        stores = {
            prefix + "ssl.keystore.type": "PEM",
            prefix + "ssl.keystore.key": files.broker.key_pem(PASSWORD),
            prefix + "ssl.keystore.certificate.chain": files.broker.cert_pem,
            prefix + "ssl.key.password": PASSWORD,
            prefix + "ssl.truststore.type": "PEM",
            prefix + "ssl.truststore.certificates": files.ca.cert_pem,
            prefix + "ssl.client.auth": "required",
        }
    else:
        trust = files.directory / "trust.p12"
        trust.write_bytes(files.ca.pkcs12())
        stores = {
            prefix + "ssl.keystore.type": "PKCS12",
            prefix + "ssl.keystore.location": str(files.pkcs12_keystore()),
            prefix + "ssl.keystore.password": PASSWORD,
            prefix + "ssl.truststore.type": "PKCS12",
            prefix + "ssl.truststore.location": str(trust),
            prefix + "ssl.truststore.password": PASSWORD,
            prefix + "ssl.client.auth": "required",
        }
    async with open_broker(tmp_path / "data", {**LISTENERS, **stores}) as broker:
        response = await api_versions(ssl_endpoint(broker), client_context(files, "CN=alice"))
        assert response.error_code == 0


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"listener.name.ssl.ssl.keystore.type": "JKS"}, "JKS key stores cannot be read"),
        ({"listener.name.ssl.ssl.key.password": "wrong-password"}, "is ssl.key.password right"),
        ({"listener.name.ssl.ssl.keystore.location": "/nonexistent/ks.pem"}, "cannot read"),
        ({"listener.name.ssl.ssl.keystore.key": "x"}, "set both ssl.keystore.key and"),
        ({"listener.name.ssl.ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"},
         "cannot restrict TLS 1.3 suites"),
        ({"listener.name.ssl.ssl.cipher.suites": "TLS_NO_SUCH_SUITE"}, "no such suite|none of"),
    ],
)  # fmt: skip
def test_bad_stores_fail_in_one_line_without_secrets(
    files: TlsFiles, extra: dict[str, str], message: str
) -> None:
    with pytest.raises(TlsConfigError, match=message) as info:
        server_context(settings(files, extra))
    assert PASSWORD not in str(info.value)
    assert "wrong-password" not in str(info.value)
    assert "\n" not in str(info.value)


def test_cipher_names_and_protocols(files: TlsFiles) -> None:
    assert openssl_cipher_name("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256") == (
        "ECDHE-RSA-AES128-GCM-SHA256"
    )
    assert openssl_cipher_name("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256") == (
        "ECDHE-ECDSA-CHACHA20-POLY1305"
    )
    assert openssl_cipher_name("TLS_RSA_WITH_AES_256_CBC_SHA") == "AES256-SHA"
    context, _ = server_context(
        settings(files, {
            "ssl.enabled.protocols": "TLSv1.2",
            "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        })
    )
    assert context.maximum_version == ssl.TLSVersion.TLSv1_2
    names = {c["name"] for c in context.get_ciphers() if c["protocol"] == "TLSv1.2"}
    assert names == {"ECDHE-ECDSA-AES256-GCM-SHA384"}
    only13, _ = server_context(settings(files, {"ssl.enabled.protocols": "TLSv1.3"}))
    assert only13.minimum_version == ssl.TLSVersion.TLSv1_3


@pytest.mark.trio
async def test_tls12_only_listener_refuses_a_tls13_only_client(tmp_path: Path, files: TlsFiles) -> None:
    overrides = {**LISTENERS, **files.pem_listener(), "ssl.enabled.protocols": "TLSv1.2"}
    async with open_broker(tmp_path / "data", overrides) as broker:
        context = client_context(files)
        context.minimum_version = ssl.TLSVersion.TLSv1_3
        with pytest.raises(trio.BrokenResourceError):
            await api_versions(ssl_endpoint(broker), context)
        context = client_context(files)
        assert (await api_versions(ssl_endpoint(broker), context)).error_code == 0


@pytest.mark.parametrize("client_auth", ["required", "requested", "none"])
@pytest.mark.trio
async def test_client_auth(tmp_path: Path, files: TlsFiles, client_auth: str) -> None:
    overrides = {**LISTENERS, **files.pem_listener("ssl", client_auth)}
    async with open_broker(tmp_path / "data", overrides) as broker:
        address = ssl_endpoint(broker)
        assert (await api_versions(address, client_context(files, "CN=alice"))).error_code == 0
        if client_auth == "required":
            with pytest.raises((trio.BrokenResourceError, ssl.SSLError)):
                await api_versions(address, client_context(files))
        else:
            assert (await api_versions(address, client_context(files))).error_code == 0
        stranger = TlsFiles.make(tmp_path / "other")  # a certificate of another CA
        context = client_context(files)
        path = stranger.client("CN=mallory").write_pem(tmp_path / "mallory.pem")
        context.load_cert_chain(str(path))
        if client_auth == "none":
            assert (await api_versions(address, context)).error_code == 0
        else:
            with pytest.raises((trio.BrokenResourceError, ssl.SSLError)):
                await api_versions(address, context)


def test_principals_from_certificates(files: TlsFiles) -> None:
    der = files.client("CN=alice,OU=ServiceUsers,O=Strom,C=DE").cert.public_bytes(
        __import__("cryptography.hazmat.primitives.serialization", fromlist=["Encoding"]).Encoding.DER
    )
    default = parse_principal_mapping_rules("DEFAULT")
    assert ssl_principal(der, default) == KafkaPrincipal("User", "CN=alice,OU=ServiceUsers,O=Strom,C=DE")
    rules = parse_principal_mapping_rules(
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/U, RULE:^CN=(.*?),.*$/$1/"
    )
    assert ssl_principal(der, rules) == KafkaPrincipal("User", "ALICE")
    assert ssl_principal(None, rules) == ANONYMOUS
    with pytest.raises(Exception, match=r"no ssl\.principal\.mapping\.rules rule applies"):
        ssl_principal(der, parse_principal_mapping_rules("RULE:^CN=bob$/bob/"))


@pytest.mark.trio
async def test_plaintext_client_on_a_tls_port_is_closed(tmp_path: Path, files: TlsFiles) -> None:
    async with open_broker(tmp_path / "data", {**LISTENERS, **files.pem_listener()}) as broker:
        host, port = ssl_endpoint(broker).rsplit(":", 1)
        plain = await KafkaClient.connect(f"{host}:{port}")
        request = ApiVersionsRequest(client_software_name="t", client_software_version="1")
        with trio.fail_after(5), pytest.raises(Exception):  # noqa: B017, PT011 - closed or garbage
            await plain.request(request, 3, ApiVersionsResponse)
        await plain.aclose()


@pytest.mark.trio
async def test_a_stalled_handshake_is_bounded(
    tmp_path: Path, files: TlsFiles, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(listener_tls, "HANDSHAKE_TIMEOUT_S", 0.3)
    async with open_broker(tmp_path / "data", {**LISTENERS, **files.pem_listener()}) as broker:
        host, port = ssl_endpoint(broker).rsplit(":", 1)
        stream = await trio.open_tcp_stream(host, int(port))
        await stream.send_all(b"\x16\x03\x01")  # the start of a ClientHello, then nothing
        with trio.fail_after(5):
            assert await stream.receive_some(100) == b""  # closed by the broker
        await stream.aclose()


async def describe_broker(address: str, context: ssl.SSLContext) -> dict[str, tuple[str | None, bool]]:
    client = await KafkaClient.connect(address, ssl_context=context)
    try:
        request = DescribeConfigsRequest(
            resources=[DescribeConfigsRequest.DescribeConfigsResource(4, "1", None)]
        )
        response = await client.request(request, 4, DescribeConfigsResponse)
    finally:
        await client.aclose()
    return {c.name: (c.value, c.is_sensitive) for c in response.results[0].configs}


async def alter_keystore(address: str, context: ssl.SSLContext, location: str) -> tuple[int, str | None]:
    client = await KafkaClient.connect(address, ssl_context=context)
    try:
        R = IncrementalAlterConfigsRequest
        request = R(resources=[R.AlterConfigsResource(4, "1", [
            R.AlterableConfig("listener.name.ssl.ssl.keystore.location", 0, location),
        ])])  # fmt: skip
        response = await client.request(request, 1, IncrementalAlterConfigsResponse)
    finally:
        await client.aclose()
    result = response.responses[0]
    return result.error_code, result.error_message


async def served_certificate(address: str, files: TlsFiles) -> bytes:
    host, port = address.rsplit(":", 1)
    stream = await trio.open_ssl_over_tcp_stream(host, int(port), ssl_context=client_context(files))
    await stream.do_handshake()
    der: bytes | None = stream.getpeercert(binary_form=True)
    await stream.aclose()
    assert der is not None
    return der


@pytest.mark.trio
async def test_key_store_reloaded_by_alter_configs(tmp_path: Path, files: TlsFiles) -> None:
    """A renewed certificate in a new file: AlterConfigs of the listener's key store location
    makes new connections use it; a certificate of another subject is refused (the broker keeps
    its old one); passwords are never shown by DescribeConfigs."""
    async with open_broker(tmp_path / "data", {**LISTENERS, **files.pem_listener()}) as broker:
        address = ssl_endpoint(broker)
        first = await served_certificate(address, files)
        renewed = files.directory / "renewed.pem"
        from strom.broker.testing.certs import issue

        issue(files.ca, "CN=broker,O=Strom").write_pem(renewed, PASSWORD)
        assert await alter_keystore(address, client_context(files), str(renewed)) == (0, None)
        second = await served_certificate(address, files)
        assert second != first
        imposter = files.directory / "imposter.pem"
        issue(files.ca, "CN=someone-else").write_pem(imposter, PASSWORD)
        code, message = await alter_keystore(address, client_context(files), str(imposter))
        assert code == 42
        assert message is not None
        assert "ssl.allow.dn.changes" in message
        assert await served_certificate(address, files) == second
        code, message = await alter_keystore(address, client_context(files), "/nonexistent.pem")
        assert code == 42
        assert message is not None
        assert "cannot read" in message
        configs = await describe_broker(address, client_context(files))
        assert configs["listener.name.ssl.ssl.key.password"] == (None, True)
        assert configs["listener.name.ssl.ssl.keystore.location"] == (str(renewed), False)
        assert configs["ssl.keystore.password"] == (None, True)
