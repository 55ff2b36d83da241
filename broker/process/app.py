"""The broker process: storage, controller, listeners, background work, shutdown.

`Broker.run()` opens the partition logs (recovering after an unclean stop),
opens the controller and its metadata log, binds the listeners (or serves on sockets
inherited by socket activation, `activation`), reports the
bound endpoints through `task_status.started()`, and serves until `shutdown()`
is called or the task is cancelled. Shutdown stops accepting, lets in-flight
requests finish within a deadline, then closes the logs cleanly (writing the
clean-shutdown marker that lets the next start skip recovery).
"""

from __future__ import annotations

import functools
import logging
import socket
from collections.abc import Awaitable, Callable
from functools import partial
from importlib.metadata import version as package_version
from pathlib import Path

import trio

from strom.broker import runtime
from strom.broker.admin.forwarding import ForwardingTopicCreator
from strom.broker.core_state import wall_clock_ms
from strom.broker.data.coordinator_start import Coordinators
from strom.broker.data.fetch_sessions import FetchSessionCache
from strom.broker.data.follower_sessions import forget_session
from strom.broker.data.lookup import MinIsrCache
from strom.broker.data.producer_ids import ProducerIdManager
from strom.broker.data.txn_verifier import CoordinatorVerifier
from strom.broker.data.txn_verify import TransactionVerification
from strom.broker.data.waiters import DataWaiters
from strom.broker.drivers.controller_channel import RemoteControllerChannel
from strom.broker.drivers.controller_forwarder import controller_forwarder
from strom.broker.drivers.lifecycle import RegistrationError
from strom.broker.drivers.quorum_controller import QuorumController
from strom.broker.network.faults import FaultInjector
from strom.broker.network.server import Server
from strom.broker.process import socket_activation
from strom.broker.replication.partitions import (
    ImageFollower,
    heartbeat_loop,
    log_config,
    report_storage,
)
from strom.broker.replication.replication_manager import ReplicationManager
from strom.broker.runtime import StreamListener
from strom.broker.security.authorization import BrokerAuthorizer
from strom.broker.security.listeners import ListenerTls
from strom.broker.security.oauth import JwksError
from strom.broker.security.sasl_listeners import SaslListeners
from strom.broker.security.tls import TlsConfigError
from strom.broker.state import BrokerState
from strom.config import BrokerConfig, Listener
from strom.coordinator.metadata.delta import MetadataDelta
from strom.coordinator.metadata.image import BROKER_RESOURCE, MetadataImage
from strom.coordinator.metadata.metadata_records import MetadataError
from strom.storage.cleaner.log_cleaner import CleanerSettings, LogCleaner
from strom.storage.dir_lock import DirectoryLock, DirectoryLockedError
from strom.storage.log.log_manager import LogManager
from strom.storage.log_errors import KafkaStorageError
from strom.storage.meta_properties import FormatError
from strom.storage.raft.quorum_state import QuorumStateError
from strom.storage.raft.raft_log import RaftLogError

log = logging.getLogger("strom.broker")

SHUTDOWN_GRACE_SECONDS = 4.0
CONTROLLED_SHUTDOWN_TIMEOUT_SECONDS = 300.0
"""How long SIGTERM waits for the controller to approve a controlled shutdown (Kafka's broker
waits up to its 5-minute shutdown bound; it has no key of its own)."""
FLUSH_CHECK_SECONDS = 0.05


class StartupError(Exception):
    """The broker cannot start; the message says why and what to change, in one line."""


