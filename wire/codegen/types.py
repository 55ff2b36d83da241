"""How each JSON field type maps to Python: annotations, defaults, fixed widths."""

from __future__ import annotations

from strom.wire.codegen.schema import Field, Message

# struct format code and width of the fixed-width types
FIXED: dict[str, tuple[str, int]] = {
    "int8": ("b", 1),
    "int16": ("h", 2),
    "int32": ("i", 4),
    "int64": ("q", 8),
    "uint16": ("H", 2),
    "uint32": ("I", 4),
    "float64": ("d", 8),
    "bool": ("?", 1),
    "uuid": ("16s", 16),
}
INT_TYPES = frozenset({"int8", "int16", "int32", "int64", "uint16", "uint32", "varint", "varlong"})


def class_ref(msg: Message, struct_name: str) -> str:
    """The dotted name of a nested struct class, usable anywhere in the module."""
    return msg.name if struct_name == msg.name else f"{msg.name}.{struct_name}"


def alias(msg: Message, struct_name: str) -> str:
    """A module-level alias for a nested struct class (a fast global lookup)."""
    return f"_C_{msg.name}" if struct_name == msg.name else f"_C_{msg.name}_{struct_name}"


def ever_nullable(f: Field) -> bool:
    return not f.nullable.empty


def annotation(msg: Message, f: Field) -> str:
    elem = f.element
    if elem in INT_TYPES:
        base = "int"
    elif elem == "float64":
        base = "float"
    elif elem == "bool":
        base = "bool"
    elif elem == "string":
        base = "str"
    elif elem == "bytes":
        base = "bytes"
    elif elem == "uuid":
        base = "uuid.UUID"
    elif elem == "records":
        return "Records | None"
    else:
        base = class_ref(msg, elem)
    if f.is_array:
        base = f"list[{base}]"
    if ever_nullable(f) or default_is_null(f):
        base += " | None"
    return base


def default_is_null(f: Field) -> bool:
    return f.default == "null" or (f.element == "records" and f.default is None)


def default_literal(f: Field) -> str:
    """A Python expression for the field's default (mutable ones are built fresh)."""
    d = f.default
    if default_is_null(f):
        return "None"
    if f.is_array:
        return "[]"
    elem = f.element
    if elem in INT_TYPES:
        if d is None or d == "":
            return "0"
        return str(int(d, 0) if isinstance(d, str) else int(d))
    if elem == "bool":
        return "True" if d in (True, "true") else "False"
    if elem == "float64":
        return repr(float(d)) if d is not None else "0.0"
    if elem == "string":
        return repr(d if d is not None else "")
    if elem == "bytes":
        return "b''"
    if elem == "uuid":
        if d:
            raise ValueError(f"uuid default {d!r} is not supported")
        return "ZERO_UUID"
    raise ValueError(f"no default for struct field {f.name}")  # structs handled by callers


def is_mutable_default(f: Field) -> bool:
    """Lists and struct instances must be built per object, not shared."""
    return not default_is_null(f) and (f.is_array or f.is_struct)


def default_value_check(msg: Message, f: Field, expr: str) -> str:
    """A condition that is true when `expr` differs from the field's default."""
    if default_is_null(f):
        return f"{expr} is not None"
    if f.is_array:
        return f"{expr}"  # non-empty list
    if f.is_struct:
        differs = f"_nd{alias(msg, f.element)[2:]}({expr})"
        return f"({expr} is None or {differs})" if ever_nullable(f) else differs
    return f"{expr} != {default_literal(f)}"


def not_default_function(msg: Message, struct_name: str, fields: list[Field]) -> str:
    """A function telling whether a struct differs from a default-built one.

    Writers call it to decide whether a tagged struct field is written; it is
    several times faster than building and comparing a default instance.
    """
    name = f"_nd{alias(msg, struct_name)[2:]}"
    terms = []
    for f in fields:
        terms.append(default_value_check(msg, f, f"v.{f.attr}"))
    terms.append("v.unknown_tagged_fields")
    body = " or ".join(f"({t})" for t in terms)
    return f"def {name}(v: Any) -> bool:\n    return bool({body})"
