"""The Raft store: what a Raft replica keeps durable in `__cluster_metadata-0/`.

The `RaftStore` interface and its in-memory store (raft_store), the disk store (raft_disk),
its log segments and snapshots (raft_log) and the `quorum-state` file (quorum_state). Shares
nothing with the partition log but the durable-file helpers at `strom.storage`'s top.
"""
