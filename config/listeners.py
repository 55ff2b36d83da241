"""Listener URLs and the listener-name -> security-protocol map.

Listener names are case-insensitive in Kafka (normalised to upper case), so the
same normalisation is applied everywhere a name is read.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from strom.config.config_error import ConfigError

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
"""Kafka's security protocols; Strom itself serves PLAINTEXT."""

_COMMA = re.compile(r"\s*,\s*")
_NAME = re.compile(r"[A-Za-z0-9_.\-]+")
_HOST = re.compile(r"[0-9A-Za-z\-%._:]*")
_URL = re.compile(r"(?P<name>[^:/]*)://(?:\[(?P<v6>[^\]]*)\]|(?P<host>.*)):(?P<port>-?[0-9]+)")
_EXPECTED_URL = (
    "listeners like NAME://host:port separated by commas (host may be empty, port 0-65535)"
)


class Listener(NamedTuple):
    """One endpoint: an empty host means all interfaces, port 0 an ephemeral port."""

    name: str
    host: str
    port: int

    @property
    def url(self) -> str:
        """Render back to NAME://host:port, bracketing IPv6 hosts."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


def split_list(value: str) -> list[str]:
    """Split a comma-separated setting; blank means empty."""
    text = value.strip()
    return _COMMA.split(text) if text else []


def parse_listener_names(value: str, key: str) -> list[str]:
    """Parse a comma-separated list of listener names, normalised to upper case."""
    names = split_list(value)
    for name in names:
        if not _NAME.fullmatch(name):
            raise ConfigError.invalid(key, value, "comma-separated listener names")
    return [name.upper() for name in names]


def parse_listeners(value: str, key: str = "listeners") -> list[Listener]:
    """Parse e.g. 'PLAINTEXT://127.0.0.1:9092,CONTROLLER://:9093' into listeners."""
    result: list[Listener] = []
    for item in split_list(value):
        match = _URL.fullmatch(item)
        if match is None or not _NAME.fullmatch(match["name"]):
            raise ConfigError.invalid(key, value, _EXPECTED_URL)
        host = match["v6"] if match["v6"] is not None else match["host"]
        port = int(match["port"])
        if not _HOST.fullmatch(host) or not 0 <= port <= 65535:
            raise ConfigError.invalid(key, value, _EXPECTED_URL)
        listener = Listener(match["name"].upper(), host, port)
        if any(other.name == listener.name for other in result):
            raise ConfigError.invalid(
                key, value, f"distinct listener names ({listener.name} repeats)"
            )
        result.append(listener)
    return result


def parse_protocol_map(value: str, key: str = "listener.security.protocol.map") -> dict[str, str]:
    """Parse 'NAME:PROTOCOL,...' into {NAME: PROTOCOL}."""
    expected = "NAME:PROTOCOL pairs separated by commas, PROTOCOL one of " + ", ".join(
        SECURITY_PROTOCOLS
    )
    result: dict[str, str] = {}
    for item in split_list(value):
        name, sep, protocol = (part.strip() for part in item.partition(":"))
        if not sep or not _NAME.fullmatch(name) or protocol.upper() not in SECURITY_PROTOCOLS:
            raise ConfigError.invalid(key, value, expected)
        if name.upper() in result:
            raise ConfigError.invalid(
                key, value, f"each listener name once ({name.upper()} repeats)"
            )
        result[name.upper()] = protocol.upper()
    return result


_METRICS_URL = re.compile(r"http://(?:\[(?P<v6>[0-9A-Fa-f:.%]*)\]|(?P<host>[0-9A-Za-z\-._]*)):(?P<port>[0-9]{1,5})")
METRICS_LISTENER_EXPECTED = (
    "empty (off) or http://host:port (host may be empty for all interfaces, port 0-65535; "
    "plain HTTP only)"
)


def parse_metrics_listener(value: str) -> tuple[str, int] | None:
    """`metrics.listener` as (host, port), None when off; ConfigError when malformed."""
    text = value.strip()
    if not text:
        return None
    match = _METRICS_URL.fullmatch(text)
    if match is None or int(match["port"]) > 65535:
        raise ConfigError.invalid("metrics.listener", value, METRICS_LISTENER_EXPECTED)
    host = match["v6"] if match["v6"] is not None else match["host"]
    return host, int(match["port"])
