"""The schema compiler: message classes, and encode/decode functions compiled per version.

How it works. `message_class` turns a schema into a Python class per struct (the message itself
and every nested struct), holding the union of the fields of all versions as `__slots__`. The
first time a (message, version) is used, `compile_version` writes Python source for one encode and
one decode function per struct as it is laid out in that version (runs of fixed-width fields
become a single precompiled `struct.Struct`; compact lengths and tagged sections are inlined), and
`exec`s it once. Nothing interprets the schema per message after that.

Errors. The fast functions carry no bookkeeping. When one raises, the same bytes (or object) are
run through a second, "traced" compilation that records the field it is at, so the error names
the API, version and field (`DecodeError` / `EncodeError`) at no cost on the happy path.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

from epochlog.protocol.errors import DecodeError, EncodeError, UnsupportedVersionError
from epochlog.protocol.schema import (
    _MISSING,
    FIXED_SIZES,
    FIXED_TYPES,
    ZERO_UUID,
    Field,
    MessageSchema,
)
from epochlog.protocol.varint import decode_uvarint, encode_uvarint

# --------------------------------------------------------------------------- message classes


class Message:
    """Base of every generated message and struct class."""

    __slots__ = ()
    SCHEMA: MessageSchema
    STRUCT_NAME: str
    FIELDS: tuple[Field, ...]
    MESSAGE: type[Message]  # the top-level message class this struct belongs to

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, f.attr) == getattr(other, f.attr) for f in self.FIELDS)

    __hash__ = None  # type: ignore[assignment]  # mutable, like Kafka's generated messages

    def __repr__(self) -> str:
        parts = ", ".join(f"{f.attr}={getattr(self, f.attr)!r}" for f in self.FIELDS)
        return f"{self.STRUCT_NAME}({parts})"

    def encode(self, version: int) -> bytes:
        """The message body at `version` (no header, no size prefix)."""
        out = bytearray()
        encode_into(self, version, out)
        return bytes(out)

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview, version: int) -> Any:
        """Decode a whole body; trailing bytes are an error."""
        obj, pos = decode_from(cls, data, version, 0)
        if pos != len(data):
            raise DecodeError(
                cls.SCHEMA.name, version, None, f"{len(data) - pos} bytes left after the message"
            )
        return obj


def _default_expr(f: Field, classes: dict[str, type], consts: dict[str, Any]) -> str:
    """Python source that evaluates to a fresh default value of `f`."""
    if f.is_array:
        return "None" if f.has_default() and f.default is None else "[]"
    if f.is_struct:
        if f.has_default() and f.default is None:
            return "None"
        name = f"_C_{f.element_type}"
        consts[name] = classes[f.element_type]
        return f"{name}()"
    value = f.default_value()
    if isinstance(value, bool | int | float | str | bytes) or value is None:
        return repr(value)
    name = f"_D{len(consts)}"
    consts[name] = value
    return name


def _collect_structs(fields: tuple[Field, ...], out: dict[str, tuple[Field, ...]]) -> None:
    for f in fields:
        if f.is_struct and f.fields:
            out.setdefault(f.element_type, f.fields)
            _collect_structs(f.fields, out)


def message_class(schema: MessageSchema) -> type[Message]:
    """Build the class for a message and its nested struct classes (attributes of it)."""
    structs: dict[str, tuple[Field, ...]] = {}
    _collect_structs(schema.fields, structs)
    classes: dict[str, type] = {}
    # Inner structs first, so a struct's default can instantiate the structs it contains.
    order: list[str] = []

    def visit(name: str, fields: tuple[Field, ...]) -> None:
        for f in fields:
            if f.is_struct and f.element_type not in order:
                visit(f.element_type, structs[f.element_type])
        if name not in order:
            order.append(name)

    visit(schema.name, schema.fields)
    structs[schema.name] = schema.fields
    for name in order:
        classes[name] = _make_struct_class(schema, name, _resolve(structs[name], structs), classes)
    top = classes[schema.name]
    for name, cls in classes.items():
        cls.MESSAGE = top  # type: ignore[attr-defined]
        if name != schema.name:
            setattr(top, name, cls)
    return top


def _resolve(fields: tuple[Field, ...], structs: dict[str, tuple[Field, ...]]) -> tuple[Field, ...]:
    """Fill in the fields of struct references declared elsewhere in the message."""
    resolved = []
    for f in fields:
        if f.is_struct and not f.fields:
            f = Field(**{**f.__dict__, "fields": structs[f.element_type]})
        resolved.append(f)
    return tuple(resolved)


def _make_struct_class(
    schema: MessageSchema, name: str, fields: tuple[Field, ...], classes: dict[str, type]
) -> type:
    # The generated __init__ is compiled on the class's first instantiation, not here: building
    # every message class at import compiled ~260 of them (about 40 ms), a cost each process pays
    # though most use a handful (Spark starts one per streaming query). Decoding never calls it.
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        init = _compile_init(schema, name, fields, classes)
        cls.__init__ = init  # type: ignore[misc]
        init(self, *args, **kwargs)

    attrs: dict[str, Any] = {
        "__slots__": tuple(f.attr for f in fields),
        "__init__": __init__,
        "SCHEMA": schema,
        "STRUCT_NAME": name if name == schema.name else f"{schema.name}.{name}",
        "FIELDS": fields,
        "__module__": "epochlog.protocol.messages",
        "__qualname__": name if name == schema.name else f"{schema.name}.{name}",
    }
    cls = type(name, (Message,), attrs)
    return cls


def _compile_init(
    schema: MessageSchema, name: str, fields: tuple[Field, ...], classes: dict[str, type]
) -> Callable[..., None]:
    """The struct's __init__: every field a keyword argument defaulting to a fresh default."""
    consts: dict[str, Any] = {"_M": _MISSING}
    params = ", ".join(f"{f.attr}=_M" for f in fields)
    lines = [f"def __init__(self{', ' if params else ''}{params}):"]
    for f in fields:
        lines.append(
            f"    self.{f.attr} = {_default_expr(f, classes, consts)}"
            f" if {f.attr} is _M else {f.attr}"
        )
    if not fields:
        lines.append("    pass")
    namespace: dict[str, Any] = {}
    exec(compile("\n".join(lines), f"<{schema.name}.{name}.__init__>", "exec"), consts, namespace)
    init: Callable[..., None] = namespace["__init__"]
    return init


