"""Runtime support for the generated message classes.

Generated modules (`wire/messages/`, `wire/formats/`) hold one straight-line
reader and writer per distinct version layout; the fixed-width runs of fields
are packed with one precompiled `struct.Struct` call each. The small helpers
here cover the variable-length primitives (strings, bytes, arrays, tagged
fields) so the generated code stays readable. Readers take `(buf, pos)` and
return `(value, pos)`; writers take a value and the `append` of a chunk list.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any, ClassVar, Protocol, Self, runtime_checkable

from strom.wire.errors import ErrorCode, ProtocolError, truncated
from strom.wire.primitives import INT16, INT32, read_uvarint, uvarint, varint, varlong

Append = Callable[[Any], None]
Reader = Callable[[memoryview, int], tuple[Any, int]]
Writer = Callable[[Any, list[Any]], None]
UNSET: Any = type("Unset", (), {"__repr__": lambda self: "UNSET"})()
"""The default of a constructor argument whose real default is built per object."""
Records = bytes | bytearray | memoryview
"""A `records` field: raw RecordBatch bytes, never parsed by the message codec."""


@runtime_checkable
class SizedChunk(Protocol):
    """An opaque records value whose bytes someone else supplies (e.g. a file range).

    The encoder only calls `len()` on it and appends it to the chunk list as is;
    whoever writes the chunks out must know how to send it (the broker sends
    its file ranges with sendfile). Decoders never produce one.
    """

    def __len__(self) -> int: ...


RecordsValue = Records | SizedChunk
"""What a records field may hold when encoding: bytes, or an opaque sized chunk."""
TaggedFields = tuple[tuple[int, bytes], ...]
"""Tagged fields this version does not know: (tag, raw bytes), re-encoded unchanged."""

_unpack_i16 = INT16.unpack_from
_unpack_i32 = INT32.unpack_from
_pack_i16 = INT16.pack
_pack_i32 = INT32.pack
_NULL16 = b"\xff\xff"
_NULL32 = b"\xff\xff\xff\xff"


class Struct:
    """Base of every generated struct: equality and repr over `FIELDS`."""

    __slots__ = ()
    FIELDS: ClassVar[tuple[str, ...]] = ()

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in self.FIELDS)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        body = ", ".join(f"{f}={getattr(self, f)!r}" for f in self.FIELDS)
        return f"{type(self).__qualname__}({body})"


class Message(Struct):
    """A top-level message: a request, response, header or data record."""

    __slots__ = ()
    NAME: ClassVar[str]
    API_KEY: ClassVar[int | None] = None
    MIN_VERSION: ClassVar[int]
    MAX_VERSION: ClassVar[int]
    FLEXIBLE_MIN: ClassVar[int | None]
    """The first flexible version, or None when no version is flexible."""
    _READERS: ClassVar[tuple[Reader, ...]]
    _WRITERS: ClassVar[tuple[Writer, ...]]

    @classmethod
    def is_flexible(cls, version: int) -> bool:
        return cls.FLEXIBLE_MIN is not None and version >= cls.FLEXIBLE_MIN

    @classmethod
    def _check_version(cls, version: int) -> int:
        if not cls.MIN_VERSION <= version <= cls.MAX_VERSION:
            raise ProtocolError(
                f"{cls.NAME} has no version {version} "
                f"(supported: {cls.MIN_VERSION}-{cls.MAX_VERSION})",
                ErrorCode.UNSUPPORTED_VERSION,
            )
        return version - cls.MIN_VERSION

    @classmethod
    def decode_from(cls, data: Records, pos: int, version: int) -> tuple[Self, int]:
        """Decode at `pos`; return the message and the position after it."""
        reader = cls._READERS[cls._check_version(version)]
        buf = data if isinstance(data, memoryview) else memoryview(data)
        try:
            return reader(buf, pos)
        except ProtocolError:
            raise
        except (struct.error, IndexError, ValueError, TypeError, OverflowError) as exc:
            raise ProtocolError(
                f"malformed {cls.NAME} v{version}: {exc}", ErrorCode.CORRUPT_MESSAGE
            ) from exc
        except RecursionError as exc:
            raise ProtocolError(f"{cls.NAME} v{version} nests too deeply") from exc

    @classmethod
    def decode(cls, data: Records, version: int) -> Self:
        """Decode a whole message (trailing bytes are ignored, as Kafka does)."""
        return cls.decode_from(data, 0, version)[0]

    def encode_into(self, version: int, out: list[Any]) -> None:
        """Append the encoded chunks to `out` (records fields are not copied)."""
        writer = self._WRITERS[self._check_version(version)]
        try:
            writer(self, out)
        except ProtocolError as exc:
            raise ProtocolError(f"cannot encode {self.NAME} v{version}: {exc}", exc.error) from exc
        except (struct.error, ValueError, TypeError, AttributeError, OverflowError) as exc:
            raise ProtocolError(
                f"cannot encode {self.NAME} v{version}: {exc}", ErrorCode.UNKNOWN_SERVER_ERROR
            ) from exc

    def encode(self, version: int) -> bytes:
        out: list[Any] = []
        self.encode_into(version, out)
        return b"".join(out)


def unsupported(field: str) -> ProtocolError:
    """A field set to a non-default value in a version that lacks it."""
    return ProtocolError(
        f"field {field} is not in this version and is not ignorable", ErrorCode.UNSUPPORTED_VERSION
    )


def null_in_non_nullable(field: str) -> ProtocolError:
    return ProtocolError(f"non-nullable field {field} was null", ErrorCode.INVALID_REQUEST)


# --- lengths ---------------------------------------------------------------


def rd_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    first = buf[pos]
    if first < 0x80:
        return first, pos + 1
    return read_uvarint(buf, pos)


def rd_len16(buf: memoryview, pos: int) -> tuple[int, int]:
    return _unpack_i16(buf, pos)[0], pos + 2


def rd_len32(buf: memoryview, pos: int) -> tuple[int, int]:
    return _unpack_i32(buf, pos)[0], pos + 4


def rd_clen(buf: memoryview, pos: int) -> tuple[int, int]:
    """A compact length: uvarint N+1, with 0 meaning null (-1)."""
    first = buf[pos]
    if first < 0x80:
        return first - 1, pos + 1
    second = buf[pos + 1]
    if second < 0x80:  # two bytes cover lengths up to 16 KiB, most records blobs
        return ((first & 0x7F) | (second << 7)) - 1, pos + 2
    n, pos = read_uvarint(buf, pos)
    return n - 1, pos


def check_count(buf: memoryview, pos: int, count: int, what: str) -> None:
    """Refuse an array count that cannot fit in what is left of the buffer."""
    if count > len(buf) - pos:
        raise truncated(what)


_ARRAY_STRUCTS: dict[tuple[str, int], struct.Struct] = {}


def array_struct(code: str, count: int) -> struct.Struct:
    """A cached Struct for `count` fixed-width elements (arrays of ids, replicas...)."""
    key = (code, count)
    found = _ARRAY_STRUCTS.get(key)
    if found is None:
        found = struct.Struct(f">{count}{code}")
        if len(_ARRAY_STRUCTS) < 4096:
            _ARRAY_STRUCTS[key] = found
    return found


# --- strings and bytes -----------------------------------------------------


def _take(buf: memoryview, pos: int, n: int, what: str) -> memoryview:
    if n > len(buf) - pos:
        raise truncated(what)
    return buf[pos : pos + n]


def rd_str(buf: memoryview, pos: int) -> tuple[str, int]:
    n = _unpack_i16(buf, pos)[0]
    pos += 2
    if n < 0:
        raise null_in_non_nullable("string")
    return str(_take(buf, pos, n, "string"), "utf-8"), pos + n


def rd_nstr(buf: memoryview, pos: int) -> tuple[str | None, int]:
    n = _unpack_i16(buf, pos)[0]
    pos += 2
    if n < 0:
        return None, pos
    return str(_take(buf, pos, n, "string"), "utf-8"), pos + n


def rd_cstr(buf: memoryview, pos: int) -> tuple[str, int]:
    n, pos = rd_clen(buf, pos)
    if n < 0:
        raise null_in_non_nullable("compact string")
    return str(_take(buf, pos, n, "string"), "utf-8"), pos + n


def rd_ncstr(buf: memoryview, pos: int) -> tuple[str | None, int]:
    n, pos = rd_clen(buf, pos)
    if n < 0:
        return None, pos
    return str(_take(buf, pos, n, "string"), "utf-8"), pos + n


def rd_bytes(buf: memoryview, pos: int) -> tuple[bytes, int]:
    n = _unpack_i32(buf, pos)[0]
    pos += 4
    if n < 0:
        raise null_in_non_nullable("bytes")
    return bytes(_take(buf, pos, n, "bytes")), pos + n


def rd_nbytes(buf: memoryview, pos: int) -> tuple[bytes | None, int]:
    n = _unpack_i32(buf, pos)[0]
    pos += 4
    if n < 0:
        return None, pos
    return bytes(_take(buf, pos, n, "bytes")), pos + n


def rd_cbytes(buf: memoryview, pos: int) -> tuple[bytes, int]:
    n, pos = rd_clen(buf, pos)
    if n < 0:
        raise null_in_non_nullable("compact bytes")
    return bytes(_take(buf, pos, n, "bytes")), pos + n


def rd_ncbytes(buf: memoryview, pos: int) -> tuple[bytes | None, int]:
    n, pos = rd_clen(buf, pos)
    if n < 0:
        return None, pos
    return bytes(_take(buf, pos, n, "bytes")), pos + n


def rd_records(buf: memoryview, pos: int) -> tuple[memoryview | None, int]:
    """Records are a zero-copy view into the frame; null is allowed on the wire."""
    n = _unpack_i32(buf, pos)[0]
    pos += 4
    if n < 0:
        return None, pos
    return _take(buf, pos, n, "records"), pos + n


def rd_crecords(buf: memoryview, pos: int) -> tuple[memoryview | None, int]:
    n, pos = rd_clen(buf, pos)
    if n < 0:
        return None, pos
    return _take(buf, pos, n, "records"), pos + n


_UUIDS: dict[bytes, uuid.UUID] = {}
_UUIDS_MAX = 16384


def uuid_of(raw: bytes) -> uuid.UUID:
    """The UUID of 16 bytes from the wire: the same object for the same bytes while the cache
    has room. Topic ids recur in every Fetch and Produce; `uuid.UUID(bytes=)` costs about a
    microsecond, and a dict finds a shared UUID by identity without calling `UUID.__eq__`."""
    found = _UUIDS.get(raw)
    if found is None:
        found = uuid.UUID(bytes=raw)
        if len(_UUIDS) >= _UUIDS_MAX:
            # bounded: full (a client sending random ids fills it), it starts over, so the ids
            # that recur are shared again after a refill and a new topic's id is cached too
            _UUIDS.clear()
        _UUIDS[raw] = found
    return found


def rd_uuid(buf: memoryview, pos: int) -> tuple[uuid.UUID, int]:
    return uuid_of(bytes(_take(buf, pos, 16, "uuid"))), pos + 16


def _fixed_reader(fmt: str) -> Callable[[memoryview, int], tuple[Any, int]]:
    unpack = struct.Struct(fmt).unpack_from
    size = struct.calcsize(fmt)

    def read(buf: memoryview, pos: int) -> tuple[Any, int]:
        return unpack(buf, pos)[0], pos + size

    return read


def _fixed_writer(fmt: str) -> Callable[[Any, Append], None]:
    pack = struct.Struct(fmt).pack

    def write(value: Any, append: Append) -> None:
        append(pack(value))

    return write


# Fixed-width readers and writers, for tagged fields and lone values.
rd_int8, rd_int16, rd_int32, rd_int64 = (_fixed_reader(f) for f in (">b", ">h", ">i", ">q"))
rd_uint16, rd_uint32, rd_float64, rd_bool = (_fixed_reader(f) for f in (">H", ">I", ">d", ">?"))
wr_int8, wr_int16, wr_int32, wr_int64 = (_fixed_writer(f) for f in (">b", ">h", ">i", ">q"))
wr_uint16, wr_uint32, wr_float64, wr_bool = (_fixed_writer(f) for f in (">H", ">I", ">d", ">?"))


def rd_tags(buf: memoryview, pos: int) -> tuple[TaggedFields, int]:
    """Read a tagged-field section whose tags are all unknown to this version."""
    count, pos = rd_uvarint(buf, pos)
    check_count(buf, pos, count, "tagged fields")
    out = []
    for _ in range(count):
        tag, pos = rd_uvarint(buf, pos)
        size, pos = rd_uvarint(buf, pos)
        out.append((tag, bytes(_take(buf, pos, size, "tagged field"))))
        pos += size
    return tuple(out), pos


def rd_tag_header(buf: memoryview, pos: int) -> tuple[int, int, int]:
    """Read one tag's number and size; return (tag, start, stop) of its value."""
    tag, pos = rd_uvarint(buf, pos)
    size, pos = rd_uvarint(buf, pos)
    if size > len(buf) - pos:
        raise truncated("tagged field")
    return tag, pos, pos + size


