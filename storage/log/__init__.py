"""The partition log: segments, indexes, recovery, producer state, leader epochs, checkpoints.

`LogManager` (log_manager) holds every partition's `PartitionLog` (partition) across the data
directories; the log's side of compaction (`clean_view`, `swap`) lives here too, so the
cleaner (`strom.storage.cleaner`) builds on the log and never the other way round.
Imports only the shared modules at `strom.storage`'s top, `strom.config` and `strom.wire`.
"""
