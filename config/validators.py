"""Value validators mirroring Kafka's ConfigDef ones (Range, ValidString, ValidList).

Each validator carries the wording of what it expects, so every rejection can
tell the operator the acceptable values, not just that the value is wrong.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from strom.config.config_error import ConfigError
from strom.config.values import ConfigValue


@dataclass(frozen=True)
class Validator:
    """A predicate on a parsed, non-null value plus a description of what passes."""

    expected: str
    accepts: Callable[[Any], bool]

    def check(self, key: str, value: ConfigValue) -> None:
        """Raise ConfigError naming `key` unless the value passes (None always passes)."""
        if value is not None and not self.accepts(value):
            raise ConfigError.invalid(key, value, self.expected)


def at_least(low: int | float) -> Validator:
    """Kafka's Range.atLeast."""
    return Validator(f"a value at least {low}", lambda v: v >= low)


def between(low: int | float, high: int | float) -> Validator:
    """Kafka's Range.between (inclusive)."""
    return Validator(f"a value between {low} and {high}", lambda v: low <= v <= high)


def one_of(*choices: str, case_sensitive: bool = True) -> Validator:
    """Kafka's ValidString.in (or CaseInsensitiveValidString)."""
    folded = choices if case_sensitive else tuple(c.lower() for c in choices)

    def accepts(value: str) -> bool:
        return (value if case_sensitive else value.lower()) in folded

    return Validator("one of " + ", ".join(choices), accepts)


def subset_of(*choices: str, allow_empty: bool = True) -> Validator:
    """Kafka's ValidList.in: every element must be allowed, without repeats."""

    def accepts(value: tuple[str, ...]) -> bool:
        if not value:
            return allow_empty
        return all(v in choices for v in value) and len(set(value)) == len(value)

    empty = "" if allow_empty else "non-empty "
    return Validator(
        f"a {empty}comma-separated list of distinct values from: " + ", ".join(choices), accepts
    )


def either(first: Validator, second: Validator) -> Validator:
    """Accept values passing either validator (e.g. a level range or the -1 sentinel)."""
    return Validator(
        f"{first.expected}, or {second.expected}",
        lambda v: first.accepts(v) or second.accepts(v),
    )


def exactly(value: int) -> Validator:
    """Only this one value (used for sentinels such as -1)."""
    return Validator(f"exactly {value}", lambda v: v == value)


def matches(pattern: str, expected: str) -> Validator:
    """A string matching a regular expression in full."""
    compiled = re.compile(pattern)
    return Validator(expected, lambda v: compiled.fullmatch(v) is not None)