# --------------------------------------------------------------------------- compiled codecs


class _Bad(Exception):
    """Raised inside compiled decoders for a value that is present but invalid."""


class _Absent(Exception):
    """Raised inside compiled encoders for a set field the version does not have."""


_H = struct.Struct(">h")
_I = struct.Struct(">i")
_RUNTIME: dict[str, Any] = {
    "_ph": _H.pack,
    "_pi": _I.pack,
    "_uh": _H.unpack_from,
    "_ui": _I.unpack_from,
    "_euv": encode_uvarint,
    "_duv": decode_uvarint,
    "_pack": struct.pack,
    "_unpack": struct.unpack_from,
    "_UUID": uuid.UUID,
    "_Bad": _Bad,
    "_Absent": _Absent,
    "_ZU": ZERO_UUID,
    "_new": object.__new__,
}


class SegmentedBuffer(bytearray):
    """An encoding with holes: `slices` lists (position, file slice) pairs whose bytes belong at
    that position. A server writes the bytes between them and sends the slices with sendfile, so
    fetched log data never passes through Python."""

    def __init__(self, initial: bytes = b"") -> None:
        super().__init__(initial)
        self.slices: list[tuple[int, Any]] = []

    @property
    def total_size(self) -> int:
        return len(self) + sum(len(s) for _, s in self.slices)


def _append_records(out: bytearray, value: Any) -> None:
    """Records that are not `bytes`: copied in, or left as a hole in a SegmentedBuffer."""
    if isinstance(value, bytearray | memoryview):
        out += value
    elif isinstance(out, SegmentedBuffer):
        if len(value):
            out.slices.append((len(out), value))
    else:
        out += value.read_bytes()


