"""One agent's settings from a config that may be memsift's own, OpenClaw's of early 2026, or
OpenClaw 2026.9's, and where each setting came from.

Which agent (without `-a`): `agents.defaults.systemAgent.agentId`, else the agent marked
`default: true`, else the only agent configured, else the first of `agents.list`, else "main"
(several `agents.entries` and none of these: an error that names them).

Its memory search settings, lowest first; a later layer wins key by key, `extraPaths` and QMD's
`extraCollections` add up (defaults' first):

    memorySearch                          (top level, the oldest place)
    agents.defaults.memorySearch          (early 2026)
    memory.search                         (OpenClaw 2026.9)
    agents.list[i].memorySearch           (early 2026, per agent)
    agents.entries.<id>.memorySearch      (per agent, before `openclaw doctor --fix` moves it)
    agents.entries.<id>.memory.search     (OpenClaw 2026.9, per agent)

An agent's own setting beats every default, and at the same level OpenClaw 2026.9's key beats the
older one (as `openclaw doctor --fix` keeps "existing values at the current config paths").

Its workspace: `agents.entries.<id>.workspace`, else `agents.list[i].workspace`, else
`agents.defaults.workspace` (in an `agents.entries` roster of several agents, an agent that is not
the default gets `<that folder>/<id>`, as OpenClaw 2026.9 gives it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from .models import AgentEntry, KeyedAgentEntry, MemsiftConfig, MemorySearchConfig

__all__ = [
    "ChosenAgent",
    "choose_agent",
    "search_layers",
    "merge_layers",
    "agent_workspaces",
    "dotted",
    "DEFAULT_AGENT_ID",
]

DEFAULT_AGENT_ID = "main"
_AGENT_ID_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
_ADDED_UP = (("extraPaths",), ("qmd", "extraCollections"))


@dataclass(frozen=True)
class ChosenAgent:
    id: str
    listed: tuple[int, AgentEntry] | None = None  # agents.list[i]
    keyed: tuple[str, KeyedAgentEntry] | None = None  # agents.entries.<key>
    is_default: bool = True  # the agent used without -a (OpenClaw gives it the defaults' workspace itself)


def _checked_id(raw: str, shown: str) -> str:
    wanted = raw.strip().lower()
    if not _AGENT_ID_RE.match(wanted):
        # It names files (the index, the QMD home): never a path.
        raise ConfigError(f"agent id {shown!r} is not valid: use letters, digits, '_', '.' and '-', starting with a "
                          "letter or digit", key_path="agents.list")
    return wanted


def _default_id(config: MemsiftConfig) -> str:
    agents = config.agents
    system = agents.defaults.system_agent.agent_id if agents.defaults.system_agent else None
    if system and system.strip():
        return _checked_id(system, system)
    marked = [k for k, e in agents.entries.items() if e.default] + [a.id for a in agents.list_ if a.default]
    if marked:
        return _checked_id(marked[0], marked[0])
    ids = list(dict.fromkeys([k.lower() for k in agents.entries] + [a.id.lower() for a in agents.list_]))
    if len(ids) == 1:
        return ids[0]
    if agents.list_ and not agents.entries:
        return agents.list_[0].id.lower()  # early 2026: the first of the list
    if ids and DEFAULT_AGENT_ID not in ids:
        raise ConfigError(
            f"several agents are configured ({', '.join(ids)}) and none is the default: pass -a ID, or set "
            "agents.defaults.systemAgent.agentId", key_path="agents.defaults.systemAgent.agentId")
    return DEFAULT_AGENT_ID


def choose_agent(config: MemsiftConfig, wanted: str | None) -> ChosenAgent:
    """The agent `wanted` names (case-insensitively), else the default; an id no entry has runs
    on the defaults alone."""
    if wanted in (None, ""):
        agent = default = _default_id(config)
    else:
        agent = _checked_id(wanted, wanted)
        try:
            default = _default_id(config)
        except ConfigError:  # several agents, none the default: the one asked for is not it
            default = None
    agents = config.agents
    listed = next(((i, a) for i, a in enumerate(agents.list_) if a.id.lower() == agent), None)
    keyed = next(((k, e) for k, e in agents.entries.items() if k.lower() == agent), None)
    return ChosenAgent(agent, listed, keyed, agent == default)


def search_layers(config: MemsiftConfig, chosen: ChosenAgent) -> list[tuple[tuple[Any, ...], MemorySearchConfig]]:
    """(its key path in the file, the settings) of every layer that is set, lowest first."""
    agents = config.agents
    layers: list[tuple[tuple[Any, ...], MemorySearchConfig | None]] = [
        (("memorySearch",), config.memory_search),
        (("agents", "defaults", "memorySearch"), agents.defaults.memory_search),
        (("memory", "search"), config.memory.search),
    ]
    if chosen.listed:
        i, entry = chosen.listed
        layers.append((("agents", "list", i, "memorySearch"), entry.memory_search))
    if chosen.keyed:
        key, keyed = chosen.keyed
        layers.append((("agents", "entries", key, "memorySearch"), keyed.memory_search))
        layers.append((("agents", "entries", key, "memory", "search"), keyed.memory.search if keyed.memory else None))
    return [(where, section) for where, section in layers if section is not None]


def dotted(path: tuple[Any, ...]) -> str:
    """A key path as a file spells it: `agents.list[0].memorySearch`."""
    return ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in path).replace(".[", "[")


def _leaves(data: dict[str, Any], prefix: tuple[Any, ...] = ()) -> dict[tuple[Any, ...], Any]:
    out: dict[tuple[Any, ...], Any] = {}
    for key, value in data.items():
        if isinstance(value, dict) and value:
            out.update(_leaves(value, prefix + (key,)))
        else:
            out[prefix + (key,)] = value
    return out


def merge_layers(layers: list[tuple[tuple[Any, ...], MemorySearchConfig]]
                 ) -> tuple[dict[str, Any], dict[str, list[tuple[Any, ...]]]]:
    """The layers merged (raw, camelCase keys, as set), and for each setting (`query.maxResults`)
    the key paths in the file that set it, in order (several for the lists that add up)."""
    merged: dict[str, Any] = {}
    set_by: dict[str, list[tuple[Any, ...]]] = {}
    for where, section in layers:
        for path, value in _leaves(section.model_dump(by_alias=True, exclude_unset=True)).items():
            node = merged
            for key in path[:-1]:
                node = node.setdefault(key, {})
            key = ".".join(path)
            if path in _ADDED_UP and isinstance(value, list):
                node[path[-1]] = [*node.get(path[-1], []), *value]
                set_by.setdefault(key, []).append(where + path)
            else:
                node[path[-1]] = value
                set_by[key] = [where + path]
    return merged, set_by


def agent_workspaces(config: MemsiftConfig, chosen: ChosenAgent) -> list[tuple[str, str | None, tuple[Any, ...]]]:
    """(the key, its value, its key path) of the places that may name the agent's workspace, first wins."""
    out: list[tuple[str, str | None, tuple[Any, ...]]] = []
    if chosen.keyed:
        out.append((f"agents.entries.{chosen.keyed[0]}.workspace", chosen.keyed[1].workspace,
                    ("agents", "entries", chosen.keyed[0], "workspace")))
    if chosen.listed:
        out.append((f"agents.list[{chosen.listed[0]}].workspace", chosen.listed[1].workspace,
                    ("agents", "list", chosen.listed[0], "workspace")))
    shared = config.agents.defaults.workspace
    where = ("agents", "defaults", "workspace")
    if shared and len(config.agents.entries) > 1 and not chosen.is_default:
        # OpenClaw 2026.9: in a roster of several agents, one without a workspace of its own gets
        # a folder of its own under the shared one (the default agent keeps the shared one).
        out.append((f"agents.defaults.workspace (+ /{chosen.id}, as OpenClaw gives an agent of several)",
                    str(shared).rstrip("/") + "/" + chosen.id, where))
    else:
        out.append(("agents.defaults.workspace", shared, where))
    return out
