"""This broker's partitions, kept in step with the metadata image, and their replication.

`partitions` creates, deletes and reconfigures the local logs as the controller's image says
(`follow_image`); `replication_manager` makes the leader and follower transitions, keeps the
ISR and the high watermark of the partitions led here and proposes ISR changes with
AlterPartition; `fetcher` copies followed partitions from their leaders; `replica_set`,
`read_replica` and `divergence` are the rules they apply. Below the data path; may import
`strom.broker.admin`, `strom.broker.core_state` and `strom.broker.drivers` (pyproject.toml's
`broker-floors` contract).
"""
