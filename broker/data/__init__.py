"""The produce and fetch data path: between the handlers and the partition logs.

Produce: partition lookups with Kafka's order of checks (`lookup`), one partition's append
with its durability and wake-ups (`append`), producer-id blocks (`producer_ids`), and the
coordinators' acks=all appends to `__consumer_offsets` and `__transaction_state`
(`coordinator_topics`). Fetch:
reading partitions within the request's limits (`fetch_read`), incremental fetch sessions
(`fetch_sessions`), long-poll wake-ups (`waiters`). Batches move as opaque bytes here.
May import `strom.storage`, `strom.config`, `strom.wire` and `strom.broker.state`.
"""
