"""Strom, a Kafka-wire-compatible message broker in Python on trio.

`strom` is the one import name Strom installs. Its subpackages are the project's top-level
source folders (linked here; setuptools copies them into the wheel), from the bottom up:

- `strom.wire`: the Kafka protocol, sans-IO.
- `strom.config`: configuration, keyed, typed and validated like Kafka's.
- `strom.storage`: the partition log on disk.
- `strom.coordinator`: the pure state machines (controller, metadata image, groups).
- `strom.broker`: the trio process that hosts them.

Imports only go down this list (`lint-imports` checks it in CI).
"""