class Broker:
    def __init__(
        self, config: BrokerConfig, inherited: dict[str, list[socket.socket]] | None = None
    ) -> None:
        self.config = config
        self._inherited = dict(inherited or {})
        """Listening sockets passed by socket activation, by upper-cased listener name
        (`strom.broker.process.socket_activation`): served instead of binding those listeners."""
        self.endpoints: list[Listener] = []
        """Advertised client endpoints, with the bound ports."""
        self.controller_endpoints: list[Listener] = []
        """The bound controller listeners (controller.listener.names), where controller APIs
        such as BrokerRegistration and BrokerHeartbeat are answered."""
        self.data_dirs = [str(Path(d).resolve()) for d in config.data_dirs]
        self._shutdown = trio.Event()
        self.state: BrokerState | None = None
        """What handlers see, once serving (tests reach the controller and logs through it)."""
        self.metrics_address: str | None = None
        """host:port of the bound metrics.listener, once serving (None: off)."""
        self.cleaner: LogCleaner | None = None
        """The log cleaner thread (strom.storage.cleaner.log_cleaner), once the logs are open."""

    def shutdown(self) -> None:
        """Begin a graceful shutdown (safe to call more than once)."""
        self._shutdown.set()

    async def run(self, *, task_status: trio.TaskStatus[list[Listener]] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            await self._locked_run(task_status)
        finally:
            socket_activation.close_all(self._inherited)

    async def _locked_run(self, task_status: trio.TaskStatus[list[Listener]]) -> None:
        config = self.config
        refusal = config.multi_node_refusal()
        if refusal is not None:
            raise StartupError(refusal)
        directories = [Path(d) for d in (*config.data_dirs, config.metadata_dir)]
        try:
            lock = DirectoryLock(directories)
        except OSError as exc:
            raise StartupError(f"cannot use data directory {exc.filename}: {exc.strerror}; "
                               "check log.dirs and metadata.log.dir") from exc
        except DirectoryLockedError as exc:
            raise StartupError(str(exc)) from exc
        try:
            await self._run(config, task_status)
        finally:
            lock.release()

    async def _run(self, config: BrokerConfig, task_status: trio.TaskStatus[list[Listener]]) -> None:
        try:
            # a one-voter quorum's broker only ever reaches its own controller, in process
            remote = partial(RemoteControllerChannel.for_broker, config) if config.runs_quorum else None
            controller = await QuorumController.open(config, remote=remote)
        except (MetadataError, FormatError, RaftLogError, QuorumStateError) as exc:
            raise StartupError(f"cannot use the metadata in {config.metadata_dir}: {exc}") from exc
        try:
            logs = LogManager(
                [Path(d) for d in config.data_dirs],
                wall_clock_ms,
                topic_config=lambda topic: log_config(
                    controller.image.broker_config_layers(config).effective(),
                    controller.image,
                    topic,
                ),
            )
            await runtime.to_thread(logs.load)
            controller.local_broker.previous_broker_epoch = logs.previous_broker_epoch
            effective = controller.image.broker_config_layers(config).effective()
            self.cleaner = LogCleaner(logs, CleanerSettings.of(effective), wall_clock_ms)
            self.cleaner.start()
            try:
                await self._serve(config, logs, controller, task_status)
            finally:
                with trio.CancelScope(shield=True):
                    await runtime.to_thread(self.cleaner.shutdown)
                    logs.broker_epoch = controller.local_broker.broker_epoch
                    await runtime.to_thread(logs.close)
                    log.info("Strom stopped; logs closed cleanly")
        finally:
            with trio.CancelScope(shield=True):
                if self.state is not None:  # connections to the active controller, if any
                    await self.state.forwarder.aclose()
                    await self.state.txn_verifier.aclose()  # ... and to other brokers
                    if self.state.transactions is not None:
                        await self.state.transactions.markers.aclose()
                await controller.close()

    async def _serve(
        self,
        config: BrokerConfig,
        logs: LogManager,
        controller: QuorumController,
        task_status: trio.TaskStatus[list[Listener]],
    ) -> None:
        """Serve until shutdown. A node first serves its controller listeners and runs its Raft
        replica (the other voters of a multi-node quorum must reach it to elect; a one-voter
        quorum elects itself at once), then registers with the active controller, and serves
        its other listeners only once it is unfenced and follows the metadata, as Kafka's broker
        enables request processing only after "the broker to be unfenced". Until then the
        sockets are bound and connections wait in the backlog: a restarted node's image is
        empty or stale (its Raft replica applies nothing before the quorum's high watermark
        reaches it), and answering clients from it told them the cluster had no brokers and
        their topics did not exist (librdkafka then decommissioned every broker it knew, marked
        the topic non-existent and took its assigned partitions off their brokers; see
        docs/replication.md, the queue test's results)."""
        try:  # before any socket is bound: a refusal here leaves nothing open
            tls = ListenerTls(controller.image.broker_config_layers(config).effective())
            sasl = SaslListeners(
                config, lambda user, mechanism: controller.image.scram_credential(user, mechanism),
                wall_clock_ms,
            )  # fmt: skip
            await sasl.load_keys()
        except (TlsConfigError, JwksError) as exc:
            raise StartupError(str(exc)) from exc
        bound = await self._listen(config)
        metrics_sockets = await self._listen_metrics(config)
        try:
            faults = await FaultInjector.from_environment()
        except OSError as exc:
            raise StartupError(str(exc)) from exc
        self.endpoints = _advertised(config, [b for b, _ in bound])
        self.controller_endpoints = [b for b, _ in bound if b.name in config.controller_listeners]
        forwarder = controller_forwarder(config, controller)
        state = BrokerState(
            config, config.node_id, controller.cluster_id, self.endpoints, controller, logs, forwarder
        )
        build_services(state)
        state.topic_creator = ForwardingTopicCreator(state)
        state.tls = tls
        if config.authorizer_class_name:
            state.authorizer = BrokerAuthorizer(config)
        controller.subscribe_deltas(partial(_reload_tls, state, tls))
        state.raft = controller.raft
        self.state = state
        if "controller" in config.roles:
            elections = state.metrics.elections
            controller.subscribe_deltas(
                lambda image, delta: elections.follow(image, delta, controller.is_active)
            )
        server = Server(state, tls, sasl)
        server.faults = faults
        if self.cleaner is not None:
            controller.subscribe_deltas(partial(_reconfigure_cleaner, state, self.cleaner))
        endpoint = None
        if metrics_sockets:
            from strom.broker.monitoring.endpoint import MetricsEndpoint  # only when it is on

            endpoint = MetricsEndpoint(state, server)
        metrics_url = _metrics_url(metrics_sockets)
        self.metrics_address = metrics_url.removeprefix("http://") or None
        log.info(
            "Strom %s started: node.id=%d listeners=%s log.dirs=%s%s",
            package_version("strom"),
            config.node_id,
            ",".join(b.url for b, _ in bound),
            ",".join(self.data_dirs),
            f" metrics={metrics_url}" if metrics_url else "",
        )
        failure: RegistrationError | None = None
        async with trio.open_nursery() as connections:
            async with trio.open_nursery() as accepting:

                def serve(controller_listeners: bool) -> None:
                    for lst, sockets in bound:
                        if (lst.name in config.controller_listeners) == controller_listeners:
                            for socket_listener in sockets:
                                accepting.start_soon(
                                    server.serve_listener, socket_listener, lst.name, connections
                                )

                serve(controller_listeners=True)
                if faults is not None:
                    accepting.start_soon(faults.run)
                if endpoint is not None:
                    accepting.start_soon(endpoint.serve, metrics_sockets)
                await accepting.start(controller.run)
                try:
                    await controller.start(self.endpoints)
                except RegistrationError as exc:
                    failure = exc
                else:  # unfenced: caught up with the metadata log
                    if "broker" in config.roles:  # a controller alone hosts no partition
                        await _follow(state, controller)
                if failure is None:
                    # the coordinators of the partitions led here (groups of __consumer_offsets,
                    # transactions of __transaction_state) are loaded before clients come in;
                    # any other starts on first need (strom.broker.data.coordinator_start)
                    coordinators = state.coordinators = Coordinators(
                        state, state.replication, state.waiters, state.min_isr,
                        state.producer_ids, accepting,
                    )  # fmt: skip
                    await coordinators.start_led()
                    state.txn_verification.verifier = state.txn_verifier  # the coordinator answers now
                    serve(controller_listeners=False)  # see _serve's docstring
                    if endpoint is not None:
                        endpoint.serving = True
                    if "broker" in config.roles:
                        # Kafka's BrokerLifecycleManager line, which tools wait for (e.g.
                        # Testcontainers' KafkaContainer)
                        log.info("The broker is unfenced and serving: Transitioning from "
                                 "RECOVERY to RUNNING")  # fmt: skip
                    accepting.start_soon(_flush_loop, state)
                    if sasl.validators:
                        accepting.start_soon(sasl.refresh_keys)
                    heartbeats = trio.CancelScope()
                    if "broker" in config.roles:
                        accepting.start_soon(_within, heartbeats, controller.local_broker.run)
                    accepting.start_soon(controller.watch_leases)
                    accepting.start_soon(controller.watch_leadership)
                    accepting.start_soon(_maintenance_loop, state, logs)
                    accepting.start_soon(heartbeat_loop, state)
                    accepting.start_soon(state.replication.run)
                    task_status.started(self.endpoints)
                    await self._shutdown.wait()
                    if _controlled_shutdown_wanted(config, controller):
                        heartbeats.cancel()  # the controlled shutdown's heartbeats replace them
                        await _controlled_shutdown(config, controller)
                    log.info("shutting down: no new connections; finishing in-flight requests")
                    await controller.shutdown()  # resign: another voter takes over at once
                accepting.cancel_scope.cancel()
            server.stop_accepting_requests()
            connections.cancel_scope.deadline = trio.current_time() + SHUTDOWN_GRACE_SECONDS
        if failure is not None:
            raise StartupError(str(failure)) from failure

    async def _listen_metrics(self, config: BrokerConfig) -> list[trio.SocketListener]:
        """Bind metrics.listener, if set (before anything is served: a port in use stops
        start-up like any listener's)."""
        where = config.metrics_endpoint
        if where is None:
            return []
        host, port = where
        try:
            return await trio.open_tcp_listeners(port, host=host or None)
        except OSError as exc:
            raise StartupError(
                f"cannot listen on metrics.listener={config.metrics_listener} ({exc.strerror}): "
                "stop what uses the port or change metrics.listener"
            ) from exc

    async def _listen(self, config: BrokerConfig) -> list[tuple[Listener, list[StreamListener]]]:
        """Bind every listener (on the runtime's network), or adopt the socket activation passed
        for it."""
        unused = set(self._inherited) - {lst.name.upper() for lst in config.listener_endpoints}
        if unused:
            raise StartupError(
                f"socket activation passed sockets named {','.join(sorted(unused))}, which name "
                "no entry of 'listeners': name each socket after a listener"
            )
        network = runtime.current().network
        bound: list[tuple[Listener, list[StreamListener]]] = []
        for lst in config.listener_endpoints:
            inherited = self._inherited.pop(lst.name.upper(), None)
            if inherited is not None:
                try:
                    adopted, sockets = socket_activation.adopt(lst, inherited)
                    bound.append((adopted, list(sockets)))
                except socket_activation.ActivationError as exc:
                    socket_activation.close_all({lst.name: inherited})
                    raise StartupError(str(exc)) from exc
                continue
            try:
                listeners = await network.listen(lst.host, lst.port)
            except OSError as exc:
                raise StartupError(
                    f"cannot listen on {lst.url} ({exc.strerror}): stop what uses the port "
                    "or change 'listeners'"
                ) from exc
            port = network.bound_port(listeners[0])
            bound.append((lst._replace(port=port), listeners))
        return bound


def _metrics_url(sockets: list[trio.SocketListener]) -> str:
    """http://host:port of the bound metrics listener ("" when off)."""
    if not sockets:
        return ""
    host, port = sockets[0].socket.getsockname()[:2]
    return f"http://{f'[{host}]' if ':' in host else host}:{port}"


def build_services(state: BrokerState) -> None:
    """The broker's services, each built once from `state` and handed down as its fields."""
    state.replication = ReplicationManager(state)
    state.waiters = DataWaiters()
    state.replication.high_watermark_listeners.append(state.waiters.high_watermark_moved)
    state.fetch_sessions = FetchSessionCache(state.config.max_incremental_fetch_session_cache_slots)
    state.fetch_sessions.on_remove = functools.partial(
        forget_session, state.waiters, state.replication
    )
    state.min_isr = MinIsrCache()
    state.producer_ids = ProducerIdManager(state)
    state.txn_verification = TransactionVerification()
    state.txn_verifier = CoordinatorVerifier(state)


async def _follow(state: BrokerState, controller: QuorumController) -> None:
    """Follow the metadata from now on: open and delete logs, lead and follow partitions.

    A quorum member starts following only once it is unfenced, i.e. its metadata has caught up
    with its registration (Kafka's brokers publish metadata only after the initial catch-up):
    the image replayed from its own metadata log at start may be far behind, and acting on it
    would delete logs of partitions created since, or lead a partition that has moved on.
    Until then its data-plane handlers answer NOT_LEADER_OR_FOLLOWER (`BrokerCore.followed`)."""
    follower = ImageFollower(state, state.replication)
    await follower(controller.image)
    controller.subscribe_deltas(follower)
    # after the logs and roles moved: a parked fetch woken by a new image sees them
    controller.subscribe(lambda _image: state.waiters.wake_all())


def _broker_configs_changed(state: BrokerState, delta: MetadataDelta) -> bool:
    """Whether `delta` changed this broker's dynamic configs (its own or the cluster default)."""
    changed = delta.changed_configs
    return (BROKER_RESOURCE, str(state.node_id)) in changed or (BROKER_RESOURCE, "") in changed


def _reload_tls(state: BrokerState, tls: ListenerTls, image: MetadataImage, delta: MetadataDelta) -> None:
    """Rebuild TLS contexts after a dynamic change of this broker's configs (even to the same
    value: that is how a key store rewritten in place is reloaded, `strom.broker.security.listeners`)."""
    if _broker_configs_changed(state, delta):
        tls.refresh(image.broker_config_layers(state.config).effective(), reload=True)


def _reconfigure_cleaner(
    state: BrokerState, cleaner: LogCleaner, image: MetadataImage, delta: MetadataDelta
) -> None:
    """After a dynamic change of this broker's configs (its own or the cluster default), the
    log cleaner's thread runs with the new log.cleaner.* settings."""
    if _broker_configs_changed(state, delta):
        cleaner.reconfigure(CleanerSettings.of(image.broker_config_layers(state.config).effective()))


async def _within(scope: trio.CancelScope, run: Callable[[], Awaitable[None]]) -> None:
    """Run `run` inside `scope`, so that it alone can be cancelled."""
    with scope:
        await run()


def _controlled_shutdown_wanted(config: BrokerConfig, quorum: QuorumController) -> bool:
    """A registered broker of a multi-node cluster with another registered broker to take its
    leaderships.

    A node alone (the single node of `strom serve`, or no other broker) skips it, as Kafka's
    combined single node would gain nothing: every leadership would only go offline and be
    elected again at the next start."""
    if not config.runs_quorum or not config.controlled_shutdown_enable:
        return False
    if "broker" not in config.roles:
        return False
    if quorum.local_broker.broker_epoch < 0:
        return False
    return _other_active_broker(config, quorum)


def _other_active_broker(config: BrokerConfig, quorum: QuorumController) -> bool:
    """Another broker may take leaderships (unfenced, not shutting down itself)."""
    return any(b.broker_id != config.node_id and b.active for b in quorum.image.brokers())


async def _controlled_shutdown(config: BrokerConfig, quorum: QuorumController) -> None:
    """Kafka's BrokerLifecycleManager.beginControlledShutdown, before this broker stops serving:
    heartbeat want_shut_down until the controller has moved every leadership away and answers
    should_shut_down, while this broker still serves (its followers and clients see the moves as
    NOT_LEADER_OR_FOLLOWER and go to the new leaders). Bounded by Kafka's shutdown bound; past
    it, or with no controller reachable, the broker stops anyway (as a crash would)."""
    started = trio.current_time()
    log.info("controlled shutdown: asking the controller to move this broker's leaderships")
    outcome: list[bool] = []

    async def ask(cancel: trio.CancelScope) -> None:
        outcome.append(await quorum.local_broker.controlled_shutdown())
        cancel.cancel()

    async def watch(cancel: trio.CancelScope) -> None:
        # the whole cluster stopping at once: once no other broker may lead, there is nowhere
        # to move leaderships, and the quorum may be gone too; waiting would only delay the stop
        while _other_active_broker(config, quorum):
            await quorum.next_change().wait()
        outcome.append(False)
        log.info("controlled shutdown: no other active broker is left to lead; stopping")
        cancel.cancel()

    with trio.move_on_after(CONTROLLED_SHUTDOWN_TIMEOUT_SECONDS) as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask, nursery.cancel_scope)
            nursery.start_soon(watch, nursery.cancel_scope)
    took = (trio.current_time() - started) * 1000
    if scope.cancelled_caught:
        log.warning("controlled shutdown: the controller did not approve it within %.0fs; "
                    "stopping anyway", CONTROLLED_SHUTDOWN_TIMEOUT_SECONDS)  # fmt: skip
    elif outcome and outcome[0]:
        log.info("controlled shutdown: done in %.0f ms", took)
    else:
        log.info("controlled shutdown: not completed (%.0f ms); stopping anyway", took)


