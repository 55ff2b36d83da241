"""Emits one reader and one writer per struct and version.

Each function is straight-line code for exactly one version: fixed-width runs
of fields become a single precompiled `struct` call, variable-length fields
call the small helpers in `strom.wire.message`. Versions whose code comes out the
same share one function.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from strom.wire.codegen.schema import Field, Message
from strom.wire.codegen.types import (
    FIXED,
    alias,
    class_ref,
    default_literal,
    default_value_check,
    is_mutable_default,
)


@dataclass
class Layout:
    """A field as it appears in one version."""

    f: Field
    tagged: bool
    nullable: bool
    compact: bool


@dataclass
class Emitter:
    """Accumulates the functions and struct constants of one module."""

    msg: Message
    structs: dict[str, str] = field(default_factory=dict)  # format -> constant prefix
    functions: dict[str, str] = field(default_factory=dict)  # body -> name
    order: list[tuple[str, str]] = field(default_factory=list)  # (name, source)

    def const(self, fmt: str, kind: str) -> str:
        key = fmt.replace("16s", "U").replace("?", "o")
        self.structs[fmt] = key
        return f"_{kind}_{key}"

    def layouts(self, fields: list[Field], version: int) -> list[Layout]:
        flexible = version in self.msg.flexible
        out = []
        for f in fields:
            if version not in f.versions:
                continue
            compact = flexible and (f.flexible is None or version in f.flexible)
            out.append(Layout(f, flexible and version in f.tagged, version in f.nullable, compact))
        return out

    def intern(self, kind: str, struct_name: str, version: int, body: str) -> str:
        """Name a function by its body, so identical versions share one."""
        if body in self.functions:
            return self.functions[body]
        owner = self.msg.name if struct_name == self.msg.name else f"{self.msg.name}_{struct_name}"
        name = f"_{kind}_{owner}_v{version}"
        self.functions[body] = name
        self.order.append((name, body.replace("__NAME__", name)))
        return name

    # --- readers -------------------------------------------------------------

    def reader(self, struct_name: str, fields: list[Field], version: int) -> str:
        flexible = version in self.msg.flexible
        lays = self.layouts(fields, version)
        cls = alias(self.msg, struct_name)
        ann = class_ref(self.msg, struct_name)
        lines = [f"def __NAME__(buf: memoryview, pos: int) -> tuple[{ann}, int]:"]
        regular = [lay for lay in lays if not lay.tagged]
        tagged = [lay for lay in lays if lay.tagged]
        lines += [f"    v_{lay.f.attr}: Any" for lay in regular if lay.f.is_array]
        i = 0
        while i < len(regular):
            run = []
            while i < len(regular) and _fixed(regular[i]):
                run.append(regular[i])
                i += 1
            if run:
                lines += self._read_run(run)
                continue
            lines += self.read_field(regular[i], f"v_{regular[i].f.attr}", version, "buf", "pos", "    ")
            i += 1
        if flexible:
            lines += self._read_tags(tagged, version)
        present = {lay.f.name for lay in lays if not lay.tagged or flexible}
        args = []
        for f in fields:
            if f.name in present:
                args.append(f"v_{f.attr}")
            elif is_mutable_default(f) and f.is_struct and not f.is_array:
                args.append(f"{alias(self.msg, f.element)}()")
            else:
                args.append(default_literal(f))
        if flexible:
            args.append("unknown")
        lines.append(f"    return {cls}({', '.join(args)}), pos")
        return self.intern("rd", struct_name, version, "\n".join(lines))

    def _read_run(self, run: list[Layout]) -> list[str]:
        fmt = "".join(FIXED[lay.f.type][0] for lay in run)
        size = sum(FIXED[lay.f.type][1] for lay in run)
        names = [f"v_{lay.f.attr}" for lay in run]
        fn = self.const(fmt, "U")
        target = f"{names[0]}," if len(names) == 1 else ", ".join(names)
        lines = [f"    {target} = {fn}(buf, pos)", f"    pos += {size}"]
        for lay in run:
            if lay.f.type == "uuid":
                lines.append(f"    v_{lay.f.attr} = uuid_of(v_{lay.f.attr})")
        return lines

    def read_field(self, lay: Layout, target: str, version: int, buf: str, pos: str, ind: str) -> list[str]:
        f = lay.f
        if f.is_array:
            return self._read_array(lay, target, version, buf, pos, ind)
        if f.is_struct:
            sub = self.msg.structs[f.element]
            fn = self.reader(f.element, sub.fields, version)
            if lay.nullable:
                return [
                    f"{ind}if {buf}[{pos}] & 0x80:",
                    f"{ind}    {target} = None",
                    f"{ind}    {pos} += 1",
                    f"{ind}else:",
                    f"{ind}    {target}, {pos} = {fn}({buf}, {pos} + 1)",
                ]
            return [f"{ind}{target}, {pos} = {fn}({buf}, {pos})"]
        return [f"{ind}{target}, {pos} = {_scalar_reader(lay)}({buf}, {pos})"]

    def _read_array(self, lay: Layout, target: str, version: int, buf: str, pos: str, ind: str) -> list[str]:
        f = lay.f
        length = "rd_clen" if lay.compact else "rd_len32"
        null = f"{target} = None" if lay.nullable else f"raise null_in_non_nullable({f.name!r})"
        lines = [
            f"{ind}n, {pos} = {length}({buf}, {pos})",
            f"{ind}if n < 0:",
            f"{ind}    {null}",
            f"{ind}else:",
            f"{ind}    check_count({buf}, {pos}, n, {f.name!r})",
        ]
        elem = f.element
        if elem in FIXED and elem != "uuid":
            code, width = FIXED[elem]
            lines += [
                f"{ind}    {target} = list(array_struct({code!r}, n).unpack_from({buf}, {pos}))",
                f"{ind}    {pos} += n * {width}",
            ]
            return lines
        if f.is_struct:
            fn = self.reader(elem, self.msg.structs[elem].fields, version)
        else:
            fn = _scalar_reader(Layout(f, False, False, lay.compact), element=True)
        lines += [
            f"{ind}    {target} = []",
            f"{ind}    for _ in range(n):",
            f"{ind}        item_{f.attr}, {pos} = {fn}({buf}, {pos})",
            f"{ind}        {target}.append(item_{f.attr})",
        ]
        return lines

    def _read_tags(self, tagged: list[Layout], version: int) -> list[str]:
        if not tagged:
            return [
                "    if buf[pos]:",
                "        unknown, pos = rd_tags(buf, pos)",
                "    else:",
                "        pos += 1",
                "        unknown = ()",
            ]
        lines = []
        for lay in tagged:
            if is_mutable_default(lay.f) and lay.f.is_struct and not lay.f.is_array:
                default = f"{alias(self.msg, lay.f.element)}()"
            else:
                default = default_literal(lay.f)
            lines.append(f"    v_{lay.f.attr}: Any = {default}")
        lines += [
            "    unknown: Any = ()",
            "    count, pos = rd_uvarint(buf, pos)",
            "    if count:",
            "        check_count(buf, pos, count, 'tagged fields')",
            "        unk: list[tuple[int, bytes]] = []",
            "        for _ in range(count):",
            "            tag, start, stop = rd_tag_header(buf, pos)",
        ]
        for k, lay in enumerate(sorted(tagged, key=lambda lay: lay.f.tag or 0)):
            kw = "if" if k == 0 else "elif"
            lines.append(f"            {kw} tag == {lay.f.tag}:")
            lines.append("                sub = buf[:stop]")
            lines += self.read_field(lay, f"v_{lay.f.attr}", version, "sub", "start", " " * 16)
            lines.append("                check_tag_end(start, stop, tag)")
        lines += [
            "            else:",
            "                unk.append((tag, bytes(buf[start:stop])))",
            "            pos = stop",
            "        unknown = tuple(unk)",
        ]
        return lines


def _fixed(lay: Layout) -> bool:
    return lay.f.type in FIXED and not lay.tagged


def _scalar_reader(lay: Layout, element: bool = False) -> str:
    t = lay.f.element
    c = "c" if lay.compact else ""
    n = "n" if lay.nullable and not element else ""
    if t == "string":
        return f"rd_{n}{c}str"
    if t == "bytes":
        return f"rd_{n}{c}bytes"
    if t == "records":
        return f"rd_{c}records"
    if t == "uuid":
        return "rd_uuid"
    if t == "varint":
        return "read_varint"
    if t == "varlong":
        return "read_varlong"
    if t in FIXED:
        return f"rd_{t}"
    raise ValueError(f"no reader for {t}")


__all__ = ["Emitter", "Layout", "default_value_check"]