def check_tag_end(pos: int, stop: int, tag: int) -> None:
    if pos != stop:
        raise ProtocolError(f"tagged field {tag} does not fill its declared size")


# --- writers -----------------------------------------------------------------


def wr_uvarint(value: int, append: Append) -> None:
    append(uvarint(value))


def wr_str(value: str | None, append: Append) -> None:
    if value is None:
        raise null_in_non_nullable("string")
    raw = value.encode("utf-8")
    append(_pack_i16(len(raw)))
    append(raw)


def wr_nstr(value: str | None, append: Append) -> None:
    if value is None:
        append(_NULL16)
    else:
        wr_str(value, append)


def wr_cstr(value: str | None, append: Append) -> None:
    if value is None:
        raise null_in_non_nullable("string")
    raw = value.encode("utf-8")
    append(uvarint(len(raw) + 1))
    append(raw)


def wr_ncstr(value: str | None, append: Append) -> None:
    if value is None:
        append(b"\x00")
    else:
        wr_cstr(value, append)


def wr_bytes(value: Records | None, append: Append) -> None:
    if value is None:
        raise null_in_non_nullable("bytes")
    append(_pack_i32(len(value)))
    append(value)


def wr_nbytes(value: Records | None, append: Append) -> None:
    if value is None:
        append(_NULL32)
    else:
        wr_bytes(value, append)


