"""MCP tool functions made from the request models: each field with an `mcp` name becomes a tool
parameter with the model's own type, bounds and description, so the tool schema a client sees is
the request every door builds (`engine/requests.py`), and a new option reaches MCP by itself.

The MCP SDK reads a tool's parameters from its signature; names that are Python keywords (`from`)
get a trailing underscore and the wire name as their alias, which the SDK passes them under.
"""

from __future__ import annotations

import inspect
import keyword
from typing import Annotated, Any, Awaitable, Callable

from pydantic import Field

from ..records import Record
from ..requests import spellings

__all__ = ["tool_function"]


_WIRE_TYPES = {"bool": bool, "int": int, "float": float}


def _wire_type(info: Any) -> Any:
    """The parameter's type as the schema shows it: numbers and flags as they are, everything else
    text (a time bound is a string on the wire: it also takes dates and timestamps in Python). The
    search mode is text too: the model reads the same spellings on every door (`fts` is `keyword`),
    and its description lists them. Optional where the field's default is None."""
    kind = _WIRE_TYPES.get(info.extra.get("kind"), str)
    return kind | None if info.default is None else kind


def _described(info: Any) -> str:
    """The field's description, with its bounds in words (`1 to 100`)."""
    low, high = info.extra.get("ge"), info.extra.get("le")
    if low is not None and high is not None:
        return f"{info.description} From {low:g} to {high:g}."
    if low is not None:
        return f"{info.description} At least {low:g}."
    return info.description or ""


def tool_function(model: type[Record], call: Callable[..., Awaitable[Any]], *, name: str, returns: Any,
                  required: tuple[str, ...] = ()) -> Callable[..., Awaitable[Any]]:
    """An async function whose signature is `model`'s MCP fields, calling `call(**fields)` with
    the model's own field names (values left out are not passed: the model's defaults apply)."""
    params: list[inspect.Parameter] = []
    field_of: dict[str, str] = {}
    for field, info in model.model_fields.items():
        wire = spellings(model, field).get("mcp")
        if not isinstance(wire, str) or not wire:
            continue
        python = f"{wire}_" if keyword.iskeyword(wire) else wire
        field_of[python] = field_of[wire] = field
        extra: dict[str, Any] = {"alias": wire} if python != wire else {}
        # Types and descriptions only: the bounds are the model's to judge, after the scope rules
        # (a denied chat gets its denial whatever its other values, as on every door).
        annotation = Annotated[_wire_type(info), Field(description=_described(info), **extra)]  # type: ignore[valid-type]
        default = inspect.Parameter.empty if field in required else (None if info.default is not False else False)
        params.append(inspect.Parameter(python, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation))

    async def tool(**wire_args: Any) -> Any:
        return await call(**{field_of[k]: v for k, v in wire_args.items() if v is not None and k in field_of})

    tool.__name__ = tool.__qualname__ = name
    tool.__signature__ = inspect.Signature(params, return_annotation=returns)  # type: ignore[attr-defined]
    tool.__annotations__ = {p.name: p.annotation for p in params} | {"return": returns}
    return tool
