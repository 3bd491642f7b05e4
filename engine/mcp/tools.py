"""MCP tool functions made from the request models: each field with an `mcp` name becomes a tool
parameter with the model's own type, bounds and description, so the tool schema a client sees is
the request every door builds (`engine/requests.py`), and a new option reaches MCP by itself.

The MCP SDK reads a tool's parameters from its signature; names that are Python keywords (`from`)
get a trailing underscore and the wire name as their alias, which the SDK passes them under.
"""

from __future__ import annotations

import inspect
import keyword
import typing
from typing import Annotated, Any, Awaitable, Callable, Literal

from pydantic import BaseModel, Field

__all__ = ["tool_function", "MODE_CHOICES"]

MODE_CHOICES = ("auto", "hybrid", "keyword", "vector")  # what the schema offers; the model also reads aliases


def _wire_type(name: str, annotation: Any) -> Any:
    """The parameter's type as the schema shows it: numbers and flags as they are, everything else
    text (a time bound is a string on the wire), the search mode as its choices."""
    if name == "mode":
        return Literal[MODE_CHOICES] | None  # type: ignore[valid-type]
    kinds = set(typing.get_args(annotation)) or {annotation}
    for kind in (bool, int, float):
        if kind in kinds:
            return kind if type(None) not in kinds else kind | None
    return str if annotation is str else str | None


def tool_function(model: type[BaseModel], call: Callable[..., Awaitable[Any]], *, name: str, returns: Any,
                  required: tuple[str, ...] = ()) -> Callable[..., Awaitable[Any]]:
    """An async function whose signature is `model`'s MCP fields, calling `call(**fields)` with
    the model's own field names (values left out are not passed: the model's defaults apply)."""
    params: list[inspect.Parameter] = []
    field_of: dict[str, str] = {}
    for field, info in model.model_fields.items():
        wire = (info.json_schema_extra or {}).get("mcp")
        if not wire:
            continue
        python = f"{wire}_" if keyword.iskeyword(wire) else wire
        field_of[python] = field_of[wire] = field
        extra = {"alias": wire} if python != wire else {}
        annotation = Annotated[_wire_type(field, info.annotation), *info.metadata,  # type: ignore[misc]
                               Field(description=info.description, **extra)]
        default = inspect.Parameter.empty if field in required else (None if info.default is not False else False)
        params.append(inspect.Parameter(python, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation))

    async def tool(**wire_args: Any) -> Any:
        return await call(**{field_of[k]: v for k, v in wire_args.items() if v is not None and k in field_of})

    tool.__name__ = tool.__qualname__ = name
    tool.__signature__ = inspect.Signature(params, return_annotation=returns)  # type: ignore[attr-defined]
    tool.__annotations__ = {p.name: p.annotation for p in params} | {"return": returns}
    return tool
