"""The certificates librdkafka's test harness makes for its TLS tests, made the same way.

librdkafka's tests run against clusters that its harness (trivup) starts; with TLS, trivup makes
a throwaway PKI with the `openssl` command line and hands it to the tests as the client's
`ssl.*` settings in `test.conf` and as `SSL_*` environment variables (0097 reads the client's key
and certificate in each encoding from them). `make_pki()` does the same with the same commands:

- a CA (`openssl req -x509`, its key encrypted with the password) in PEM and DER, and a second,
  unrelated CA: `SSL_all_cas_pem` holds both, as trivup's "all CAs" file;
- the client's RSA key (`openssl genpkey`), its certificate signed by the CA, each in PEM and
  DER, and a PKCS#12 store with the key, the certificate and the CA (`openssl pkcs12
  -export -descert`);
- the broker's key and certificate (for 127.0.0.1 and localhost), signed by the CA. trivup
  puts them in a JKS key store, which only a JVM reads; Strom takes the same key and chain as
  a PEM key store (KIP-651) and the CA as a PEM trust store.

The files live in the given directory; nothing is checked in.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

PASSWORD = "12345678"
"""trivup's `ssl_key_pass` default: the password of every key and store."""
SUBJECT = "/C=NN/ST=ST/L=L/O=O/CN="
"""trivup's subject fields (its `mksubj`), the common name appended."""


class OpensslMissing(Exception):
    """No `openssl` command line: the message says how to install it."""


@dataclass(frozen=True)
class Pki:
    directory: Path

    def path(self, name: str) -> str:
        return str(self.directory / name)

    def client_conf(self) -> dict[str, str]:
        """The `test.conf` settings trivup writes for a TLS client."""
        return {
            "security.protocol": "SSL",
            "ssl.ca.location": self.path("ca.pem"),
            "ssl.certificate.location": self.path("client-pub.pem"),
            "ssl.key.location": self.path("client-priv.pem"),
            "ssl.key.password": PASSWORD,
        }

    def environment(self, client_auth: str) -> dict[str, str]:
        """The `SSL_*` variables trivup sets for the tests (`SSL_client_auth`: the broker's
        `ssl.client.auth`)."""
        return {
            "SSL_ca_pem": self.path("ca.pem"),
            "SSL_ca_der": self.path("ca.der"),
            "SSL_ca_key": self.path("ca.key"),
            "SSL_ca_password": PASSWORD,
            "SSL_all_cas_pem": self.path("all-cas.pem"),
            "SSL_client_auth": client_auth,
            "SSL_priv_pem": self.path("client-priv.pem"),
            "SSL_priv_der": self.path("client-priv.der"),
            "SSL_pub_pem": self.path("client-pub.pem"),
            "SSL_pub_der": self.path("client-pub.der"),
            "SSL_pkcs": self.path("client.pfx"),
            "SSL_password": PASSWORD,
        }

    def listener(self, name: str, client_auth: str) -> dict[str, str]:
        """A Strom listener's ssl.* settings: the broker's key store and the CA as trust store."""
        prefix = f"listener.name.{name.lower()}."
        return {
            prefix + "ssl.keystore.type": "PEM",
            prefix + "ssl.keystore.location": self.path("broker.keystore.pem"),
            prefix + "ssl.key.password": PASSWORD,
            prefix + "ssl.truststore.type": "PEM",
            prefix + "ssl.truststore.location": self.path("ca.pem"),
            prefix + "ssl.client.auth": client_auth,
        }


def make_pki(directory: Path) -> Pki:
    """Make the CA, the client's and the broker's keys and certificates in `directory`."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise OpensslMissing("`openssl` is not installed: apt-get install -y openssl")
    directory.mkdir(parents=True, exist_ok=True)
    pas = f"pass:{PASSWORD}"

    def run(*args: str) -> None:
        done = subprocess.run([openssl, *args], cwd=directory, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"openssl {' '.join(args[:2])} failed: {done.stderr.strip()[-500:]}")

    for name in ("ca", "unused-ca"):
        run("req", "-new", "-x509", "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "10000",
            "-passin", pas, "-passout", pas, "-subj", SUBJECT + name)  # fmt: skip
    run("x509", "-outform", "der", "-in", "ca.pem", "-out", "ca.der")
    (directory / "all-cas.pem").write_text(
        (directory / "ca.pem").read_text() + (directory / "unused-ca.pem").read_text()
    )
    # the client: an RSA key (unencrypted, as trivup's genpkey makes it), a certificate the CA
    # signs, both also in DER, and a PKCS#12 store holding them and the CA
    run("genpkey", "-algorithm", "RSA", "-out", "client-priv.pem")
    run("req", "-new", "-key", "client-priv.pem", "-out", "client.req", "-subj", SUBJECT + "librdkafka")
    run("x509", "-req", "-in", "client.req", "-CA", "ca.pem", "-CAkey", "ca.key", "-passin", pas,
        "-CAcreateserial", "-CAserial", "ca.srl", "-days", "10000", "-out", "client-pub.pem")  # fmt: skip
    run("x509", "-outform", "der", "-in", "client-pub.pem", "-out", "client-pub.der")
    run("rsa", "-outform", "der", "-in", "client-priv.pem", "-out", "client-priv.der")
    run("pkcs12", "-export", "-descert", "-out", "client.pfx", "-inkey", "client-priv.pem",
        "-in", "client-pub.pem", "-certfile", "ca.pem", "-passout", pas)  # fmt: skip
    # the broker: its name is the address the clients dial
    (directory / "broker.ext").write_text("[ext]\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run("genpkey", "-algorithm", "RSA", "-out", "broker.key")
    run("req", "-new", "-key", "broker.key", "-out", "broker.req", "-subj", SUBJECT + "localhost")
    run("x509", "-req", "-in", "broker.req", "-CA", "ca.pem", "-CAkey", "ca.key", "-passin", pas,
        "-CAserial", "ca.srl", "-days", "10000", "-extfile", "broker.ext", "-extensions", "ext",
        "-out", "broker.pem")  # fmt: skip
    run("pkcs8", "-topk8", "-in", "broker.key", "-out", "broker.key.enc", "-passout", pas)
    keystore = directory / "broker.keystore.pem"
    keystore.write_text(
        "".join((directory / name).read_text() for name in ("broker.key.enc", "broker.pem", "ca.pem"))
    )
    keystore.chmod(0o600)
    return Pki(directory)