def _advertised(config: BrokerConfig, bound: list[Listener]) -> list[Listener]:
    """Advertised endpoints, with bound ports filled in where the config said port 0."""
    ports = {b.name: b.port for b in bound}
    hosts = {b.name: b.host for b in bound}
    out = []
    for adv in config.advertised_endpoints:
        if adv.name not in ports:
            continue
        port = adv.port or ports[adv.name]
        host = adv.host or hosts[adv.name] or "localhost"
        out.append(Listener(adv.name, host, port))
    return out


async def _flush_loop(state: BrokerState) -> None:
    """fsync partitions whose flush.messages / flush.ms policy says so, off the event loop.
    A failed flush takes its partition offline (it logs why) and is reported at once. While no
    log is a flush candidate (the default policy between segment rolls) it sleeps until one is,
    so an idle broker does not wake every FLUSH_CHECK_SECONDS."""
    token = trio.lowlevel.current_trio_token()
    wanted = trio.Event()
    # the hook may run in a worker thread (a roll inside an append run by one)
    state.logs.on_flush_wanted = lambda: token.run_sync_soon(wanted.set)
    while True:
        if not state.logs.has_flush_candidates():
            await wanted.wait()
            wanted = trio.Event()
            continue
        await trio.sleep(FLUSH_CHECK_SECONDS)
        for partition in state.logs.flush_due(wall_clock_ms()):
            try:
                await runtime.to_thread(partition.flush)
            except KafkaStorageError:
                report_storage(state)


async def _maintenance_loop(state: BrokerState, logs: LogManager) -> None:
    """Periodic work: offset checkpoints, retention, expiry of idle producer ids (after
    producer.id.expiration.ms, which may change at runtime)."""
    config = state.config
    checkpoint_every = config.log_flush_offset_checkpoint_interval_ms
    retention_every = config.log_retention_check_interval_ms
    producers_every = config.producer_id_expiration_check_interval_ms
    now = wall_clock_ms()
    next_checkpoint, next_retention, next_producers = (
        now + checkpoint_every,
        now + retention_every,
        now + producers_every,
    )
    while True:
        await trio.sleep(max(0.0, (min(next_checkpoint, next_retention, next_producers) - now) / 1000))
        now = wall_clock_ms()
        if now >= next_retention:
            deleted = logs.enforce_retention(now)
            if deleted:
                log.info("retention deleted %d segments", deleted)
            next_retention = now + retention_every
        if now >= next_producers:
            for partition in logs.partitions():
                partition.expire_producers(now, state.effective_config.producer_id_expiration_ms)
            next_producers = now + producers_every
        if now >= next_checkpoint:
            await runtime.to_thread(logs.checkpoint)
            next_checkpoint = now + checkpoint_every
