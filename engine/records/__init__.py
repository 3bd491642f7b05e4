"""Records: the plain classes memsift's answers, requests and settings are made of, with the JSON
form the doors print (camelCase keys).

Not pydantic, and not `dataclasses` either: a cold `memsift search` is a new process each time, and
importing pydantic and building its models cost it ~90 ms, more than the search; `dataclasses`
writes each class's methods with `exec` (~0.5 ms a class here, for ~70 classes). A record class
declares its fields as a dataclass does (annotations, defaults, `spec(...)`); the fields are read
once when the class is made, and one `__init__` shared by all fills an instance. Type checkers see
a dataclass (`dataclass_transform`), so constructors are checked as before.

Values are trusted here: what arrives from outside is validated where it arrives (config files by
pydantic in `engine/config/load.py`, requests in `engine/requests.py`, MCP arguments by the SDK).
A record checks its own values only where its class defines `_check()`.

`model_dump`, `model_copy` and `model_fields` keep the names the Python API has always had (these
were pydantic models until 0.3), so a gateway's `answer.model_dump(by_alias=True)` works as it did.
"""

from __future__ import annotations

import sys
from typing import Any, ClassVar, dataclass_transform

__all__ = ["Record", "FieldSpec", "spec", "to_camel"]

_MISSING: Any = object()
_INF = float("inf")