_RUNTIME["_records"] = _append_records


class _Compiled:
    __slots__ = ("encode", "decode", "trace")

    def __init__(
        self, encode: Callable[..., None], decode: Callable[..., Any], trace: list[str]
    ) -> None:
        self.encode = encode
        self.decode = decode
        self.trace = trace


class _Gen:
    """Writes the encode/decode source for every struct of one message at one version."""

    def __init__(self, cls: type[Message], version: int, traced: bool) -> None:
        self.cls = cls
        self.schema = cls.SCHEMA
        self.version = version
        self.traced = traced
        self.flexible = self.schema.is_flexible(version)
        self.ns: dict[str, Any] = dict(_RUNTIME)
        self.ns["_T"] = [""]
        self.lines: list[str] = []
        self.done: set[str] = set()
        self.n_consts = 0

    def const(self, value: Any) -> str:
        name = f"_K{self.n_consts}"
        self.n_consts += 1
        self.ns[name] = value
        return name

    def struct_class(self, name: str) -> type[Message]:
        return self.cls if name == self.schema.name else getattr(self.cls, name)

    # -- field classification for this version

    def is_tagged(self, f: Field) -> bool:
        return f.tag is not None and self.version in f.tagged

    def present(self, fields: tuple[Field, ...]) -> list[Field]:
        return [f for f in fields if self.version in f.versions and not self.is_tagged(f)]

    def tagged(self, fields: tuple[Field, ...]) -> list[Field]:
        return sorted(
            (f for f in fields if self.version in f.versions and self.is_tagged(f)),
            key=lambda f: f.tag or 0,
        )

    def compact(self, f: Field) -> bool:
        return self.flexible and (f.flexible is None or self.version in f.flexible)

    def nullable(self, f: Field) -> bool:
        return self.version in f.nullable

    # -- driver

    def generate(self) -> None:
        self.gen_struct(self.schema.name, self.cls.FIELDS, "")

    def gen_struct(self, name: str, fields: tuple[Field, ...], path: str) -> None:
        if name in self.done:
            return
        self.done.add(name)
        for f in fields:
            if self.version in f.versions and f.is_struct:
                sub = f.fields or self.struct_class(f.element_type).FIELDS
                sub_path = f"{path}{f.attr}{'[]' if f.is_array else ''}."
                self.gen_struct(f.element_type, sub, sub_path)
        self.gen_encoder(name, fields, path)
        self.gen_decoder(name, fields, path)

    def trace(self, out: list[str], indent: str, path: str) -> None:
        if self.traced:
            out.append(f"{indent}_T[0] = {path!r}")

    # -- encoder

    def gen_encoder(self, name: str, fields: tuple[Field, ...], path: str) -> None:
        body: list[str] = []
        present = self.present(fields)
        i = 0
        while i < len(present):
            f = present[i]
            if f.type in FIXED_TYPES and not self.traced:
                run = [f]
                while i + 1 < len(present) and present[i + 1].type in FIXED_TYPES:
                    i += 1
                    run.append(present[i])
                fmt = struct.Struct(">" + "".join(FIXED_TYPES[r.type] for r in run))
                args = ", ".join(f"o.{r.attr}" for r in run)
                body.append(f"    out += {self.const(fmt.pack)}({args})")
            else:
                self.trace(body, "    ", path + f.attr)
                self.encode_value(body, "    ", f, f"o.{f.attr}", "out")
            i += 1
        if self.flexible:
            self.encode_tagged(body, fields, path)
        for f in fields:
            if self.version not in f.versions and not f.ignorable:
                default = f.default_value()
                if f.is_struct and not f.is_array and default is None and not f.has_default():
                    default = self.struct_class(f.element_type)()
                self.trace(body, "    ", path + f.attr)
                body.append(f"    if o.{f.attr} != {self.const(default)}: raise _Absent()")
        self.lines.append(f"def e_{name}(o, out):")
        self.lines.extend(body or ["    pass"])
        self.lines.append("")

    def encode_length(
        self, out: list[str], ind: str, expr: str, compact: bool, wide: bool, dst: str
    ) -> None:
        if compact:
            out.append(f"{ind}_l = {expr} + 1")
            out.append(f"{ind}if _l < 128: {dst}.append(_l)")
            out.append(f"{ind}else: {dst} += _euv(_l)")
        else:
            out.append(f"{ind}{dst} += {'_pi' if wide else '_ph'}({expr})")

    def encode_null(self, out: list[str], ind: str, compact: bool, wide: bool, dst: str) -> None:
        if compact:
            out.append(f"{ind}{dst}.append(0)")
        else:
            null = b"\xff\xff\xff\xff" if wide else b"\xff\xff"
            out.append(f"{ind}{dst} += {null!r}")

    def encode_value(self, out: list[str], ind: str, f: Field, expr: str, dst: str) -> None:
        compact = self.compact(f)
        t = f.type
        if f.is_array:
            out.append(f"{ind}_a = {expr}")
            if self.nullable(f):
                out.append(f"{ind}if _a is None:")
                self.encode_null(out, ind + "    ", compact, True, dst)
                out.append(f"{ind}else:")
                ind += "    "
            self.encode_length(out, ind, "len(_a)", compact, True, dst)
            elem = f.element_type
            if elem in FIXED_TYPES:
                code = FIXED_TYPES[elem]
                out.append(f"{ind}if _a: {dst} += _pack('>%d{code}' % len(_a), *_a)")
            elif f.is_struct:
                out.append(f"{ind}for _e in _a: e_{elem}(_e, {dst})")
            else:
                out.append(f"{ind}for _e in _a:")
                self.encode_scalar(out, ind + "    ", elem, "_e", compact, False, dst)
            return
        if f.is_struct:
            if self.nullable(f):
                # Kafka's nullable struct: int8 -1 for null, else 1 and the struct.
                out.append(f"{ind}_s = {expr}")
                out.append(f"{ind}if _s is None: {dst}.append(255)")
                out.append(f"{ind}else:")
                out.append(f"{ind}    {dst}.append(1)")
                out.append(f"{ind}    e_{t}(_s, {dst})")
                return
            out.append(f"{ind}e_{t}({expr}, {dst})")
            return
        self.encode_scalar(out, ind, t, expr, compact, self.nullable(f), dst)

    def encode_scalar(
        self, out: list[str], ind: str, t: str, expr: str, compact: bool, nullable: bool, dst: str
    ) -> None:
        if t in FIXED_TYPES:
            fmt = struct.Struct(">" + FIXED_TYPES[t])
            out.append(f"{ind}{dst} += {self.const(fmt.pack)}({expr})")
            return
        if t == "uuid":
            out.append(f"{ind}{dst} += {expr}.bytes")
            return
        wide = t != "string"
        out.append(f"{ind}_v = {expr}")
        if nullable:
            out.append(f"{ind}if _v is None:")
            self.encode_null(out, ind + "    ", compact, wide, dst)
            out.append(f"{ind}else:")
            ind += "    "
        if t == "string":
            out.append(f"{ind}_v = _v.encode()")
        self.encode_length(out, ind, "len(_v)", compact, wide, dst)
        if t == "records":  # may be a file slice that a server sends with sendfile
            out.append(f"{ind}if _v.__class__ is bytes: {dst} += _v")
            out.append(f"{ind}else: _records({dst}, _v)")
        else:
            out.append(f"{ind}{dst} += _v")

    def encode_tagged(self, out: list[str], fields: tuple[Field, ...], path: str) -> None:
        tagged = self.tagged(fields)
        if not tagged:
            out.append("    out.append(0)")
            return
        out.append("    _tags = []")
        for f in tagged:
            default = f.default_value()
            self.trace(out, "    ", path + f.attr)
            if f.is_struct and not f.is_array and default is None and not f.has_default():
                cond = self.differs_from_default_struct(f, f"o.{f.attr}")
            elif f.is_array and default == []:
                cond = f"o.{f.attr}"
            else:
                cond = f"o.{f.attr} != {self.const(default)}"
            out.append(f"    if {cond}:")
            out.append("        _t = bytearray()")
            self.encode_value(out, "        ", f, f"o.{f.attr}", "_t")
            out.append(f"        _tags.append(({f.tag}, _t))")
        out.append("    out += _euv(len(_tags))")
        out.append("    for _g, _t in _tags:")
        out.append("        out += _euv(_g)")
        out.append("        out += _euv(len(_t))")
        out.append("        out += _t")

    # -- decoder

    def gen_decoder(self, name: str, fields: tuple[Field, ...], path: str) -> None:
        # Build the object with __new__ and slot stores: nearly 3x faster than calling __init__.
        body: list[str] = [f"    o = _new({self.const(self.struct_class(name))})"]
        for f in fields:
            if self.version not in f.versions:
                body.append(f"    o.{f.attr} = {self.fresh_default(f)}")
        present = self.present(fields)
        i = 0
        while i < len(present):
            f = present[i]
            if f.type in FIXED_TYPES and not self.traced:
                run = [f]
                while i + 1 < len(present) and present[i + 1].type in FIXED_TYPES:
                    i += 1
                    run.append(present[i])
                fmt = struct.Struct(">" + "".join(FIXED_TYPES[r.type] for r in run))
                targets = "".join(f"o.{r.attr}, " for r in run)
                body.append(f"    {targets}= {self.const(fmt.unpack_from)}(buf, pos)")
                body.append(f"    pos += {fmt.size}")
            else:
                self.trace(body, "    ", path + f.attr)
                self.decode_value(body, "    ", f, f"o.{f.attr}")
            i += 1
        tagged = self.tagged(fields) if self.flexible else []
        if self.flexible:
            for f in tagged:
                body.append(f"    o.{f.attr} = {self.fresh_default(f)}")
            self.trace(body, "    ", path + "<tagged fields>")
            body.append("    _nt = buf[pos]")
            body.append("    if _nt < 128: pos += 1")
            body.append("    else: _nt, pos = _duv(buf, pos)")
            body.append("    if _nt:")
            body.append("        _last = -1")
            body.append("        for _ in range(_nt):")
            self.trace(body, "            ", path + "<tagged fields>")
            body.append("            _g, pos = _duv(buf, pos)")
            body.append("            _sz, pos = _duv(buf, pos)")
            body.append("            if _g <= _last: raise _Bad('tags are not in ascending order')")
            body.append("            _last = _g")
            body.append("            _te = pos + _sz")
            body.append("            if _te > n: raise _Bad('tagged field runs past the end')")
            first = True
            for f in tagged:
                body.append(f"            {'if' if first else 'elif'} _g == {f.tag}:")
                first = False
                self.trace(body, "                ", path + f.attr)
                self.decode_value(body, "                ", f, f"o.{f.attr}", end="_te")
                body.append(
                    "                if pos != _te: raise _Bad('tagged field size mismatch')"
                )
            body.append("            pos = _te")
        body.append("    return o, pos")
        self.lines.append(f"def d_{name}(buf, pos, n):")
        self.lines.extend(body)
        self.lines.append("")

    def differs_from_default_struct(self, f: Field, value: str) -> str:
        """A condition true when struct `value` differs from a default-built one. Field by field
        when they are all scalars: a replica Fetch answer of 10,000 partitions asks this three
        times per partition, and the generic `Message.__eq__` would dominate its encoding."""
        struct_class = self.struct_class(f.element_type)
        default = struct_class()
        if any(sub.is_struct or sub.is_array for sub in struct_class.FIELDS):
            return f"{value} != {self.const(default)}"
        tests = [
            f"{value}.{sub.attr} != {self.const(getattr(default, sub.attr))}"
            for sub in struct_class.FIELDS
        ]
        return "(" + " or ".join(tests) + ")"

    def fresh_default(self, f: Field) -> str:
        if f.is_array:
            return "None" if f.has_default() and f.default is None else "[]"
        if f.is_struct:
            if f.has_default() and f.default is None:
                return "None"
            return f"{self.const(self.struct_class(f.element_type))}()"
        value = f.default_value()
        if isinstance(value, bool | int | float | str | bytes) or value is None:
            return repr(value)
        return self.const(value)

    def decode_length(self, out: list[str], ind: str, compact: bool, wide: bool) -> None:
        """Leave the length in _l (-1 for null) and advance pos."""
        if compact:
            out.append(f"{ind}_l = buf[pos]")
            out.append(f"{ind}if _l < 128: pos += 1")
            out.append(f"{ind}else: _l, pos = _duv(buf, pos)")
            out.append(f"{ind}_l -= 1")
        else:
            out.append(f"{ind}_l, = {'_ui' if wide else '_uh'}(buf, pos)")
            out.append(f"{ind}pos += {4 if wide else 2}")

    def decode_value(self, out: list[str], ind: str, f: Field, target: str, end: str = "n") -> None:
        compact = self.compact(f)
        if f.is_array:
            self.decode_length(out, ind, compact, True)
            out.append(f"{ind}if _l < 0:")
            if self.nullable(f):
                out.append(f"{ind}    if _l != -1: raise _Bad('negative array length %d' % _l)")
                out.append(f"{ind}    {target} = None")
            else:
                out.append(f"{ind}    raise _Bad('null or negative array length %d' % _l)")
            out.append(f"{ind}else:")
            ind2 = ind + "    "
            elem = f.element_type
            if elem in FIXED_TYPES:
                size = FIXED_SIZES[elem]
                code = FIXED_TYPES[elem]
                out.append(
                    f"{ind2}if pos + _l * {size} > {end}:"
                    " raise _Bad('array of %d runs past the end' % _l)"
                )
                out.append(f"{ind2}{target} = list(_unpack('>%d{code}' % _l, buf, pos))")
                out.append(f"{ind2}pos += _l * {size}")
            else:
                out.append(
                    f"{ind2}if _l > {end} - pos: raise _Bad('array of %d runs past the end' % _l)"
                )
                out.append(f"{ind2}{target} = _x = []")
                out.append(f"{ind2}_ap = _x.append")
                out.append(f"{ind2}for _ in range(_l):")
                if f.is_struct:
                    out.append(f"{ind2}    _e, pos = d_{elem}(buf, pos, n)")
                else:
                    self.decode_scalar(out, ind2 + "    ", elem, "_e", compact, False, end)
                out.append(f"{ind2}    _ap(_e)")
            return
        if f.is_struct:
            if self.nullable(f):
                out.append(f"{ind}if pos >= {end}: raise _Bad('struct marker past the end')")
                out.append(f"{ind}if buf[pos] >= 128:")
                out.append(f"{ind}    pos += 1")
                out.append(f"{ind}    {target} = None")
                out.append(f"{ind}else:")
                out.append(f"{ind}    pos += 1")
                out.append(f"{ind}    {target}, pos = d_{f.type}(buf, pos, n)")
                return
            out.append(f"{ind}{target}, pos = d_{f.type}(buf, pos, n)")
            return
        self.decode_scalar(out, ind, f.type, target, compact, self.nullable(f), end)

    def decode_scalar(
        self, out: list[str], ind: str, t: str, target: str, compact: bool, nullable: bool, end: str
    ) -> None:
        if t in FIXED_TYPES:
            fmt = struct.Struct(">" + FIXED_TYPES[t])
            out.append(f"{ind}{target}, = {self.const(fmt.unpack_from)}(buf, pos)")
            out.append(f"{ind}pos += {fmt.size}")
            return
        if t == "uuid":
            out.append(f"{ind}if pos + 16 > {end}: raise _Bad('uuid runs past the end')")
            out.append(f"{ind}{target} = _UUID(bytes=bytes(buf[pos:pos + 16]))")
            out.append(f"{ind}pos += 16")
            return
        self.decode_length(out, ind, compact, t != "string")
        out.append(f"{ind}if _l < 0:")
        if nullable:
            out.append(f"{ind}    if _l != -1: raise _Bad('negative length %d' % _l)")
            out.append(f"{ind}    {target} = None")
        else:
            out.append(
                f"{ind}    raise _Bad('null or negative length %d in a non-nullable field' % _l)"
            )
        out.append(f"{ind}else:")
        out.append(f"{ind}    _e2 = pos + _l")
        out.append(f"{ind}    if _e2 > {end}: raise _Bad('%d bytes run past the end' % _l)")
        if t == "string":
            out.append(f"{ind}    {target} = str(buf[pos:_e2], 'utf-8')")
        else:
            out.append(f"{ind}    {target} = bytes(buf[pos:_e2])")
        out.append(f"{ind}    pos = _e2")


