"""Message schemas as data: the declarative form every API is written in.

Modelled on Kafka's `common/message/*.json`: a message has valid and flexible version ranges and a
list of fields; a field has a name (Kafka's CamelCase), a type, the versions it exists in, and
optionally the versions where it is nullable, a tag (tagged fields live in the tagged section of
their struct) and a default. Struct-typed fields carry their own field list. `codec` compiles a
schema once per version into encode and decode functions; `messages` turns each schema into a
Python class whose attributes are the snake_case field names.

Types: int8 int16 int32 int64 uint16 uint32 float64 bool uuid string bytes records, a struct
name (a capitalised word), or an array of any of these written `[]type`.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

FIXED_TYPES: dict[str, str] = {
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "uint16": "H",
    "uint32": "I",
    "float64": "d",
    "bool": "?",
}
FIXED_SIZES: dict[str, int] = {
    "int8": 1,
    "int16": 2,
    "int32": 4,
    "int64": 8,
    "uint16": 2,
    "uint32": 4,
    "float64": 8,
    "bool": 1,
}
INT_RANGES: dict[str, tuple[int, int]] = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
}
VARIABLE_TYPES = frozenset({"uuid", "string", "bytes", "records"})
ZERO_UUID = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True)
class Versions:
    """An inclusive version range; `high` None means open-ended ("3+"); empty when low > high."""

    low: int
    high: int | None

    @classmethod
    def parse(cls, text: str | Versions) -> Versions:
        if isinstance(text, Versions):
            return text
        text = text.strip()
        if text == "none":
            return NO_VERSIONS
        if text.endswith("+"):
            return cls(int(text[:-1]), None)
        if "-" in text:
            low, high = text.split("-")
            return cls(int(low), int(high))
        return cls(int(text), int(text))

    def __contains__(self, version: object) -> bool:
        return (
            isinstance(version, int)
            and version >= self.low
            and (self.high is None or version <= self.high)
        )

    def __iter__(self):  # type: ignore[no-untyped-def]
        if self.high is None:
            raise ValueError(f"open version range {self} cannot be iterated")
        return iter(range(self.low, self.high + 1))

    def __str__(self) -> str:
        if self.high is None:
            return f"{self.low}+"
        if self.low > self.high:
            return "none"
        return f"{self.low}-{self.high}" if self.low != self.high else str(self.low)


NO_VERSIONS = Versions(1, 0)

_MISSING: Any = object()


@dataclass(frozen=True)
class Field:
    """One field of a message or struct.

    `flexible="none"` keeps the classic (non-compact) encoding in flexible versions, as Kafka's
    RequestHeader does for ClientId.
    """

    name: str
    type: str
    versions: Versions
    fields: tuple[Field, ...] = ()
    nullable: Versions = NO_VERSIONS
    tagged: Versions = NO_VERSIONS
    tag: int | None = None
    default: Any = _MISSING
    ignorable: bool = False
    flexible: Versions | None = None  # None: follow the message
    about: str = ""

    @cached_property
    def attr(self) -> str:
        """The Python attribute name: Kafka's CamelCase in snake_case."""
        return snake_case(self.name)

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        """True for struct and array-of-struct fields."""
        return self.element_type[:1].isupper()

    def has_default(self) -> bool:
        return self.default is not _MISSING

    def default_value(self) -> Any:
        """The value a reader fills in when the field is absent (Kafka's rules)."""
        if self.default is not _MISSING:
            if self.type == "uuid" and isinstance(self.default, str):
                return ZERO_UUID
            return self.default
        if self.is_array:
            return []
        if self.type in FIXED_TYPES:
            return False if self.type == "bool" else (0.0 if self.type == "float64" else 0)
        if self.type == "string":
            return ""
        if self.type == "bytes":
            return b""
        if self.type == "records":
            return None
        if self.type == "uuid":
            return ZERO_UUID
        return None  # a struct: the codec builds a default instance


def F(  # noqa: N802 - reads like a declaration in the schema files
    name: str,
    type: str,
    versions: str = "0+",
    fields: list[Field] | tuple[Field, ...] = (),
    *,
    nullable: str = "none",
    tagged: str | None = None,
    tag: int | None = None,
    default: Any = _MISSING,
    ignorable: bool = False,
    flexible: str | None = None,
    about: str = "",
) -> Field:
    """Declare a field. A field with `tag` is tagged in `tagged` (default: all its versions)."""
    v = Versions.parse(versions)
    tagged_versions = NO_VERSIONS
    if tag is not None:
        tagged_versions = Versions.parse(tagged) if tagged is not None else v
    return Field(
        name=name,
        type=type,
        versions=v,
        fields=tuple(fields),
        nullable=Versions.parse(nullable),
        tagged=tagged_versions,
        tag=tag,
        default=default,
        ignorable=ignorable,
        flexible=Versions.parse(flexible) if flexible is not None else None,
        about=about,
    )


@dataclass(frozen=True)
class MessageSchema:
    """A request, a response, a header or a data record: its own name, versions and fields.

    Headers and data records (Kafka's `"type": "data"` schemas, e.g. the `__consumer_offsets`
    record keys and values) have no API key.
    """

    name: str
    kind: Literal["request", "response", "header", "data"]
    api_key: int | None
    valid: Versions
    flexible: Versions
    fields: tuple[Field, ...]
    struct_names: dict[str, tuple[Field, ...]] = field(default_factory=dict, compare=False)

    def is_flexible(self, version: int) -> bool:
        return version in self.flexible


def message(
    name: str,
    *,
    api_key: int | None,
    valid: str,
    flexible: str,
    fields: list[Field],
    kind: Literal["request", "response", "header", "data"] | None = None,
) -> MessageSchema:
    """Declare a message; checks the schema is consistent so mistakes fail at import.

    `kind` defaults from the name (`...Request` or else response); headers and data records
    pass it, with `api_key=None`.
    """
    if kind is None:
        kind = "request" if name.endswith("Request") else "response"
    if (api_key is None) != (kind in ("header", "data")):
        raise ValueError(f"{name}: requests and responses have an API key, headers and data none")
    schema = MessageSchema(
        name=name,
        kind=kind,
        api_key=api_key,
        valid=Versions.parse(valid),
        flexible=Versions.parse(flexible),
        fields=tuple(fields),
    )
    _check_fields(schema, schema.fields, name)
    return schema


def _check_fields(schema: MessageSchema, fields: tuple[Field, ...], where: str) -> None:
    tags: set[int] = set()
    names: set[str] = set()
    for f in fields:
        if f.name in names:
            raise ValueError(f"{where}: field {f.name} declared twice")
        names.add(f.name)
        base = f.element_type
        if f.is_struct:
            if not f.fields:
                # a reference to a struct declared elsewhere in this message
                if base not in schema.struct_names:
                    raise ValueError(f"{where}.{f.name}: struct {base} has no fields")
            else:
                known = schema.struct_names.get(base)
                if known is not None and known != f.fields:
                    raise ValueError(f"{where}.{f.name}: struct {base} declared twice, differently")
                schema.struct_names[base] = f.fields
                _check_fields(schema, f.fields, f"{where}.{f.name}")
        elif base not in FIXED_TYPES and base not in VARIABLE_TYPES:
            raise ValueError(f"{where}.{f.name}: unknown type {f.type}")
        if f.tag is not None:
            if f.tag in tags:
                raise ValueError(f"{where}.{f.name}: tag {f.tag} used twice")
            tags.add(f.tag)


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def snake_case(name: str) -> str:
    return _CAMEL.sub("_", name).lower()
