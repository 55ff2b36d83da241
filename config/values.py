"""Kafka's config value types: parsing from strings, type checks, rendering.

The numeric ids of `ConfigType`, `ConfigSource` and `ConfigResource` are the ones
the config APIs put on the wire, so the broker can copy them unchanged.
"""

from __future__ import annotations

import math
import re
from enum import IntEnum

from strom.config.config_error import ConfigError

ConfigValue = bool | int | float | str | tuple[str, ...] | None
"""A parsed setting: LIST values are tuples so configs stay hashable."""

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
DOUBLE_MAX = 1.7976931348623157e308

_INTEGER = re.compile(r"[+-]?[0-9]+", re.ASCII)
_LIST_SPLIT = re.compile(r"\s*,\s*")
_RANGES = {
    "SHORT": (-(2**15), 2**15 - 1, "a 16-bit integer"),
    "INT": (-(2**31), INT_MAX, "a 32-bit integer"),
    "LONG": (-(2**63), LONG_MAX, "a 64-bit integer"),
}


class ConfigType(IntEnum):
    """Kafka's ConfigDef types, numbered as in DescribeConfigs v3+."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(IntEnum):
    """Where a described value came from, numbered as in DescribeConfigs v1+."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class ConfigResource(IntEnum):
    """Kafka's ConfigResource.Type: what a config request or ConfigRecord is about."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class Password(str):
    """A PASSWORD value: the secret itself, printed as `[hidden]` (as Kafka's Password does),
    so a configuration, an error message or a log line never shows it. `reveal()` is the one
    way to read it, for the code that hands it to TLS or SASL."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "[hidden]"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return "[hidden]"

    def reveal(self) -> str:
        """The secret, as a plain string."""
        return str.__str__(self)


def parse_value(key: str, type_: ConfigType, raw: str) -> ConfigValue:
    """Parse a properties-file string the way Kafka's ConfigDef does (trimmed, strict)."""
    if type_ is ConfigType.PASSWORD:
        return Password(raw)
    text = raw.strip()
    if type_ in (ConfigType.STRING, ConfigType.CLASS):
        return text
    if type_ is ConfigType.BOOLEAN:
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise ConfigError.invalid(key, raw, "true or false")
    if type_ is ConfigType.LIST:
        return () if not text else tuple(_LIST_SPLIT.split(text))
    if type_ is ConfigType.DOUBLE:
        try:
            if "_" in text:
                raise ValueError(text)
            return float(text)
        except ValueError:
            raise ConfigError.invalid(key, raw, "a floating point number") from None
    low, high, what = _RANGES[type_.name]
    if not _INTEGER.fullmatch(text) or not low <= int(text) <= high:
        raise ConfigError.invalid(key, raw, what)
    return int(text)


def conforms(type_: ConfigType, value: ConfigValue) -> bool:
    """Whether a Python value has the right shape for the type (None means unset)."""
    if value is None:
        return True
    if type_ is ConfigType.BOOLEAN:
        return isinstance(value, bool)
    if type_ is ConfigType.DOUBLE:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if type_ is ConfigType.LIST:
        return isinstance(value, tuple) and all(isinstance(v, str) for v in value)
    if type_.name in _RANGES:
        low, high, _ = _RANGES[type_.name]
        return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
    return isinstance(value, str)


def expected_type(type_: ConfigType) -> str:
    """Human wording of a type, for error messages."""
    if type_.name in _RANGES:
        return _RANGES[type_.name][2]
    return {
        ConfigType.BOOLEAN: "a boolean",
        ConfigType.DOUBLE: "a floating point number",
        ConfigType.LIST: "a tuple of strings",
    }.get(type_, "a string")


def to_string(value: ConfigValue) -> str | None:
    """Render a value as Kafka's ConfigDef.convertToString would (None stays None)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value)
    if isinstance(value, float):
        return _java_double(value)
    return str(value)


def _java_double(value: float) -> str:
    """Java's Double.toString: plain between 1e-3 and 1e7, else d.dddE±n."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(float(value))
    from decimal import Decimal  # only here, so start-up need not import it

    sign, digits, exponent = Decimal(repr(value)).as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits)).rstrip("0") or "0"
    mantissa = text[0] + "." + (text[1:] or "0")
    return ("-" if sign else "") + f"{mantissa}E{len(digits) - 1 + exponent}"
