"""Declaring settings once: a dataclass field that carries its Kafka definition.

`setting(...)` both gives a config dataclass its typed attribute and default and
records the Kafka key name, type, validator and documentation, so the parser,
the validators and DescribeConfigs all read one definition.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from strom.config.config_error import ConfigError
from strom.config.validators import Validator
from strom.config.values import ConfigType, ConfigValue, conforms, expected_type

T = TypeVar("T", bound=ConfigValue)

_META = "strom.config.key"


def _same(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class Synonym:
    """A broker key that supplies a topic key's default, with its unit conversion."""

    name: str
    convert: Callable[[Any], Any] = _same


@dataclass(frozen=True)
class ConfigKey:
    """Kafka's definition of one setting."""

    name: str
    type: ConfigType
    default: ConfigValue
    doc: str
    validator: Validator | None = None
    dynamic: bool = False
    """Kafka can change it without a restart; DescribeConfigs reports read_only = not dynamic."""
    synonyms: tuple[Synonym, ...] = ()
    """For topic and group keys: broker keys consulted in order when the resource has no
    override."""

    @property
    def attr(self) -> str:
        """The Python attribute name: dots and dashes become underscores."""
        return attr_name(self.name)

    @property
    def sensitive(self) -> bool:
        """Kafka hides PASSWORD values in DescribeConfigs."""
        return self.type is ConfigType.PASSWORD

    def check(self, value: ConfigValue) -> None:
        """Raise ConfigError naming the key unless the value has the right type and passes."""
        if not conforms(self.type, value):
            raise ConfigError.invalid(self.name, value, expected_type(self.type))
        if self.validator is not None:
            self.validator.check(self.name, value)


def attr_name(key: str) -> str:
    """Map a Kafka key to the attribute holding it ('log.dirs' -> 'log_dirs')."""
    return key.replace(".", "_").replace("-", "_")


def setting(
    name: str,
    type_: ConfigType,
    default: T,
    doc: str,
    *,
    validator: Validator | None = None,
    dynamic: bool = False,
    synonyms: tuple[Synonym, ...] = (),
) -> T:
    """A dataclass field for Kafka key `name`; the default's type must fit the annotation."""
    key = ConfigKey(name, type_, default, doc, validator, dynamic, synonyms)
    return field(default=default, metadata={_META: key})


def keys_of(cls: type[Any]) -> Mapping[str, ConfigKey]:
    """All keys declared with `setting` on a config dataclass, by Kafka name, sorted."""
    found = [f.metadata[_META] for f in dataclasses.fields(cls) if _META in f.metadata]
    return {key.name: key for key in sorted(found, key=lambda k: k.name)}


def check_fields(instance: Any) -> None:
    """Validate every declared setting of a config dataclass instance."""
    for f in dataclasses.fields(instance):
        key = f.metadata.get(_META)
        if key is not None:
            key.check(getattr(instance, f.name))
