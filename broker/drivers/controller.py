"""`ControllerDriver`: the thin trio shell around `Controller` and the metadata log.

One command at a time (a FIFO trio lock): the state machine plans it against
the current image; its records are appended as one batch and fsynced in a
worker thread; only then are they replayed into the image, the image
published to subscribers, and the response returned. Commit and publish are
shielded from cancellation so a cancelled caller never leaves the log ahead
of the image. Single node: this node is broker and controller, the Raft epoch
is bumped on every start (as a one-voter election would), and the first start
formats `meta.properties` and finalizes metadata.version.

Brokers: BrokerRegistration and BrokerHeartbeat are commands like the admin ones;
`watch_leases` fences brokers whose lease runs out. This node's own broker registers
through `local_broker` (a `BrokerLifecycle` over `LocalControllerChannel`, the in-process
path a remote broker's RPCs will take): `open` registers it with the configured advertised
endpoints unless told not to, `start` (re-)registers it with the endpoints actually bound.

A command whose records the metadata log refuses (ENOSPC, EIO) changes
nothing: the log is back at its last good length, the image is not touched,
and the command answers with error codes (`fail_unwritten`), logged once per
WRITE_ERROR_LOG_INTERVAL_S however many commands fail. The next command
simply tries again, so the controller works again as soon as the disk does.
"""

from __future__ import annotations

import logging
import math
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import trio

from strom.broker import runtime
from strom.broker.drivers.controller_api import (
    SNAPSHOT_INTERVAL_BYTES,
    LocalControllerChannel,
    MetadataController,
    monotonic_ms,
    prepare_node_directories,
    wall_clock_ms,
)
from strom.config import BrokerConfig, Listener
from strom.config.quorum import Address
from strom.coordinator.controller.result import (
    ApiError,
    ControllerError,
    ControllerResult,
    fail_unwritten,
)
from strom.coordinator.controller.state_machine import LATEST_METADATA_VERSION, Controller
from strom.coordinator.metadata.image import METADATA_VERSION, MetadataImage, Provenance
from strom.coordinator.metadata.loader import load_metadata
from strom.coordinator.metadata.log import MetadataLog
from strom.coordinator.metadata.metadata_records import MetadataError
from strom.coordinator.metadata.properties import read_bootstrap_scram
from strom.coordinator.metadata.snapshot import (
    SnapshotId,
    delete_snapshots_before,
    list_snapshots,
    write_snapshot,
)
from strom.storage.raft.raft_disk import holds_quorum_log
from strom.wire.errors import ErrorCode
from strom.wire.message import Message

if TYPE_CHECKING:
    pass

log = logging.getLogger("strom.controller")

R = TypeVar("R")
WRITE_ERROR_LOG_INTERVAL_S = 10.0
"""A failing disk refuses every command (Metadata auto-creation too): one log line per interval."""


def _load(
    config: BrokerConfig, new_uuid: Callable[[], uuid.UUID]
) -> tuple[str, MetadataLog, MetadataImage, dict[str, int] | None]:
    """Blocking start-up: meta.properties in every directory, the bootstrap checkpoint
    `strom format` may have written, then the log and image (see `loader`)."""
    directory = Path(config.metadata_dir)
    if holds_quorum_log(directory):
        raise MetadataError(
            f"{directory} holds the metadata log of a Raft quorum member (quorum-state): a "
            "single node cannot reuse it; configure controller.quorum.voters as this node had "
            "it, or use an empty metadata.log.dir"
        )
    cluster_id, bootstrap = prepare_node_directories(config, new_uuid)
    metadata_log, image = load_metadata(directory, segment_bytes=config.metadata_log_segment_bytes)
    return cluster_id, metadata_log, image, bootstrap


