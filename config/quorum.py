"""The KRaft controller quorum as configured: voters, bootstrap servers, and what Strom runs.

`controller.quorum.voters` is Kafka's static quorum, `id@host:port` separated by commas (IPv6
hosts in brackets); `controller.quorum.bootstrap.servers` (KIP-853) lists `host:port` of
controllers to discover a dynamic quorum from. Both parse here once, into the typed values the
Raft driver uses (`BrokerConfig.quorum_voters`, `.quorum_bootstrap_servers`).

With neither set, Strom's embedded default applies: a combined node is a one-node quorum of
itself (as `kafka-storage format --standalone` would make it), so `strom serve` needs no
quorum settings. `runs_quorum` says when a node is a member of a multi-node Raft quorum (static
voters). `multi_node_refusal` says why a configuration needs what Strom cannot run yet (a
dynamic quorum from bootstrap servers); the broker refuses to start on it (fail closed:
starting a separate one-node cluster instead would split the cluster silently).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from strom.config.config_error import ConfigError
from strom.config.listeners import Listener

VOTERS_KEY = "controller.quorum.voters"
BOOTSTRAP_KEY = "controller.quorum.bootstrap.servers"
NOT_YET = "dynamic controller quorums (KIP-853) are not implemented yet"

_HOST_PORT = re.compile(r"(?:\[(?P<v6>[^\]]+)\]|(?P<host>[^\s:@\[\]]+)):(?P<port>[0-9]{1,5})")
_VOTER = re.compile(r"(?P<id>-?[0-9]+)@(?P<address>.+)")


class Address(NamedTuple):
    """A controller's host and port."""

    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def _parse_address(text: str, key: str, value: str, expected: str) -> Address:
    match = _HOST_PORT.fullmatch(text.strip())
    if match is None or not 0 <= int(match["port"]) <= 65535:
        raise ConfigError.invalid(key, value, expected)
    return Address(match["v6"] or match["host"], int(match["port"]))


def parse_voters(entries: Iterable[str], key: str = VOTERS_KEY) -> dict[int, Address]:
    """`id@host:port,...` -> {id: address}; ids are non-negative and distinct."""
    expected = "comma-separated id@host:port entries (e.g. 1@localhost:9093,2@localhost:9095)"
    value = ",".join(entries)
    voters: dict[int, Address] = {}
    for entry in entries:
        match = _VOTER.fullmatch(entry.strip())
        if match is None or int(match["id"]) < 0:
            raise ConfigError.invalid(key, value, expected)
        node = int(match["id"])
        if node in voters:
            raise ConfigError.invalid(key, value, f"each voter id once ({node} repeats)")
        voters[node] = _parse_address(match["address"], key, value, expected)
    return voters


def parse_bootstrap_servers(
    entries: Iterable[str], key: str = BOOTSTRAP_KEY
) -> tuple[Address, ...]:
    """`host:port,...` -> addresses, in order."""
    value = ",".join(entries)
    expected = "comma-separated host:port entries (e.g. localhost:9093,localhost:9095)"
    return tuple(_parse_address(entry, key, value, expected) for entry in entries)


_LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})


def is_own_controller(
    address: Address, controller_listeners: Iterable[Listener], *, same_node: bool = False
) -> bool:
    """Whether `address` reaches one of this node's (bound-port) controller listeners.

    An empty listener host binds every interface, and loopback names are one host; with
    `same_node` (the address is this node's own voter entry) only the port must agree, since
    a host name and the address a listener binds cannot be compared without resolving.
    """
    for lst in controller_listeners:
        if lst.port == 0 or lst.port != address.port:
            continue
        hosts = {lst.host, address.host}
        if same_node or "" in hosts or len(hosts) == 1 or hosts <= _LOOPBACK:
            return True
    return False


def runs_quorum(*, roles: frozenset[str], voters: Mapping[int, Address]) -> bool:
    """Whether the node is a member of a multi-node Raft quorum: static voters other than just
    this combined node, or a broker-only or controller-only role. Otherwise it is a one-voter
    quorum of itself, as `strom serve` is by default (the same controller host either way; a
    multi-node member must be formatted, and runs a controlled shutdown)."""
    return bool(voters) and (len(voters) > 1 or roles != {"broker", "controller"})


def multi_node_refusal(
    *,
    node_id: int,
    roles: frozenset[str],
    voters: Mapping[int, Address],
    bootstrap_servers: tuple[Address, ...],
    controller_listeners: tuple[Listener, ...],
) -> str | None:
    """Why this configuration needs what Strom cannot run yet (None: it can start).

    Static voters run (one node alone, or a Raft quorum); discovering a dynamic quorum from
    `controller.quorum.bootstrap.servers` (KIP-853) does not, unless they name only this node.
    """
    if voters:
        return None
    for address in bootstrap_servers:
        if not is_own_controller(address, controller_listeners):
            return (
                f"{BOOTSTRAP_KEY} names {address}, which is not this node's controller "
                f"listener: {NOT_YET}; list the quorum in {VOTERS_KEY} "
                "(id@host:port,...) instead"
            )
    if roles != {"broker", "controller"}:
        return (
            f"process.roles={','.join(sorted(roles))} without {VOTERS_KEY}: {NOT_YET}; list "
            f"the quorum in {VOTERS_KEY} (id@host:port,...)"
        )
    return None
