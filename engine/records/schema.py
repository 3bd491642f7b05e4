"""pydantic models made from records, where pydantic does its work: validating what arrives from
outside (a config file, the environment, a plugin's block: `engine/config/load.py`) and describing
an answer's shape (MCP's output schemas).

A record (`engine/records/__init__.py`) is the one definition of its fields: types, defaults, JSON names,
descriptions, and in its `spec(...)` the bounds (`ge`, `le`, `pattern`, `key_pattern` for a dict's
keys) and the checks run before or after pydantic's own (`before=`, `after=`: plain functions that
raise ValueError). From it this module makes the pydantic model on first use (`model_of`), and
turns a validated model back into the record (`to_record`), with the keys a file set
(`model_fields_set`) and a section's plugin blocks (`model_extra`). So a cold command, which reads
settings already validated (`engine/config/snapshot.py`), never imports pydantic.

How a record's class says what its section accepts: `__extra__` is "forbid" (an unknown key is an
error), "ignore" (the reference's own keys memsift does not read), "allow" (kept in `model_extra`)
or "blocks" (kept, each a plugin's block: an object under the plugin's name, never a near miss of
one of the section's own keys).
"""

from __future__ import annotations

import functools
import operator
import types
import typing
from typing import Annotated, Any, Literal, Union

from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, SecretStr, create_model,
                      model_validator)
from pydantic_core import PydanticCustomError

from . import Record, to_camel

__all__ = ["model_of", "pydantic_type", "to_record", "validate"]

_MODELS: dict[type, type[BaseModel]] = {}
_RECORDS: dict[type, type[Record]] = {}  # each made model's record


def _unwrap_secret(value: Any) -> Any:
    """A record's `Secret` (a section dumped and validated again: agents' layers) is its text."""
    get = getattr(value, "get_secret_value", None)
    return get() if get is not None and not isinstance(value, SecretStr) else value


def _holds_secret(annotation: Any) -> bool:
    from ..secrets import Secret  # noqa: PLC0415

    return annotation is Secret or any(_holds_secret(a) for a in typing.get_args(annotation))


def pydantic_type(annotation: Any) -> Any:
    """`annotation` with every record replaced by its model and `Secret` by pydantic's `SecretStr`."""
    from ..secrets import Secret  # noqa: PLC0415

    if annotation is Secret:
        return SecretStr
    if isinstance(annotation, type) and issubclass(annotation, Record):
        return model_of(annotation)
    origin = typing.get_origin(annotation)
    if origin is None or origin is Literal:
        return annotation
    args = typing.get_args(annotation)
    if origin is Annotated:
        return Annotated[(pydantic_type(args[0]), *annotation.__metadata__)]  # type: ignore[misc]
    if origin in (Union, types.UnionType):
        return functools.reduce(operator.or_, [pydantic_type(a) for a in args])
    return origin[tuple(pydantic_type(a) for a in args)]


def model_of(record: type[Record]) -> type[BaseModel]:
    """The pydantic model of `record` (made once)."""
    made = _MODELS.get(record)
    if made is not None:
        return made
    base = _base_for(getattr(record, "__extra__", "forbid"))
    fields: dict[str, Any] = {}
    for field in record.record_fields(resolved=True):
        kind = pydantic_type(field.annotation)
        extra = field.extra
        if extra.get("key_pattern"):  # dict[str, X] whose keys must match
            value_kind = typing.get_args(kind)[1]
            kind = dict[Annotated[str, Field(pattern=extra["key_pattern"])], value_kind]  # type: ignore[misc,valid-type]
        if extra.get("after"):
            kind = Annotated[kind, AfterValidator(extra["after"])]
        if extra.get("before"):
            kind = Annotated[kind, BeforeValidator(extra["before"])]
        if _holds_secret(field.annotation):  # a section dumped and validated again (agents' layers)
            kind = Annotated[kind, BeforeValidator(_unwrap_secret)]
        info: dict[str, Any] = {"description": field.description}
        for bound in ("ge", "gt", "le", "lt", "pattern", "min_length"):
            if extra.get(bound) is not None:
                info[bound] = extra[bound]
        if field.alias != to_camel(field.name):
            info["alias"] = field.alias
        if field.factory is not None:
            info["default_factory"] = _model_factory(field.factory)
        elif not field.required:
            info["default"] = _model_value(field.default)
        fields[field.name] = (kind, Field(**info))
    made = create_model(record.__name__, __base__=base, __module__=record.__module__, __doc__=record.__doc__,
                        **fields)  # type: ignore[call-overload]
    _MODELS[record] = made
    _RECORDS[made] = record
    return made


class _WithPluginBlocks(BaseModel):
    """A section whose unknown keys are plugins' blocks: each an object, none a near miss of ours."""

    model_config = ConfigDict(extra="allow", alias_generator=to_camel, populate_by_name=True, from_attributes=True)

    @model_validator(mode="after")
    def _plugin_blocks(self):  # noqa: ANN202
        import difflib  # noqa: PLC0415

        ours = sorted(f.alias or n for n, f in type(self).model_fields.items())
        for key, value in (self.model_extra or {}).items():
            hint = difflib.get_close_matches(key, ours, n=1, cutoff=0.8)
            if hint or not isinstance(value, dict):
                did = f" (did you mean {hint[0]!r}?)" if hint else ""
                raise PydanticCustomError(
                    "plugin_block",
                    "unknown key{did}; allowed keys here: {ours}, or a plugin's settings (an object) under its name",
                    {"key": key, "did": did, "ours": ", ".join(ours)},
                )
        return self


@functools.cache
def _base_for(extra: str) -> type[BaseModel]:
    if extra == "blocks":
        return _WithPluginBlocks
    return type(f"_{extra.title()}", (BaseModel,), {
        "model_config": ConfigDict(extra=extra, alias_generator=to_camel, populate_by_name=True,  # type: ignore[typeddict-item]
                                   from_attributes=True),
        "__module__": __name__,
    })


def _model_value(value: Any) -> Any:
    """A record's default as its model holds it (a record default becomes the model's)."""
    if isinstance(value, Record):
        return model_of(type(value)).model_validate(value.model_dump(by_alias=False))
    return value


def _model_factory(factory: Any) -> Any:
    if isinstance(factory, type) and issubclass(factory, Record):
        return model_of(factory)
    return lambda: _model_value(factory())


def to_record(value: Any) -> Any:
    """A validated model (and what it holds) as records: each with the keys that were set and,
    where its section keeps them, its plugin blocks."""
    if isinstance(value, BaseModel):
        record = _RECORDS.get(type(value))
        if record is None:
            return value  # a plugin's own model (its block, validated by the plugin): kept as it is
        values = {name: to_record(getattr(value, name)) for name in type(value).model_fields}
        out = record(**values)
        out.__dict__["model_fields_set"] = frozenset(value.model_fields_set)
        if value.model_extra is not None:
            out.__dict__["model_extra"] = dict(value.model_extra)
        return out
    if isinstance(value, SecretStr):
        from ..secrets import Secret  # noqa: PLC0415

        return Secret(value.get_secret_value())
    if isinstance(value, list):
        return [to_record(v) for v in value]
    if isinstance(value, tuple):
        return tuple(to_record(v) for v in value)
    if isinstance(value, dict):
        return {k: to_record(v) for k, v in value.items()}
    return value


def validate(record: type[Record], data: Any) -> Any:
    """`data` (a file's keys, camelCase or not) as a `record`: pydantic's ValidationError if it is not one."""
    return to_record(model_of(record).model_validate(data))
