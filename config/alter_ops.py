"""Kafka's config alteration operations (AlterConfigOp.OpType) and what they do to a value.

IncrementalAlterConfigs names an operation per key: SET a value, DELETE the
override (back to the inherited value), or APPEND / SUBTRACT items of a LIST
key, starting from the stored override or else the key's default. Which error
code a refused operation gets is the caller's business (it differs by API and
resource); this module only knows the operations.
"""

from __future__ import annotations

from enum import IntEnum

from strom.config.keys import ConfigKey
from strom.config.values import to_string


class AlterOp(IntEnum):
    """The operation ids IncrementalAlterConfigs puts on the wire."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


def list_altered(spec: ConfigKey, op: AlterOp, stored: str | None, items: str) -> str:
    """APPEND/SUBTRACT `items` (comma-separated) on a LIST key's stored override, or on its
    default when none is stored; APPEND skips items already present."""
    base = stored if stored is not None else to_string(spec.default)
    values = [part for part in (base or "").split(",") if part]
    for item in items.split(","):
        if op == AlterOp.APPEND and item not in values:
            values.append(item)
        elif op == AlterOp.SUBTRACT and item in values:
            values.remove(item)
    return ",".join(values)
