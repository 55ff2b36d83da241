"""Topic name rules, as Kafka's `Topic.validate` and its '.'/'_' collision check.

Kafka's metric names replace '.' with '_', so two topics differing only there
would share metrics; a new topic may not collide with an existing one.
"""

from __future__ import annotations

import re

from strom.coordinator.metadata.image import MetadataImage

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def invalid_topic_name(name: str) -> str | None:
    """Kafka's InvalidTopicException message for `name`, or None when it is legal."""
    if not name:
        reason = "the empty string is not allowed"
    elif name in (".", ".."):
        reason = f"'{name}' is not allowed"
    elif len(name) > MAX_NAME_LENGTH:
        reason = f"the length of '{name}' is longer than the max allowed length {MAX_NAME_LENGTH}"
    elif not _LEGAL.fullmatch(name):
        reason = f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    else:
        return None
    return f"Topic name is invalid: {reason}"


def unify_collision_chars(name: str) -> str:
    return name.replace(".", "_")


def colliding_topic(image: MetadataImage, name: str) -> str | None:
    """An existing topic `name` collides with ('.' vs '_'), or None.

    Kafka reports the first member of an unordered set; the least name is
    reported here so the message is deterministic.
    """
    if "." not in name and "_" not in name:
        return None
    unified = unify_collision_chars(name)
    clashes = [
        other
        for other in image.topics_by_name
        if other != name and unify_collision_chars(other) == unified
    ]
    return min(clashes) if clashes else None