_CACHE: dict[tuple[type, int, bool], _Compiled] = {}


def compile_version(cls: type[Message], version: int, traced: bool = False) -> _Compiled:
    """The compiled encode/decode pair of a message class at one version (cached)."""
    key = (cls, version, traced)
    compiled = _CACHE.get(key)
    if compiled is not None:
        return compiled
    schema = cls.SCHEMA
    if version not in schema.valid:
        raise UnsupportedVersionError(
            schema.api_key if schema.api_key is not None else -1,
            version,
            f"{schema.name} has no version {version} (valid {schema.valid})",
        )
    gen = _Gen(cls, version, traced)
    gen.generate()
    source = "\n".join(gen.lines)
    code = compile(source, f"<codec {schema.name} v{version}{' traced' if traced else ''}>", "exec")
    exec(code, gen.ns)
    compiled = _Compiled(gen.ns[f"e_{schema.name}"], gen.ns[f"d_{schema.name}"], gen.ns["_T"])
    _CACHE[key] = compiled
    return compiled


def generated_source(cls: type[Message], version: int) -> str:
    """The source compiled for (cls, version), for reading and debugging."""
    gen = _Gen(cls, version, traced=False)
    gen.generate()
    return "\n".join(gen.lines)


def encode_into(obj: Message, version: int, out: bytearray) -> None:
    """Append the encoding of `obj` at `version` to `out`."""
    cls = type(obj)
    compiled = compile_version(cls, version)
    mark = len(out)
    try:
        compiled.encode(obj, out)
    except Exception as exc:
        del out[mark:]
        raise _encode_error(obj, version, exc) from None


