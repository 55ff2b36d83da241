"""Emits the per-version writers (the mirror of the readers in emit_codec)."""

from __future__ import annotations

from strom.wire.codegen.emit_codec import Emitter, Layout
from strom.wire.codegen.schema import Field
from strom.wire.codegen.types import (
    FIXED,
    class_ref,
    default_is_null,
    default_value_check,
    ever_nullable,
)


class CodecEmitter(Emitter):
    """Readers (from Emitter) plus writers."""

    def writer(self, struct_name: str, fields: list[Field], version: int) -> str:
        flexible = version in self.msg.flexible
        lays = self.layouts(fields, version)
        present = {lay.f.name for lay in lays}
        ann = class_ref(self.msg, struct_name)
        lines = [f"def __NAME__(o: {ann}, out: list[Any]) -> None:", "    a = out.append"]
        for f in fields:
            if f.name not in present and not f.ignorable:
                check = default_value_check(self.msg, f, f"o.{f.attr}")
                lines += [f"    if {check}:", f"        raise unsupported({f.name!r})"]
        regular = [lay for lay in lays if not lay.tagged]
        i = 0
        while i < len(regular):
            run = []
            while i < len(regular) and regular[i].f.type in FIXED:
                run.append(regular[i])
                i += 1
            if run:
                fmt = "".join(FIXED[lay.f.type][0] for lay in run)
                args = ", ".join(
                    f"o.{lay.f.attr}.bytes" if lay.f.type == "uuid" else f"o.{lay.f.attr}" for lay in run
                )
                lines.append(f"    a({self.const(fmt, 'P')}({args}))")
                continue
            lines += self.write_field(regular[i], f"o.{regular[i].f.attr}", version, "out", "a", "    ")
            i += 1
        if flexible:
            lines += self._write_tags([lay for lay in lays if lay.tagged], version)
        return self.intern("wr", struct_name, version, "\n".join(lines))

    def write_field(
        self, lay: Layout, expr: str, version: int, out: str, app: str, ind: str, narrowed: bool = False
    ) -> list[str]:
        """Write one field; `narrowed` means the caller already knows it is not None."""
        f = lay.f
        if f.is_array:
            return self._write_array(lay, expr, version, out, app, ind, narrowed)
        if f.is_struct:
            fn = self.writer(f.element, self.msg.structs[f.element].fields, version)
            if narrowed or not _optional(f):
                marker = [f"{ind}{app}(b'\\x01')"] if lay.nullable else []
                return [*marker, f"{ind}{fn}({expr}, {out})"]
            null = f"{app}(b'\\xff')" if lay.nullable else f"raise null_in_non_nullable({f.name!r})"
            var = f"s_{f.attr}"
            lines = [f"{ind}{var} = {expr}", f"{ind}if {var} is None:", f"{ind}    {null}", f"{ind}else:"]
            if lay.nullable:
                lines.append(f"{ind}    {app}(b'\\x01')")
            return [*lines, f"{ind}    {fn}({var}, {out})"]
        return [f"{ind}{_scalar_writer(lay)}({expr}, {app})"]

    def _write_array(
        self, lay: Layout, expr: str, version: int, out: str, app: str, ind: str, narrowed: bool
    ) -> list[str]:
        f = lay.f
        length = "wr_clen" if lay.compact else "wr_len32"
        arr, item = f"arr_{f.attr}", f"item_{f.attr}"
        lines = [f"{ind}{arr} = {expr}"]
        inner = ind
        if not narrowed and _optional(f):
            null = f"{length}(-1, {app})" if lay.nullable else f"raise null_in_non_nullable({f.name!r})"
            lines += [f"{ind}if {arr} is None:", f"{ind}    {null}", f"{ind}else:"]
            inner = ind + "    "
        lines.append(f"{inner}{length}(len({arr}), {app})")
        elem = f.element
        if elem in FIXED and elem != "uuid":
            code = FIXED[elem][0]
            return [*lines, f"{inner}{app}(array_struct({code!r}, len({arr})).pack(*{arr}))"]
        if f.is_struct:
            fn = self.writer(elem, self.msg.structs[elem].fields, version)
            return [*lines, f"{inner}for {item} in {arr}:", f"{inner}    {fn}({item}, {out})"]
        fn = _scalar_writer(Layout(f, False, False, lay.compact), element=True)
        return [*lines, f"{inner}for {item} in {arr}:", f"{inner}    {fn}({item}, {app})"]

    def _write_tags(self, tagged: list[Layout], version: int) -> list[str]:
        if not tagged:
            return [
                "    unk = o.unknown_tagged_fields",
                "    if unk:",
                "        wr_tags(sorted(unk, key=tag_key), a)",
                "    else:",
                "        a(b'\\x00')",
            ]
        lines = ["    tags: list[tuple[int, bytes]] = []", "    sub: list[Any]"]
        for lay in sorted(tagged, key=lambda lay: lay.f.tag or 0):
            expr = f"o.{lay.f.attr}"
            lines += [
                f"    if {default_value_check(self.msg, lay.f, expr)}:",
                "        sub = []",
            ]
            narrowed = default_is_null(lay.f)
            lines += self.write_field(lay, expr, version, "sub", "sub.append", " " * 8, narrowed)
            lines.append(f"        tags.append(({lay.f.tag}, b''.join(sub)))")
        lines += [
            "    unk = o.unknown_tagged_fields",
            "    if unk:",
            "        tags.extend(unk)",
            "        tags.sort(key=tag_key)",
            "    wr_tags(tags, a)",
        ]
        return lines


def _optional(f: Field) -> bool:
    """Whether the attribute's type admits None (so the writer must check)."""
    return ever_nullable(f) or default_is_null(f)


def _scalar_writer(lay: Layout, element: bool = False) -> str:
    t = lay.f.element
    c = "c" if lay.compact else ""
    n = "n" if lay.nullable and not element else ""
    if t == "string":
        return f"wr_{n}{c}str"
    if t == "bytes":
        return f"wr_{n}{c}bytes"
    if t == "records":
        return f"wr_{c}records"
    if t == "uuid":
        return "wr_uuid"
    if t == "varint":
        return "wr_varint"
    if t == "varlong":
        return "wr_varlong"
    if t in FIXED:
        return f"wr_{t}"
    raise ValueError(f"no writer for {t}")
