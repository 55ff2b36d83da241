"""`strom format` and `strom random-uuid`: Kafka's `kafka-storage` for Strom.

`format` writes `meta.properties` (cluster id, node id, a directory id of its own) into every
`log.dirs` entry and `metadata.log.dir`, `bootstrap.checkpoint` (metadata.version) into the
metadata directory and, on a controller, its initial Raft state (`__cluster_metadata-0/
quorum-state` naming the voters; `strom.storage.meta_properties.format_directories`). Options
as kafka-storage's: `--cluster-id/-t` (required, a Kafka Uuid string: `strom random-uuid`),
`--config/-c` (optional here: without it Strom's defaults apply, as for `strom serve`),
`--override` (Strom's), `--ignore-formatted/-g` (skip formatted directories instead of
failing), `--feature/-f NAME=LEVEL` (a feature level to finalize on the new cluster: only
`eligible.leader.replicas.version` 0-1 besides metadata.version), and KIP-853's `--standalone/-s`, `--initial-controllers/-I`,
`--no-initial-controllers/-N`, and `--add-scram/-S` (repeatable) to seed SCRAM users, in
kafka-storage's syntax: `SCRAM-SHA-256=[name=alice,password=alice-secret]` (optionally
`iterations=8192`), or `[name=alice,salt=<base64>,saltedpassword=<base64>,iterations=...]`.
The credentials go into `bootstrap.checkpoint` and from there into the metadata log when the
cluster first starts, so the first users (the brokers' own, an admin) exist before any SASL
connection needs them.

Failures print one line to stderr and exit 1, as kafka-storage does.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import re
import secrets
import sys
import time
import uuid
from typing import Any

from strom.config import BrokerConfig, ConfigError, load_config
from strom.config.quorum import NOT_YET, VOTERS_KEY, Address, is_own_controller
from strom.coordinator.controller.result import ControllerError
from strom.coordinator.controller.scram import (
    HASHES,
    MIN_ITERATIONS,
    check_iterations,
    credential_records,
)
from strom.coordinator.controller.scram import MECHANISMS as SCRAM_MECHANISMS
from strom.coordinator.controller.state_machine import LATEST_METADATA_VERSION, check_features
from strom.coordinator.metadata.image import METADATA_VERSION
from strom.coordinator.metadata.kraft_checkpoint import encode_bootstrap
from strom.storage.meta_properties import (
    FormatError,
    format_directories,
    new_cluster_id,
    parse_kafka_uuid,
)
from strom.wire.formats.metadata.user_scram_credential_record import UserScramCredentialRecord

METADATA_VERSION_NAMES = {25: "4.0-IV3"}
"""Kafka's names of the metadata.version levels Strom writes."""


class StorageToolError(Exception):
    """A refusal of `strom format`, in one line."""


def add_storage_commands(sub: Any) -> None:
    """Add `format` and `random-uuid` to the `strom` argument parser's subcommands."""
    fmt = sub.add_parser("format", help="format the storage directories (as kafka-storage)")
    fmt.add_argument("--config", "-c", metavar="FILE", help="a server.properties file")
    fmt.add_argument("--override", metavar="KEY=VALUE", action="append", default=[])
    fmt.add_argument("--cluster-id", "-t", required=True, help="the cluster id to use")
    fmt.add_argument("--ignore-formatted", "-g", action="store_true")
    fmt.add_argument("--add-scram", "-S", metavar="MECHANISM=[name=...,password=...]",
                     action="append", default=[],
                     help="a SCRAM credential for the new cluster, as kafka-storage's")  # fmt: skip
    fmt.add_argument("--feature", "-f", metavar="NAME=LEVEL", action="append", default=[],
                     help="finalize a feature level, e.g. eligible.leader.replicas.version=1")  # fmt: skip
    quorum = fmt.add_mutually_exclusive_group()
    quorum.add_argument("--standalone", "-s", action="store_true",
                        help="initialize a single-node controller quorum (this node)")  # fmt: skip
    quorum.add_argument("--initial-controllers", "-I", metavar="VOTERS",
                        help="id@host:port:directory-id,... of the initial controllers")  # fmt: skip
    quorum.add_argument("--no-initial-controllers", "-N", action="store_true")
    sub.add_parser("random-uuid", help="print a random UUID (a cluster id)")


