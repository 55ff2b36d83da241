"""Reading Kafka-style `.properties` files and `--override key=value` arguments.

Operators bring their existing server.properties, so this follows Java's
Properties.load: `#`/`!` comments, `=`/`:`/whitespace separators, trailing
backslash continuations, and the \\t \\n \\r \\f \\uXXXX escapes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from strom.config.config_error import ConfigError

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_BLANK = " \t\f"
_SEPARATORS = "=:"
_SIMPLE_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str, source: str = "<properties>") -> dict[str, str]:
    """Parse properties text into a dict; a repeated key keeps its last value."""
    lines = _LINE_BREAK.split(text)
    result: dict[str, str] = {}
    index = 0
    while index < len(lines):
        where = f"{source}:{index + 1}"
        logical = lines[index].lstrip(_BLANK)
        index += 1
        if not logical or logical[0] in "#!":
            continue
        while _continues(logical):
            logical = logical[:-1]
            if index >= len(lines):
                break
            logical += lines[index].lstrip(_BLANK)
            index += 1
        key, value = _split_entry(logical)
        result[_unescape(key, where)] = _unescape(value, where)
    return result


def read_properties_file(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read and parse a properties file (UTF-8, falling back to Java's ISO-8859-1)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(
            None, f"cannot read config file {os.fspath(path)!s}: {exc.strerror}"
        ) from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("iso-8859-1")
    return parse_properties(text, source=os.fspath(path))


def parse_override(arg: str) -> tuple[str, str]:
    """Split one `--override key=value` argument at its first '='."""
    key, sep, value = arg.partition("=")
    if not sep or not key.strip():
        raise ConfigError(None, f"invalid override '{arg}': expected key=value")
    return key.strip(), value


def apply_overrides(props: dict[str, str], overrides: Iterable[str]) -> dict[str, str]:
    """Return a copy of `props` with each `key=value` override applied on top."""
    merged = dict(props)
    for arg in overrides:
        key, value = parse_override(arg)
        merged[key] = value
    return merged


def _continues(line: str) -> bool:
    """An odd number of trailing backslashes joins the next line."""
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _split_entry(line: str) -> tuple[str, str]:
    """Split a logical line into its raw (still escaped) key and value."""
    pos = 0
    while pos < len(line):
        char = line[pos]
        if char == "\\":
            pos += 2
            continue
        if char in _SEPARATORS or char in _BLANK:
            break
        pos += 1
    key, rest = line[:pos], line[pos:]
    rest = rest.lstrip(_BLANK)
    if rest[:1] in tuple(_SEPARATORS):
        rest = rest[1:].lstrip(_BLANK)
    return key, rest


def _unescape(text: str, where: str) -> str:
    """Resolve backslash escapes; any other escaped character stands for itself."""
    if "\\" not in text:
        return text
    out: list[str] = []
    pos = 0
    while pos < len(text):
        char = text[pos]
        pos += 1
        if char != "\\":
            out.append(char)
            continue
        if pos >= len(text):
            break
        char = text[pos]
        pos += 1
        if char != "u":
            out.append(_SIMPLE_ESCAPES.get(char, char))
            continue
        digits = text[pos : pos + 4]
        if len(digits) < 4 or not all(c in "0123456789abcdefABCDEF" for c in digits):
            raise ConfigError(None, f"{where}: malformed \\uxxxx escape in '{text}'")
        out.append(chr(int(digits, 16)))
        pos += 4
    joined = "".join(out)
    # \uD83D\uDE00-style surrogate pairs, as Java writes non-BMP characters, become one char.
    return joined.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
