"""The transaction coordinator as a pure state machine (`TransactionCoordinator`).

Split as Kafka splits it: `txn_coordinator` (Kafka's TransactionCoordinator: the APIs and
the marker bookkeeping) over `txn_state_manager` (Kafka's TransactionStateManager: which
`__transaction_state` partitions are loaded, their transactional ids and writes, timeouts,
expiration, listing); `txn_metadata` holds one id's state and its transitions;
`txn_log_records` the bytes of `__transaction_state`; `txn_api` what the coordinator takes
and gives. Its trio driver is `strom.broker.drivers.transactions`; docs/transactions.md
describes the protocol.
"""
