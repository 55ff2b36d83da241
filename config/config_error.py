"""The one exception type of the config package.

Carrying the offending key lets the broker answer INVALID_CONFIG (or refuse to
start) with a message that names exactly what to fix.
"""

from __future__ import annotations


class ConfigError(ValueError):
    """An unknown key, or a value Kafka would reject for its key."""

    def __init__(self, key: str | None, message: str, value: object = None) -> None:
        super().__init__(message)
        self.key = key
        self.value = value

    @classmethod
    def unknown(cls, key: str) -> ConfigError:
        """A key that neither Kafka nor Strom knows."""
        return cls(key, f"unknown config key '{key}'")

    @classmethod
    def invalid(cls, key: str, value: object, expected: str) -> ConfigError:
        """A known key whose value is malformed or out of range."""
        shown = "null" if value is None else _show(value)
        return cls(
            key, f"invalid value '{shown}' for config key '{key}': expected {expected}", value
        )


def _show(value: object) -> str:
    """Render a value the way it would appear in a properties file."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return str(value)