def run_storage_command(args: argparse.Namespace) -> int:
    """Run `format` or `random-uuid`; the exit code."""
    if args.command == "random-uuid":
        print(new_cluster_id())
        return 0
    try:
        config = load_config(args.config, args.override)
        for directory, kind in _format(config, args):
            level = LATEST_METADATA_VERSION
            name = METADATA_VERSION_NAMES.get(level, str(level))
            print(f"Formatting {kind} {directory} with metadata.version {name}.")
    except (ConfigError, FormatError, StorageToolError) as exc:
        print(exc, file=sys.stderr)
        return 1
    except OSError as exc:
        where = f" {exc.filename}" if exc.filename else ""
        print(f"cannot format{where}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0


def _format(config: BrokerConfig, args: argparse.Namespace) -> list[Any]:
    if config.cluster_id is not None and config.cluster_id != args.cluster_id:
        raise StorageToolError(
            f"--cluster-id {args.cluster_id} differs from cluster.id={config.cluster_id} in "
            "the configuration; use the same cluster id"
        )
    own_directory = _check_quorum_flags(config, args)
    levels = {**_features(args.feature), METADATA_VERSION: LATEST_METADATA_VERSION}
    scram = [_scram_record(flag) for flag in args.add_scram]
    voters = frozenset(config.quorum_voters or {config.node_id})
    formatted = format_directories(
        config.data_dirs,
        config.metadata_dir,
        cluster_id=args.cluster_id,
        node_id=config.node_id,
        new_uuid=uuid.uuid4,
        ignore_formatted=args.ignore_formatted,
        bootstrap=encode_bootstrap(levels, time.time_ns() // 1_000_000, scram),
        voters=voters if "controller" in config.roles else None,
        metadata_directory_id=own_directory,
    )
    if not formatted:
        print("All of the log directories are already formatted.")
    return formatted


_SCRAM_FLAG = re.compile(r"(?P<mechanism>[A-Z0-9-]+)=\[(?P<body>.*)\]")
_SCRAM_PAIR = re.compile(r'\s*(?P<key>[a-z]+)=(?:"(?P<quoted>[^"]*)"|(?P<plain>[^,]*))\s*(?:,|$)')


def _scram_record(flag: str) -> UserScramCredentialRecord:
    """One `--add-scram` value as the record it stores (never the password)."""
    syntax = "The format is MECHANISM=[name=NAME,password=PASSWORD] (or salt/saltedpassword)"
    match = _SCRAM_FLAG.fullmatch(flag.strip())
    if match is None:
        raise StorageToolError(f"Can't parse --add-scram argument (mechanism first). {syntax}")
    mechanism = match["mechanism"]
    ids = {name: number for number, name in SCRAM_MECHANISMS.items()}
    if mechanism not in ids:
        raise StorageToolError(
            f"--add-scram: unknown SCRAM mechanism {mechanism} (SCRAM-SHA-256 or SCRAM-SHA-512)"
        )
    fields: dict[str, str] = {}
    body, position = match["body"], 0
    while position < len(body):
        pair = _SCRAM_PAIR.match(body, position)
        if pair is None or pair.end() == position:
            raise StorageToolError(f"Can't parse --add-scram argument. {syntax}")
        fields[pair["key"]] = pair["quoted"] if pair["quoted"] is not None else pair["plain"]
        position = pair.end()
    name = fields.get("name")
    if not name:
        raise StorageToolError("--add-scram needs name=NAME")
    try:
        iterations = int(fields.get("iterations", str(MIN_ITERATIONS)))
        check_iterations(ids[mechanism], iterations)
    except (ValueError, ControllerError) as exc:
        raise StorageToolError(f"--add-scram for {name}: {exc}") from None
    if "password" in fields:
        salt = (base64.b64decode(fields["salt"]) if "salt" in fields
                else secrets.token_bytes(32))  # fmt: skip
        salted = hashlib.pbkdf2_hmac(
            HASHES[ids[mechanism]], fields["password"].encode(), salt, iterations
        )
    elif "salt" in fields and "saltedpassword" in fields:
        try:
            salt = base64.b64decode(fields["salt"], validate=True)
            salted = base64.b64decode(fields["saltedpassword"], validate=True)
        except ValueError:
            raise StorageToolError(f"--add-scram for {name}: salt and saltedpassword are "
                                   "base64") from None  # fmt: skip
    else:
        raise StorageToolError(f"--add-scram for {name} needs password= (or salt= and "
                               "saltedpassword=)")  # fmt: skip
    return credential_records(name, ids[mechanism], salted, salt, iterations)


def _features(flags: list[str]) -> dict[str, int]:
    """`--feature NAME=LEVEL` flags, checked against what this node supports."""
    features: dict[str, int] = {}
    for flag in flags:
        name, sep, level = flag.partition("=")
        name = name.strip()
        if not sep or not name or not level.strip().isdigit():
            raise StorageToolError(f"Can't parse feature={flag}. The format is NAME=LEVEL.")
        if name == METADATA_VERSION:
            raise StorageToolError(
                f"--feature {METADATA_VERSION} is refused: Strom writes "
                f"{METADATA_VERSION_NAMES[LATEST_METADATA_VERSION]}; remove it"
            )
        features[name] = int(level)
    try:
        check_features(LATEST_METADATA_VERSION, features)
    except ValueError as exc:
        raise StorageToolError(str(exc)) from exc
    return features


def _check_quorum_flags(config: BrokerConfig, args: argparse.Namespace) -> uuid.UUID | None:
    """KIP-853's flags, as kafka-storage checks them, and what Strom cannot run yet; the
    metadata directory id `--initial-controllers` gives this node, if any."""
    dynamic = args.standalone or args.initial_controllers is not None
    if dynamic and config.quorum_voters:
        raise StorageToolError(
            f"You cannot specify --standalone or --initial-controllers when {VOTERS_KEY} is "
            "set; remove one of them"
        )
    if args.standalone:
        if "controller" not in config.roles:
            raise StorageToolError("You cannot use --standalone on a broker node.")
        return None
    if args.initial_controllers is not None:
        voters = _parse_initial_controllers(args.initial_controllers)
        others = [v for v in voters if v[0] != config.node_id]
        own = [v for v in voters if v[0] == config.node_id]
        if others or not own or not is_own_controller(own[0][1], config.controller_endpoints,
                                                       same_node=True):  # fmt: skip
            raise StorageToolError(
                f"--initial-controllers names controllers other than this node: {NOT_YET}; "
                "use --standalone"
            )
        return own[0][2]
    if (
        "controller" in config.roles
        and not args.no_initial_controllers
        and not config.standalone
        and not config.quorum_voters
    ):
        raise StorageToolError(
            f"Because {VOTERS_KEY} is not set on this controller, you must specify one of the "
            "following: --standalone, --initial-controllers, or --no-initial-controllers."
        )
    return None


def _parse_initial_controllers(text: str) -> list[tuple[int, Address, uuid.UUID]]:
    """`id@host:port:directory-id,...` (KIP-853's DynamicVoters)."""
    out = []
    for entry in (e.strip() for e in text.split(",") if e.strip()):
        node, at, rest = entry.partition("@")
        address, _, directory = rest.rpartition(":")
        host, _, port = address.rpartition(":")
        try:
            out.append(
                (int(node), Address(host.strip("[]"), int(port)), parse_kafka_uuid(directory))
            )
        except ValueError as exc:
            raise StorageToolError(
                f"--initial-controllers entry {entry!r} is not id@host:port:directory-id ({exc})"
            ) from exc
        if not at:
            raise StorageToolError(f"--initial-controllers entry {entry!r} lacks the id@")
    return out
