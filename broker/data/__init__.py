"""The produce and fetch data path: between the handlers and the partition logs.

Produce: partition lookups with Kafka's order of checks (`lookup`), one partition's append
with its durability and wake-ups (`append`), producer-id blocks (`producer_ids`), and the
coordinators' acks=all appends to `__consumer_offsets` and `__transaction_state`
(`coordinator_topics`). Fetch:
reading partitions within the request's limits (`fetch_read`), incremental fetch sessions
(`fetch_sessions`), long-poll wake-ups (`waiters`). Batches move as opaque bytes here.

Below the handlers and `strom.broker.state`: a function here takes this node's
`BrokerCore` and, explicitly, the services it uses (the `ReplicationManager`, `DataWaiters`,
`MinIsrCache`), which the broker process builds once at start-up. May import
`strom.broker.replication`, `strom.broker.admin`, `strom.broker.core_state` and
`strom.broker.drivers`, and the layers below the broker (the `broker-floors` contract in
pyproject.toml).
"""