class ControllerDriver(MetadataController):
    """Serialized, durable controller commands. Create with `await ControllerDriver.open(config)`;
    the commands themselves are `MetadataController`'s, over `_run_command` here."""

    def __init__(
        self,
        config: BrokerConfig,
        controller: Controller,
        metadata_log: MetadataLog,
        *,
        cluster_id: str,
        clock: Callable[[], int],
        snapshot_interval_bytes: int,
    ) -> None:
        super().__init__(config, controller, cluster_id=cluster_id)
        self._log = metadata_log
        self._clock = clock
        self._snapshot_interval = snapshot_interval_bytes
        self._since_snapshot = 0
        self._epoch = max(metadata_log.last_epoch, controller.image.provenance.epoch, 0) + 1
        self._lock = trio.Lock()
        self._closed = False
        self._quiet_until = -math.inf
        self._unlogged = 0
        """Refused commands not yet logged (one line per WRITE_ERROR_LOG_INTERVAL_S)."""
        self.local_broker = self._local_broker_through(LocalControllerChannel(self))
        """This node's broker, registered with and heartbeating to this controller."""

    @classmethod
    async def open(
        cls,
        config: BrokerConfig,
        *,
        clock: Callable[[], int] = wall_clock_ms,
        new_uuid: Callable[[], uuid.UUID] = runtime.new_uuid,
        snapshot_interval_bytes: int = SNAPSHOT_INTERVAL_BYTES,
        metadata_version: int = LATEST_METADATA_VERSION,
        features: Mapping[str, int] | None = None,
        register: bool = True,
    ) -> ControllerDriver:
        """Recover the metadata, bootstrap a new cluster, become the active controller and
        (with `register`) register this node's broker with its configured endpoints."""
        cluster_id, metadata_log, image, bootstrap = await runtime.to_thread(
            _load, config, new_uuid
        )
        if bootstrap is not None:  # what `strom format` chose wins over the defaults
            metadata_version = bootstrap.pop(METADATA_VERSION, metadata_version)
            features = bootstrap
        controller = Controller(config, new_uuid=new_uuid, image=image, cluster_id=cluster_id)
        own_broker = config.node_id if "broker" in config.roles else None
        controller.activate(monotonic_ms(), except_broker=own_broker)
        driver = cls(
            config,
            controller,
            metadata_log,
            cluster_id=cluster_id,
            clock=clock,
            snapshot_interval_bytes=snapshot_interval_bytes,
        )
        try:
            records = controller.bootstrap(
                metadata_version, features, read_bootstrap_scram(Path(config.metadata_dir))
            )
            async with driver._lock:
                if records:
                    await driver._commit(records)
            if register:
                await driver.start()
        except BaseException:
            with trio.CancelScope(shield=True):
                await driver.close()
            raise
        return driver

    # --- reading ---------------------------------------------------------------

    @property
    def epoch(self) -> int:
        """The Raft epoch this node writes under."""
        return self._epoch

    @property
    def is_active(self) -> bool:
        """A single node is always its own active controller (while open)."""
        return not self._closed

    @property
    def active_controller_id(self) -> int | None:
        """This node: the only controller."""
        return self.node_id

    def controller_address(self, node_id: int) -> Address | None:
        """Its voter entry, if controller.quorum.voters names this node (else None: a standalone
        node has no controller address of its own)."""
        return self._config.quorum_voters.get(node_id)

    # --- life cycle ------------------------------------------------------------

    async def start(self, endpoints: Sequence[Listener] | None = None) -> None:
        """(Re-)register this node's broker with `endpoints` (default: the configured
        advertised endpoints) unless it is already registered with exactly those, and wait
        until it is unfenced."""
        wanted = list(endpoints if endpoints is not None else self._config.advertised_endpoints)
        await self.local_broker.register(wanted)

    async def close(self) -> None:
        """Wait for the command in flight, then close the log (idempotent)."""
        async with self._lock:
            if not self._closed:
                self._closed = True
                self._log.close()

    # --- snapshots -------------------------------------------------------------

    async def snapshot(self) -> SnapshotId | None:
        """Write a snapshot of the current image now (None if one exists for it)."""
        async with self._lock:
            self._check_open()
            with trio.CancelScope(shield=True):
                written = await self._write_snapshot()
            return written

    # --- internals ---------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise trio.ClosedResourceError("the controller is closed")

    async def _await_activation(self) -> None:
        """A single node is active from `open` on: nothing to wait for."""

    async def _run_command(
        self,
        command: Callable[[int], ControllerResult[R]],
        *,
        wait: bool = True,
        timeout_ms: int | None = None,
    ) -> R:
        """Run `command(next offset of the metadata log)` under the lock, append its records;
        never NotActiveController (`wait` has nothing to wait for: this node is always active)
        nor CommandTimedOut (its appends are local and shielded: `timeout_ms` is not needed)."""
        async with self._lock:
            self._check_open()
            result = command(self._log.end_offset)
            if result.records:
                try:
                    await self._commit(result.records)
                except OSError as exc:
                    return self._unwritten(result.response, exc)
            return result.response

    def _unwritten(self, response: R, exc: OSError) -> R:
        """The answer when the metadata log refused the records: nothing changed, and the
        log is back at its last good length, so the same command works once space is back."""
        cause = f"the metadata log could not be written: {exc.strerror or exc}"
        now = time.monotonic()
        if now >= self._quiet_until:
            self._quiet_until = now + WRITE_ERROR_LOG_INTERVAL_S
            also = f" ({self._unlogged} more since the last report)" if self._unlogged else ""
            self._unlogged = 0
            log.error(
                "%s in %s; the command was refused and nothing changed%s: free space or fix "
                "the disk, the controller carries on by itself",
                cause, self._log.directory, also,
            )  # fmt: skip
        else:
            self._unlogged += 1
        if isinstance(response, Message):
            return fail_unwritten(response, ApiError(ErrorCode.UNKNOWN_SERVER_ERROR, cause))
        raise ControllerError(ErrorCode.KAFKA_STORAGE_ERROR, cause) from exc

    async def _commit(self, records: Sequence[Message]) -> None:
        """Append durably, replay, publish, maybe snapshot (caller holds the lock)."""
        timestamp = self._clock()
        last_offset = self._log.end_offset + len(records) - 1
        # Replay first: records that would not apply must never become durable.
        delta = self._controller.stage(records, Provenance(last_offset, self._epoch, timestamp))
        with trio.CancelScope(shield=True):
            batch = await runtime.to_thread(
                partial(self._log.append, records, epoch=self._epoch, timestamp=timestamp)
            )
            self._controller.adopt(delta)
            image = self._controller.image
            await self._publish(image, delta)
            self._since_snapshot += batch.size
            if self._since_snapshot >= self._snapshot_interval:
                try:
                    await self._write_snapshot()
                except OSError as exc:  # the command is durable; the next one retries
                    self._since_snapshot = self._snapshot_interval
                    log.error("metadata snapshot failed (%s); retried after the next command", exc)

    async def _write_snapshot(self) -> SnapshotId | None:
        image = self._controller.image
        if image.provenance.offset < 0:
            return None
        snapshot_id = SnapshotId(image.provenance.offset + 1, image.provenance.epoch)
        self._since_snapshot = 0

        def write() -> bool:
            directory = self._log.directory
            if snapshot_id in list_snapshots(directory):
                return False
            write_snapshot(directory, image, snapshot_id)
            delete_snapshots_before(directory, snapshot_id)
            self._log.delete_before(snapshot_id.end_offset)
            return True

        if not await runtime.to_thread(write):
            return None
        log.info("metadata snapshot %s written", snapshot_id.file_name)
        return snapshot_id