def _encode_error(obj: Message, version: int, exc: Exception) -> EncodeError:
    traced = compile_version(type(obj), version, traced=True)
    traced.trace[0] = ""
    reason = f"{type(exc).__name__}: {exc}"
    try:
        traced.encode(obj, bytearray())
    except _Absent:
        reason = f"version {version} has no such field, but it is set to a non-default value"
    except Exception as traced_exc:
        reason = f"{type(traced_exc).__name__}: {traced_exc}"
    return EncodeError(obj.SCHEMA.name, version, traced.trace[0] or None, reason)


def decode_from(
    cls: type[Message], buf: bytes | bytearray | memoryview, version: int, pos: int
) -> tuple[Any, int]:
    """Decode one message of `cls` at `version` starting at `pos`; returns (message, next pos)."""
    compiled = compile_version(cls, version)
    try:
        return compiled.decode(buf, pos, len(buf))
    except Exception:
        raise _decode_error(cls, buf, version, pos) from None


def _decode_error(
    cls: type[Message], buf: bytes | bytearray | memoryview, version: int, pos: int
) -> DecodeError:
    traced = compile_version(cls, version, traced=True)
    traced.trace[0] = ""
    reason = "decoding failed"
    try:
        traced.decode(buf, pos, len(buf))
    except _Bad as exc:
        reason = str(exc)
    except (IndexError, struct.error):
        reason = "the message is truncated"
    except UnicodeDecodeError as exc:
        reason = f"a string is not valid UTF-8 ({exc.reason})"
    except Exception as exc:
        reason = f"{type(exc).__name__}: {exc}"
    return DecodeError(cls.SCHEMA.name, version, traced.trace[0] or None, reason)