def wr_cbytes(value: Records | None, append: Append) -> None:
    if value is None:
        raise null_in_non_nullable("bytes")
    append(uvarint(len(value) + 1))
    append(value)


def wr_ncbytes(value: Records | None, append: Append) -> None:
    if value is None:
        append(b"\x00")
    else:
        wr_cbytes(value, append)


def wr_uuid(value: uuid.UUID, append: Append) -> None:
    append(value.bytes)


def wr_records(value: RecordsValue | None, append: Append) -> None:
    """Records are appended as given (no copy); null is written as length -1."""
    if value is None:
        append(_NULL32)
    else:
        append(_pack_i32(len(value)))
        append(value)


def wr_crecords(value: RecordsValue | None, append: Append) -> None:
    if value is None:
        append(b"\x00")
    else:
        append(uvarint(len(value) + 1))
        append(value)


def wr_varint(value: int, append: Append) -> None:
    append(varint(value))


def wr_varlong(value: int, append: Append) -> None:
    append(varlong(value))


def wr_len32(value: int, append: Append) -> None:
    append(_pack_i32(value))


def wr_clen(value: int, append: Append) -> None:
    """A compact length (value + 1); -1 writes null."""
    append(uvarint(value + 1))


def wr_tags(tags: list[tuple[int, bytes]] | TaggedFields, append: Append) -> None:
    """Write a tagged-field section; `tags` must be sorted by tag."""
    append(uvarint(len(tags)))
    for tag, raw in tags:
        append(uvarint(tag))
        append(uvarint(len(raw)))
        append(raw)


def tag_key(item: tuple[int, bytes]) -> int:
    return item[0]