def to_camel(name: str) -> str:
    """`start_line` → `startLine` (pydantic's `to_camel`, which the JSON keys were made with)."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


class FieldSpec:
    """One field of a record: its name, default (or factory), JSON name and what the doors say of it."""

    __slots__ = ("name", "default", "factory", "alias", "exclude", "description", "extra", "annotation")

    def __init__(self, default: Any = _MISSING, *, factory: Any = None, json: str | None = None,
                 exclude: bool = False, description: str | None = None, **extra: Any) -> None:
        self.name = ""
        self.alias: str = json or ""  # set to the camelCase name when the class is made, unless given
        self.default, self.factory = default, factory
        self.exclude, self.description, self.extra = exclude, description, extra
        self.annotation: Any = None  # the type, once `Record.record_fields(resolved=True)` has read it

    @property
    def required(self) -> bool:
        return self.default is _MISSING and self.factory is None

    def value_for(self, record: type) -> Any:
        if self.factory is not None:
            return self.factory()
        if self.default is _MISSING:
            raise TypeError(f"{record.__name__}() missing the argument {self.name!r}")
        return self.default

    def __repr__(self) -> str:
        return f"FieldSpec({self.name!r})"


def spec(default: Any = _MISSING, *, factory: Any = None, json: str | None = None, exclude: bool = False,
         description: str | None = None, **extra: Any) -> Any:
    """A field's default (`default=`: type checkers read it only as a keyword) with more said of it:
    `factory` (a new list, dict or record each time), `json` (its JSON key, else camelCase; the
    constructor takes both), `exclude` (never in a dump: values only the stages use),
    `description`, and anything a door reads (`cli`, `mcp`, `ge`, `le`, …)."""
    return FieldSpec(default, factory=factory, json=json, exclude=exclude, description=description, **extra)


def _frozen(record: object) -> AttributeError:
    return AttributeError(f"{type(record).__name__} is frozen: make a changed copy with model_copy(update=...)")


@dataclass_transform(kw_only_default=True, field_specifiers=(spec,))
class Record:
    """The base of every record class (see the module's text). `frozen=True` in the class statement
    makes its instances immutable (and hashable)."""

    __record_fields__: ClassVar[tuple[FieldSpec, ...]] = ()
    __record_frozen__: ClassVar[bool] = False
    __record_by_key__: ClassVar[dict[str, FieldSpec]] = {}
    __record_resolved__: ClassVar[bool] = False
    model_fields: ClassVar[dict[str, FieldSpec]] = {}  # by name, as pydantic's
    model_extra: ClassVar[dict[str, Any] | None] = None  # a config section's plugin blocks (records/schema.py)

    def __init_subclass__(cls, *, frozen: bool | None = None, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        fields = {f.name: f for f in cls.__record_fields__}  # inherited first, in their order
        for name in cls.__dict__.get("__annotations__", {}):
            if name.startswith("_") or _is_classvar(cls.__dict__["__annotations__"][name]):
                continue
            value = cls.__dict__.get(name, _MISSING)
            if isinstance(value, (list, dict, set)):  # a fresh copy for each instance, never one shared
                value = FieldSpec(factory=lambda default=value: default.copy())
            field = value if isinstance(value, FieldSpec) else FieldSpec(value)
            field.name = name
            if not field.alias:
                field.alias = to_camel(name)
            if isinstance(value, FieldSpec) or value is _MISSING:
                if name in cls.__dict__:
                    delattr(cls, name)  # the instance's own value is read, never a spec on the class
            fields.pop(name, None)
            fields[name] = field
        cls.__record_fields__ = tuple(fields.values())
        cls.__record_by_key__ = {**{f.alias: f for f in fields.values() if f.alias}, **fields}
        cls.model_fields = dict(fields)
        cls.__record_resolved__ = False
        if frozen is not None:
            cls.__record_frozen__ = frozen

    def __init__(self, **values: Any) -> None:
        cls = type(self)
        own = self.__dict__
        by_key = cls.__record_by_key__
        own["model_fields_set"] = frozenset(by_key[k].name for k in values if k in by_key)
        for field in cls.__record_fields__:
            name = field.name
            if name in values:
                own[name] = values.pop(name)
            elif field.alias in values:
                own[name] = values.pop(field.alias)  # JSON's name works too: `Fallback(**{"from": ...})`
            else:
                own[name] = field.value_for(cls)
        if values:
            unknown = ", ".join(sorted(values))
            raise TypeError(f"{cls.__name__}() got unexpected arguments: {unknown}")
        check = getattr(self, "_check", None)
        if check is not None:
            check()

    # --- what a dataclass would have written ----------------------------------------------------

    def __setattr__(self, name: str, value: Any) -> None:
        if self.__record_frozen__:
            raise _frozen(self)
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        if self.__record_frozen__:
            raise _frozen(self)
        object.__delattr__(self, name)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(self.__dict__[f.name] == other.__dict__[f.name] for f in self.__record_fields__)

    def __hash__(self) -> int:
        if not self.__record_frozen__:
            raise TypeError(f"unhashable type: {type(self).__name__!r}")
        return hash((type(self), *(_hashable(self.__dict__[f.name]) for f in self.__record_fields__)))

    def __repr__(self) -> str:
        shown = ", ".join(f"{f.name}={self.__dict__[f.name]!r}" for f in self.__record_fields__)
        return f"{type(self).__name__}({shown})"

    def __reduce__(self) -> Any:  # pickling (a resident server's answers, multiprocessing)
        return (_rebuild, (type(self), {f.name: self.__dict__[f.name] for f in self.__record_fields__}))

    # --- the Python API's names -----------------------------------------------------------------

    @classmethod
    def record_fields(cls, *, resolved: bool = False) -> tuple[FieldSpec, ...]:
        """The fields in order; `resolved`: each with its `annotation` read (a door building its
        options or schema from them; the annotations are strings until then)."""
        if resolved and not cls.__record_resolved__:
            for field in cls.__record_fields__:
                field.annotation = _annotation(cls, field.name)
            cls.__record_resolved__ = True
        return cls.__record_fields__

    def model_dump(self, *, by_alias: bool = False, mode: str = "python", exclude_none: bool = False,
                   exclude_unset: bool = False, exclude: set[str] | frozenset[str] | None = None) -> dict[str, Any]:
        """The record as a dict: nested records too; `mode="json"`: only JSON's types (a path as
        text, a date in ISO form, a secret masked); `by_alias`: the JSON names; `exclude_unset`:
        only the keys that were given (a config file's, for merging layers)."""
        return _dump(self, _Dump(by_alias, mode == "json", exclude_none, exclude_unset), exclude or ())

    def model_dump_json(self, *, by_alias: bool = False, exclude_none: bool = False) -> str:
        import json  # noqa: PLC0415

        return json.dumps(self.model_dump(by_alias=by_alias, mode="json", exclude_none=exclude_none),
                          ensure_ascii=False, separators=(",", ":"))

    def to_json_dict(self) -> dict[str, Any]:
        """As the doors print it: JSON names, no nulls, text that UTF-8 can hold."""
        return _utf8_safe(self.model_dump(by_alias=True, mode="json", exclude_none=True))

    def model_copy(self, *, update: dict[str, Any] | None = None) -> Any:
        """A copy, with the fields in `update` changed (a shallow copy, as pydantic's)."""
        own = self.__dict__
        values = {f.name: own[f.name] for f in self.__record_fields__}
        values.update(update or {})
        copy = type(self)(**values)
        copy.__dict__["model_fields_set"] = own["model_fields_set"] | set(update or ())
        if own.get("model_extra") is not None:
            copy.__dict__["model_extra"] = own["model_extra"]
        return copy


def _annotation(cls: type, name: str) -> Any:
    """The type of field `name`, read in the module of the class that declared it (the
    annotations are text until asked for: `from __future__ import annotations`)."""
    for klass in cls.__mro__:
        declared = klass.__dict__.get("__annotations__", {})
        if name in declared:
            text = declared[name]
            return eval(text, vars(sys.modules[klass.__module__])) if isinstance(text, str) else text  # noqa: S307
    return Any


def _is_classvar(annotation: Any) -> bool:
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    return text.startswith(("ClassVar", "typing.ClassVar"))


def _rebuild(cls: type[Record], values: dict[str, Any]) -> Record:
    return cls(**values)


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    return value


class _Dump:
    __slots__ = ("by_alias", "as_json", "exclude_none", "exclude_unset")

    def __init__(self, by_alias: bool, as_json: bool, exclude_none: bool, exclude_unset: bool) -> None:
        self.by_alias, self.as_json = by_alias, as_json
        self.exclude_none, self.exclude_unset = exclude_none, exclude_unset


def _dump(record: Record, how: _Dump, exclude: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    values = record.__dict__
    given = values["model_fields_set"] if how.exclude_unset else None
    for field in record.__record_fields__:
        if field.exclude or field.name in exclude or (given is not None and field.name not in given):
            continue
        value = values[field.name]
        if value is None and how.exclude_none:
            continue
        out[field.alias if how.by_alias else field.name] = _value(value, how)
    extra = values.get("model_extra")
    if extra:  # a section's plugin blocks, as the file wrote them
        out.update({k: _value(v, how) for k, v in extra.items() if not (v is None and how.exclude_none)})
    return out


def _value(value: Any, how: _Dump) -> Any:
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if how.as_json and (value != value or value in (_INF, -_INF)):
            return None  # JSON has no NaN nor infinity: null, as pydantic wrote them
        return value
    if isinstance(value, Record):
        return _dump(value, how, ())
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_value(v, how) for v in value]
        return items if how.as_json or isinstance(value, list) else type(value)(items)
    if isinstance(value, dict):
        return {(str(k) if how.as_json else k): _value(v, how) for k, v in value.items()}
    if not how.as_json:
        return value
    return _json_value(value)


def _json_value(value: Any) -> Any:
    """A value of another type as JSON holds it: a path as text, a date in ISO form, a secret
    masked, a numpy number as a number."""
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if hasattr(value, "get_secret_value"):
        return "**********" if value.get_secret_value() else ""
    if hasattr(value, "item") and type(value).__module__ == "numpy":
        return value.item()
    return str(value)  # a Path


def _utf8_safe(value: Any) -> Any:
    """Lone surrogates (a query arriving as JSON `"\\ud800"`, or non-UTF-8 argv) become U+FFFD,
    so every answer can be written as UTF-8 (stdout, MCP's JSON-RPC)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    if isinstance(value, dict):
        return {k: _utf8_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_utf8_safe(v) for v in value]
    return value
