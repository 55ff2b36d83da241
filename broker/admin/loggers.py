"""BROKER_LOGGER (resource type 8): log levels read and changed at runtime (KIP-412).

Kafka answers these on the broker that receives them, never through the
controller, and the changes last until the process stops. Strom maps them to
Python's logging: the logger "root" is the root logger, every other name an
existing `logging.Logger` ("strom.server", ...). Levels are Kafka's names
(TRACE, DEBUG, INFO, WARN, ERROR, FATAL); DescribeConfigs shows each logger's
effective level. IncrementalAlterConfigs may SET a level or DELETE it (the
logger then inherits its parent's); APPEND/SUBTRACT and removing root's level
are INVALID_REQUEST, an unknown logger or level INVALID_CONFIG. Every
operation of a resource is checked before any is applied.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from strom.broker.admin.describe_resources import ResourceError
from strom.config import ConfigType
from strom.config.alter_ops import AlterOp
from strom.config.resolve import ConfigEntry
from strom.config.values import ConfigSource
from strom.wire.errors import ErrorCode

ROOT = "root"
LEVELS = {"TRACE": 5, "DEBUG": 10, "INFO": 20, "WARN": 30, "ERROR": 40, "FATAL": 50}
VALID_LEVELS = ", ".join(sorted(LEVELS))
RESOURCE = "BROKER_LOGGER"


def check_node(name: str, node_id: int, *, describing: bool) -> None:
    """The resource name must be this node's id (Kafka words the two APIs differently)."""
    if describing and not name:
        raise ResourceError(ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
    try:
        requested = int(name)
    except ValueError:
        what = "Broker" if describing else "Node"
        raise ResourceError(
            ErrorCode.INVALID_REQUEST, f"{what} id must be an integer, but it is: {name}"
        ) from None
    if requested != node_id:
        message = (
            f"Unexpected broker id, expected {node_id} but received {name}"
            if describing
            else f"Unexpected node id. Expected {node_id}, but received {name}"
        )
        raise ResourceError(ErrorCode.INVALID_REQUEST, message)


def current_levels() -> dict[str, str]:
    """Every logger and its effective level, by Kafka level name ("root" first)."""
    levels = {ROOT: level_name(logging.getLogger().getEffectiveLevel())}
    manager = logging.Logger.manager
    for name in sorted(manager.loggerDict):
        logger = manager.loggerDict[name]
        if isinstance(logger, logging.Logger):
            levels[name] = level_name(logger.getEffectiveLevel())
    return levels


def level_name(level: int) -> str:
    """The Kafka name of a Python level (levels between names round down)."""
    if level > LEVELS["FATAL"]:
        return "OFF"
    return max(
        (n for n, v in LEVELS.items() if v <= level), key=LEVELS.__getitem__, default="TRACE"
    )


def describe(keys: Sequence[str] | None) -> list[ConfigEntry]:
    """DescribeConfigs entries: source DYNAMIC_BROKER_LOGGER_CONFIG, no type, no synonyms."""
    return [
        ConfigEntry(
            name=name,
            value=level,
            source=ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG,
            config_type=ConfigType.UNKNOWN,
            read_only=False,
            is_sensitive=False,
            synonyms=(),
            documentation="",
        )
        for name, level in current_levels().items()
        if not keys or name in keys
    ]


def alter(ops: Sequence[tuple[str, int, str | None]], validate_only: bool) -> None:
    """Check every (logger, operation, level), then apply them unless `validate_only`."""
    for name, op, level in ops:
        if op == AlterOp.SET:
            _check_exists(name)
            if level not in LEVELS:
                raise ResourceError(
                    ErrorCode.INVALID_CONFIG,
                    f"Cannot set the log level of {name} to {level} as it is not a supported "
                    f"log level. Valid log levels are {VALID_LEVELS}",
                )
        elif op == AlterOp.DELETE:
            _check_exists(name)
            if name == ROOT:
                raise ResourceError(
                    ErrorCode.INVALID_REQUEST,
                    f"Removing the log level of the {ROOT} logger is not allowed",
                )
        elif op in (AlterOp.APPEND, AlterOp.SUBTRACT):
            verb = AlterOp(op).name
            raise ResourceError(
                ErrorCode.INVALID_REQUEST,
                f"{verb} operation is not allowed for the {RESOURCE} resource",
            )
        else:
            raise ResourceError(
                ErrorCode.INVALID_REQUEST,
                f"Unknown operation type {op} is not allowed for the {RESOURCE} resource",
            )
    if validate_only:
        return
    for name, op, level in ops:
        logger = logging.getLogger() if name == ROOT else logging.getLogger(name)
        logger.setLevel(LEVELS[level] if op == AlterOp.SET and level is not None else logging.NOTSET)


def _check_exists(name: str) -> None:
    if name != ROOT and not isinstance(logging.Logger.manager.loggerDict.get(name), logging.Logger):
        raise ResourceError(ErrorCode.INVALID_CONFIG, f"Logger {name} does not exist!")
