"""The group and transaction coordinators, started when a broker first needs them.

A broker starts the driver of `__consumer_offsets` (groups, `GroupDriver`) or of
`__transaction_state` (transactions, `TransactionDriver`) before it serves clients only when it
leads a partition of that topic, as after a restart: that coordinator's state is then loaded
before any client comes in, as it always was. Any other coordinator starts at its first need:

- the first request that asks for it (FindCoordinator, the group and transaction APIs, which
  create the topic on first use as Kafka does; a transactional write's verification);
- the first metadata change that gives this node a partition of its topic (`follow`), whose
  state then loads in the background (COORDINATOR_LOAD_IN_PROGRESS meanwhile, as Kafka's
  coordinators answer while they load).

Until then neither the driver nor its state machine, nor their modules, are loaded: a broker
that serves only producers and consumers never loads them, and a fresh node starts without
them (34 modules, about a tenth of the imports before its first request).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import trio

from strom.broker.drivers.topics import CONSUMER_OFFSETS, TRANSACTION_STATE

if TYPE_CHECKING:
    from strom.broker.core_state import BrokerCore
    from strom.broker.data.lookup import MinIsrCache
    from strom.broker.data.producer_ids import ProducerIdManager
    from strom.broker.data.waiters import DataWaiters
    from strom.broker.drivers.groups import GroupDriver
    from strom.broker.drivers.transactions import TransactionDriver
    from strom.broker.replication.replication_manager import ReplicationManager


LOGGERS = ("strom.groups", "strom.transactions")
"""The coordinators' loggers, which exist from start-up, before their modules load: an operator
may set their levels (broker-logger configs, which refuse a logger that does not exist) before
the first group or transaction."""


class Coordinators:
    """Starts the broker's group and transaction drivers (`BrokerCore.groups`,
    `BrokerCore.transactions`) on first need, their tasks in `nursery`."""

    def __init__(
        self,
        core: BrokerCore,
        replication: ReplicationManager,
        waiters: DataWaiters,
        min_isr: MinIsrCache,
        producer_ids: ProducerIdManager,
        nursery: trio.Nursery,
    ) -> None:
        self._core = core
        self._replication = replication
        self._waiters = waiters
        self._min_isr = min_isr
        self._producer_ids = producer_ids
        self._nursery = nursery
        for name in LOGGERS:
            logging.getLogger(name)

    async def start_led(self) -> None:
        """Start, with its state loaded, each coordinator whose topic has a partition led here
        (before the broker serves clients)."""
        core = self._core
        if core.groups is None and self._leads(CONSUMER_OFFSETS):
            await self._loaded(self._new_groups())
        if core.transactions is None and self._leads(TRANSACTION_STATE):
            await self._loaded(self._new_transactions())

    def groups(self) -> GroupDriver | None:
        """The group driver, started now if it has not been (None once the broker is
        shutting down: the request answers COORDINATOR_NOT_AVAILABLE)."""
        if self._core.groups is None and not self._stopping:
            self._following(self._new_groups())
        return self._core.groups

    def transactions(self) -> TransactionDriver | None:
        """The transaction driver, started now if it has not been (None once the broker is
        shutting down)."""
        if self._core.transactions is None and not self._stopping:
            self._following(self._new_transactions())
        return self._core.transactions

    def follow(self) -> None:
        """After each metadata change: the started coordinators follow their topics'
        leadership, and one not started starts once this node leads a partition of its
        topic."""
        core = self._core
        if core.groups is not None:
            core.groups.follow()
        elif self._leads(CONSUMER_OFFSETS):
            self.groups()
        if core.transactions is not None:
            core.transactions.follow()
        elif self._leads(TRANSACTION_STATE):
            self.transactions()

    @property
    def _stopping(self) -> bool:
        """The broker's background tasks are being cancelled: none may start."""
        return self._nursery.cancel_scope.cancel_called

    async def _loaded(self, driver: GroupDriver | TransactionDriver) -> None:
        """Run `driver` once it has loaded every partition led here."""
        await driver.load()
        self._nursery.start_soon(driver.run)

    def _following(self, driver: GroupDriver | TransactionDriver) -> None:
        """Run `driver` now; the partitions led here load in its background."""
        driver.follow()
        self._nursery.start_soon(driver.run)

    def _leads(self, topic: str) -> bool:
        found = self._core.image.topic(topic)
        node_id = self._core.node_id
        return found is not None and any(p.leader == node_id for p in found.partitions.values())

    def _new_groups(self) -> GroupDriver:
        from strom.broker.data.coordinator_topics import group_driver  # loaded on first need

        driver = self._core.groups = group_driver(
            self._core, self._replication, self._waiters, self._min_isr
        )
        return driver

    def _new_transactions(self) -> TransactionDriver:
        from strom.broker.data.coordinator_topics import transaction_driver  # on first need

        driver = self._core.transactions = transaction_driver(
            self._core, self._replication, self._waiters, self._min_isr, self._producer_ids
        )
        return driver
