"""The log cleaner: compacts `cleanup.policy=compact` logs in its own thread.

Built on the partition log (`strom.storage.log`), which it reads through `CleanView` and
changes only through `PartitionLog.replace_segments`; the log never imports it.
"""
