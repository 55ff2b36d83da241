"""One module per API key; the table below is the registry ApiVersions advertises.

Each handler module defines `API_KEY`, `MIN_VERSION`, `MAX_VERSION` (the
versions Strom implements, which may be fewer than the wire layer decodes)
and `async def handle(broker, request, body)` returning the response body, or
None when no response is sent (Produce with acks=0). `ADVERTISED_MIN_VERSION`
optionally lowers what ApiVersions lists (Produce advertises v0 while refusing
v0-v2, as Kafka 4.0 does so librdkafka keeps compressing, KAFKA-18659).

Each entry also names the listeners the API is answered on, as Kafka's JSON definitions do
(`"listeners"`): `broker` (client listeners) and/or `controller` (the listeners named in
`controller.listener.names`). A request for an API its listener does not serve is refused
like an unknown API (the connection closes, as Kafka's SocketServer does), and ApiVersions
lists only what its listener serves.

The table repeats each module's versions so that ApiVersions can be answered
without importing every handler: a handler module, and the generated message
module it imports, loads on its API's first request, which keeps start-up
short. `tests/broker/test_handler_registry.py` imports every module in this
package and checks the table against it.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState
    from strom.wire.message import Message

BROKER = frozenset({"broker"})
CONTROLLER = frozenset({"controller"})
BOTH = BROKER | CONTROLLER

HandleFn = Callable[["BrokerState", "RequestContext", Any], Awaitable["Message | None"]]


@dataclass(slots=True)
class Handler:
    module: str
    """The module's name in this package."""
    api_key: int
    min_version: int
    max_version: int
    advertised_min_version: int
    """What ApiVersions lists; lower than min_version only for Produce (KAFKA-18659)."""
    listeners: frozenset[str] = BROKER
    """Where it is answered: "broker" (client listeners), "controller", or both."""
    _handle: HandleFn | None = field(default=None, repr=False, compare=False)

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def serves(self, listener_type: str) -> bool:
        """Whether the API is answered on a "broker" or "controller" listener."""
        return listener_type in self.listeners

    @property
    def handle(self) -> HandleFn:
        """The module's `handle`, imported on first use."""
        if self._handle is None:
            self._handle = importlib.import_module(f"{__name__}.{self.module}").handle
        return self._handle


def _handler(
    module: str,
    api_key: int,
    min_version: int,
    max_version: int,
    advertised_min: int | None = None,
    listeners: frozenset[str] = BROKER,
) -> Handler:
    advertised = min_version if advertised_min is None else advertised_min
    return Handler(module, api_key, min_version, max_version, advertised, listeners)


_TABLE = (  # module, API key, min and max version, listeners (default: broker)
    _handler("produce", 0, 3, 12, advertised_min=0),
    _handler("fetch", 1, 4, 17, listeners=BOTH),  # on a controller listener: Raft's Fetch
    _handler("list_offsets", 2, 1, 10),
    _handler("metadata", 3, 0, 13),
    _handler("offset_commit", 8, 2, 9),
    _handler("offset_fetch", 9, 1, 9),
    _handler("find_coordinator", 10, 0, 6),
    _handler("join_group", 11, 2, 9),
    _handler("heartbeat", 12, 0, 4),
    _handler("leave_group", 13, 0, 5),
    _handler("sync_group", 14, 0, 5),
    _handler("describe_groups", 15, 0, 6),
    _handler("list_groups", 16, 0, 5),
    _handler("api_versions", 18, 0, 4, listeners=BOTH),
    _handler("create_topics", 19, 2, 7, listeners=BOTH),
    _handler("delete_topics", 20, 1, 6, listeners=BOTH),
    _handler("delete_records", 21, 0, 2),
    _handler("init_producer_id", 22, 0, 5),
    _handler("offset_for_leader_epoch", 23, 2, 4),
    _handler("add_partitions_to_txn", 24, 0, 5),
    _handler("add_offsets_to_txn", 25, 0, 4),
    _handler("end_txn", 26, 0, 5),
    _handler("write_txn_markers", 27, 1, 1),
    _handler("txn_offset_commit", 28, 0, 5),
    _handler("describe_configs", 32, 1, 4, listeners=BOTH),
    _handler("alter_configs", 33, 0, 2, listeners=BOTH),
    _handler("describe_log_dirs", 35, 1, 4),
    _handler("create_partitions", 37, 0, 3, listeners=BOTH),
    _handler("delete_groups", 42, 0, 2),
    _handler("elect_leaders", 43, 0, 2, listeners=BOTH),
    _handler("incremental_alter_configs", 44, 0, 1, listeners=BOTH),
    _handler("alter_partition_reassignments", 45, 0, 0, listeners=BOTH),
    _handler("list_partition_reassignments", 46, 0, 0, listeners=BOTH),
    _handler("offset_delete", 47, 0, 0),
    _handler("describe_cluster", 60, 0, 2, listeners=BOTH),
    _handler("vote", 52, 0, 2, listeners=CONTROLLER),
    _handler("begin_quorum_epoch", 53, 0, 1, listeners=CONTROLLER),
    _handler("end_quorum_epoch", 54, 0, 1, listeners=CONTROLLER),
    _handler("describe_quorum", 55, 0, 2, listeners=BOTH),
    _handler("alter_partition", 56, 2, 3, listeners=CONTROLLER),
    _handler("fetch_snapshot", 59, 0, 1, listeners=CONTROLLER),
    _handler("describe_producers", 61, 0, 0),
    _handler("describe_transactions", 65, 0, 0),
    _handler("list_transactions", 66, 0, 2),
    _handler("broker_registration", 62, 0, 4, listeners=CONTROLLER),
    _handler("broker_heartbeat", 63, 0, 1, listeners=CONTROLLER),
    _handler("allocate_producer_ids", 67, 0, 0, listeners=CONTROLLER),
    _handler("describe_topic_partitions", 75, 0, 0),
    _handler("sasl_handshake", 17, 0, 1, listeners=BOTH),
    _handler("sasl_authenticate", 36, 0, 2, listeners=BOTH),
    _handler("describe_acls", 29, 1, 3, listeners=BOTH),
    _handler("create_acls", 30, 1, 3, listeners=BOTH),
    _handler("delete_acls", 31, 1, 3, listeners=BOTH),
    _handler("describe_client_quotas", 48, 0, 1),
    _handler("alter_client_quotas", 49, 0, 1, listeners=BOTH),
    _handler("describe_user_scram_credentials", 50, 0, 0, listeners=BOTH),
    _handler("alter_user_scram_credentials", 51, 0, 0, listeners=BOTH),
)

HANDLERS: dict[int, Handler] = {h.api_key: h for h in _TABLE}


def listener_type(controller_listener: bool) -> str:
    """"controller" for a listener named in controller.listener.names, else "broker"."""
    return "controller" if controller_listener else "broker"
