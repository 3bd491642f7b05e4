"""Reference pages made from the code: every config key from the config's pydantic models (made
from its records: engine/records/schema.py), every MCP tool from its schema. Used by the docs build
(contrib/docs/hooks.py) and by tests/test_docs.py.

    python contrib/docs/reference.py config    # print the configuration reference (Markdown)
    python contrib/docs/reference.py mcp       # print the MCP tools reference
"""

from __future__ import annotations

import json
import sys
import types
import typing
from typing import Any, Iterator

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

__all__ = ["config_keys", "config_reference", "exit_codes_reference", "mcp_reference"]

# Where each top-level model sits in the file, and why it is a section of its own.
_SECTIONS: list[tuple[str, str, str]] = [
    ("", "MemsiftConfig", "The file's top level."),
    ("agents", "AgentsConfig", "Agents: the defaults every agent starts from, and agents by id."),
    (
        "agents.defaults",
        "AgentDefaults",
        "Settings for every agent (other keys of the reference's agent entries are ignored).",
    ),
    ("agents.list[]", "AgentEntry", "One agent; its `memorySearch` is merged over the defaults'."),
    (
        "agents.defaults.memorySearch",
        "MemorySearchConfig",
        "Memory search for an agent; the same keys under `agents.list[].memorySearch` override them per agent.",
    ),
    (
        "memory",
        "MemoryConfig",
        "What applies to every agent: the backend, citations, QMD, Postgres, the resident helper.",
    ),
]


def _camel(name: str) -> str:
    name = name.rstrip("_")
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def _key(name: str, info: FieldInfo) -> str:
    return info.alias or _camel(name)


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model a field holds (directly, optionally, or as list items)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_of(arg)
        if found is not None:
            return found
    return None


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " \\| ".join(json.dumps(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        parts = [_type_name(a) for a in args if a is not type(None)]
        return " \\| ".join(parts) + (" \\| null" if type(None) in args else "")
    if origin in (list, tuple):
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        return "object (string → string)" if args else "object"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "section"
    names = {bool: "boolean", int: "integer", float: "number", str: "string"}
    if annotation in names:
        return names[annotation]
    return getattr(annotation, "__name__", str(annotation)).replace("SecretStr", "secret string")


def _bounds(info: FieldInfo) -> str:
    out = []
    for meta in info.metadata:
        for attr, word in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
            value = getattr(meta, attr, None)
            if value is not None:
                out.append(f"{word} {value:g}")
        pattern = getattr(meta, "pattern", None)
        if pattern:
            out.append(f"matches `{pattern}`")
        min_length = getattr(meta, "min_length", None)
        if min_length:
            out.append(f"at least {min_length} character")
    return ", ".join(out)


def _default(info: FieldInfo) -> str:
    if info.default_factory is not None:
        value = info.default_factory()
        if isinstance(value, BaseModel):
            return "(section)"
        return f"`{json.dumps(value)}`"
    if info.default is PydanticUndefined:
        return "required"
    if info.default is None:
        return "unset"
    return f"`{json.dumps(info.default)}`"


def config_keys(model: type[BaseModel], prefix: str = "", stop: frozenset[str] = frozenset()
                ) -> Iterator[tuple[str, FieldInfo, type[BaseModel]]]:
    """Every key under `model` as (dotted path, field, owning model), depth first; a key in `stop`
    is given but not descended into."""
    for name, info in model.model_fields.items():
        path = f"{prefix}.{_key(name, info)}" if prefix else _key(name, info)
        yield path, info, model
        sub = _model_of(info.annotation)
        if sub is not None and path not in stop:
            list_like = typing.get_origin(info.annotation) is list or any(
                typing.get_origin(a) is list for a in typing.get_args(info.annotation))
            yield from config_keys(sub, path + ("[]" if list_like else ""), stop)


def config_reference() -> str:
    """The configuration reference: one table per section, every key with its type, default,
    allowed values and description, in file order."""
    from memsift.engine.config import models  # noqa: PLC0415
    from memsift.engine.records.schema import model_of  # noqa: PLC0415

    own = frozenset(p for p, *_ in _SECTIONS if p) | {"agents.list", "agents.list[].memorySearch"}
    lines: list[str] = []
    for prefix, model_name, about in _SECTIONS:
        title = f"`{prefix}`" if prefix else "Top level"
        lines += [f"## {title}", "", about, "", "| key | type | default | description |", "| --- | --- | --- | --- |"]
        for path, info, _owner in config_keys(model_of(getattr(models, model_name)), prefix, own):
            shown = path[len(prefix) + 1:] if prefix else path
            bounds = _bounds(info)
            kind = _type_name(info.annotation) + (f" ({bounds})" if bounds else "")
            about_key = info.description
            if path in own or path == "agents.list":
                section = "agents.defaults.memorySearch" if path.endswith("memorySearch") else path
                section = "agents.list[]" if path == "agents.list" else section
                about_key += f" Keys: see [`{section}`](#{_anchor(section)})."
            lines.append(f"| `{shown}` | {kind} | {_default(info)} | {about_key} |")
        lines.append("")
    return "\n".join(lines)


def _anchor(section: str) -> str:
    """The id Python-Markdown's toc gives a section's heading (`agents.list[]` → `agentslist`)."""
    return "".join(ch for ch in section.lower() if ch.isalnum() or ch in "-_").replace("_", "_") or "top-level"


def exit_codes_reference() -> str:
    """The CLI's exit codes and what each tells a script."""
    from memsift.engine.cli.output import EXIT_CODES, EXIT_MEANINGS  # noqa: PLC0415

    lines = ["| code | meaning |", "| --- | --- |"]
    lines += [f"| `{code}` | {EXIT_MEANINGS[code]} |" for code in sorted(EXIT_CODES.values())]
    return "\n".join(lines) + "\n"


def mcp_reference() -> str:
    """The MCP tools as a client sees them: name, title, description, arguments and annotations."""
    import anyio  # noqa: PLC0415

    from memsift.engine.mcp.server import INSTRUCTIONS, build_server  # noqa: PLC0415

    server = build_server(None)  # the tools' closures call the memory server only when a tool runs
    tools = anyio.run(server.list_tools)
    lines = ["## Server instructions", "", "The instructions an MCP client receives on `initialize`:", "",
             *[f"> {line}" if line else ">" for line in INSTRUCTIONS.strip().splitlines()], ""]
    for tool in tools:
        schema = tool.input_schema
        required = set(schema.get("required", []))
        ann = tool.annotations
        hints = (
            ", ".join(
                f"`{k}: {str(v).lower()}`"
                for k, v in ann.model_dump(exclude_none=True, by_alias=True).items()
                if k.endswith("Hint")
            )
            if ann
            else ""
        )
        lines += [f"## `{tool.name}`", "", f"**{tool.title}.** {tool.description}", "", f"Annotations: {hints}.", "",
                  "| argument | type | required | description |", "| --- | --- | --- | --- |"]
        for name, prop in schema.get("properties", {}).items():
            kinds = [p.get("type") for p in prop.get("anyOf", [prop]) if p.get("type") and p.get("type") != "null"]
            lines.append(f"| `{name}` | {' or '.join(kinds) or 'any'} | {'yes' if name in required else 'no'} | "
                         f"{prop.get('description', '')} |")
        output = tool.output_schema or {}
        fields = list(output.get("properties", {}))
        if fields:
            lines += ["", "Structured output fields: " + ", ".join(f"`{f}`" for f in fields) + "."]
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "config"
    print({"config": config_reference, "mcp": mcp_reference, "exit-codes": exit_codes_reference}[which]())
