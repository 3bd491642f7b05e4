"""Load, merge, validate and normalise config into one `ResolvedConfig` for one agent.

Precedence is data (`SOURCE_ORDER`): built-in defaults < config file < environment < explicit
overrides from the caller (CLI flags). Within the file, an agent's `memorySearch` wins over
`agents.defaults.memorySearch`, except `extraPaths`, which are concatenated (as OpenClaw does; docs/parity.md).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import os
import re
from pathlib import Path
from typing import Any, Mapping

from pydantic import BaseModel, ValidationError

from ..records import Record
from ..records.schema import model_of, validate
from .sizes import EVIDENCE_TOKENS, REFERENCE_OVERLAP, REFERENCE_TOKENS
from ..errors import ConfigError
from ..private_dirs import current_path, default_state_dir, openclaw_state_dir
from .coverage import with_qmd_coverage
from ..secrets import names_a_variable, register_header_secrets, register_secret, register_url_secrets
from .workspace import find_workspace
from .memory_section import normalise_memory
from .resolved import ResolvedConfig
from .zones import BadZone, zone_info
from .agents import agent_workspaces, choose_agent, dotted, merge_layers, search_layers
from .models import (
    AgentDefaults,
    AgentEntry,
    AgentsConfig,
    ChunkingConfig,
    KeyedAgentEntry,
    MemorySearchConfig,
    MemsiftConfig,
)
from .sources import default_config_path, env_overrides, read_config_file

__all__ = [
    "ResolvedConfig",
    "load_config",
    "resolve_agent",
    "normalise_memory_search",
    "default_index_name",
    "current_folder",
    "SOURCE_ORDER",
]

SOURCE_ORDER = ("openclaw", "file", "env", "overrides")


def default_index_name(agent: str, workspace: Path, ms: MemorySearchConfig | None = None) -> str:
    """`<agent>-<8 hex>.sqlite`: one index per agent, workspace and set of files covered.

    The default workspace is the current folder, so one name per agent would make a search in
    another folder answer from (or rebuild) the first folder's index. Settings that change which
    files are indexed (extraPaths, sources, multimodal) are part of the name too: one index that
    flips between them would need a rebuild at every switch and answer keyword-only meanwhile.
    Without such settings the name is the workspace's alone, as before.
    """
    key = str(workspace)
    coverage = _coverage(workspace, ms) if ms is not None else None
    if coverage:
        key += "\n" + json.dumps(coverage, sort_keys=True)
    tag = hashlib.sha256(os.fsencode(key)).hexdigest()[:8]
    return f"{agent}-{tag}.sqlite"


def _coverage(workspace: Path, ms: MemorySearchConfig) -> dict[str, Any] | None:
    """What decides the files an index covers, when it differs from the defaults."""
    extra = sorted({os.path.normpath(workspace / Path(p).expanduser()) for p in ms.extra_paths})
    mm = ms.multimodal
    out: dict[str, Any] = {}
    if extra:
        out["extraPaths"] = extra
    if sorted(ms.sources) != ["memory"]:
        out["sources"] = sorted(ms.sources)
    if mm.enabled and mm.modalities:
        out["multimodal"] = {"modalities": sorted(mm.modalities), "maxFileBytes": mm.max_file_bytes}
    return out or None


def _deep_merge(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


# pydantic names the member of a union it tried (`list[literal['image','audio']]`); not a key.
_UNION_TAG_RE = re.compile(r"^[a-z-]+\[.*\]$")


def _format_loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, str) and _UNION_TAG_RE.match(part):
            continue
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model class that holds the last key of `loc` (to list its allowed keys)."""
    current: Any = model
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        field = next(
            (f for n, f in current.model_fields.items() if (f.alias or n) == part or n == part), None
        )
        if field is None:
            return None
        annotation = field.annotation
        nxt = None
        for cand in (annotation, *getattr(annotation, "__args__", ())):
            for inner in (cand, *getattr(cand, "__args__", ())):
                if isinstance(inner, type) and issubclass(inner, BaseModel):
                    nxt = inner
        current = nxt
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _describe_errors(exc: ValidationError, root: type[BaseModel], prefix: str) -> ConfigError:
    lines = []
    first_path = None
    for err in exc.errors():
        loc = tuple(err["loc"])
        path = ".".join(p for p in (prefix, _format_loc(loc)) if p)
        if err["type"] == "plugin_block":  # engine/config/models._WithPluginBlocks: the key is in the context
            path = ".".join(p for p in (path, str(err["ctx"]["key"])) if p)
        first_path = first_path or path
        if err["type"] == "plugin_block":
            msg = err["msg"]
        elif err["type"] == "extra_forbidden":
            holder = _model_at(root, loc)
            allowed = sorted((f.alias or n) for n, f in holder.model_fields.items()) if holder else []
            hint = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
            msg = "unknown key"
            if hint:
                msg += f" (did you mean {hint[0]!r}?)"
            if allowed:
                msg += f"; allowed keys here: {', '.join(allowed)}"
        else:
            msg = err["msg"].removeprefix("Value error, ")
            if "input" in err and not isinstance(err["input"], (dict, list)):
                msg += f" (got {err['input']!r})"
        lines.append(f"{path}: {msg}")
    return ConfigError("invalid config:\n  " + "\n  ".join(lines), key_path=first_path)


def _validate(model: type[Record] | type[BaseModel], data: Any, prefix: str = "") -> Any:
    """`data` as `model` (a config record, or a plugin's own pydantic model), or the ConfigError
    that names every bad key as the file spells it."""
    schema = model_of(model) if issubclass(model, Record) else model
    try:
        return validate(model, data) if issubclass(model, Record) else model.model_validate(data)
    except ValidationError as exc:
        raise _describe_errors(exc, schema, prefix) from None


def load_config(
    config_path: str | os.PathLike[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    openclaw_config: str | os.PathLike[str] | None = None,
) -> tuple[MemsiftConfig, Path | None]:
    """Read and validate the whole config. Returns it and the file it came from (if any).

    `openclaw_config` (else `$MEMSIFT_OPENCLAW_CONFIG`) is an OpenClaw config read under memsift's
    own file: its memory keys apply, and memsift's file, the environment and the flags win over
    them. What each file set is remembered for `memsift config show` (`config_sources`)."""
    env = os.environ if environ is None else environ
    explicit = config_path is not None or bool(env.get("MEMSIFT_CONFIG"))
    path = Path(config_path).expanduser() if config_path is not None else default_config_path(env)
    notes: list[str] = []
    openclaw = openclaw_config if openclaw_config is not None else env.get("MEMSIFT_OPENCLAW_CONFIG") or None
    openclaw_path = Path(os.path.abspath(Path(openclaw).expanduser())) if openclaw else None
    layers: dict[str, dict[str, Any]] = {
        "openclaw": read_config_file(openclaw_path, required=True, environ=env, notes=notes)
        if openclaw_path is not None and (path is None or openclaw_path != Path(os.path.abspath(path))) else {},
        # no default file where no home folder is known (`default_config_path`)
        "file": read_config_file(path, required=explicit, environ=env, notes=notes) if path is not None else {},
        "env": env_overrides(env),
        "overrides": dict(overrides or {}),
    }
    labels = {"openclaw": str(openclaw_path), "file": str(Path(os.path.abspath(path))) if path is not None else "-",
              "env": "environment", "overrides": "command line"}
    merged: dict[str, Any] = {}
    origins: dict[tuple[Any, ...], str] = {}
    for name in SOURCE_ORDER:
        merged = _deep_merge(merged, layers[name])
        for leaf in _leaf_paths(layers[name]):
            origins[leaf] = labels[name]
    _check_agent_typos(merged)
    config = _validate(MemsiftConfig, merged)
    # Not settings, and the record is frozen: kept beside its fields for `config show` and the notes.
    object.__setattr__(config, "_origins", origins)
    object.__setattr__(config, "_notes", notes)
    object.__setattr__(config, "_openclaw_path", openclaw_path)
    # Absolute: the same file named relatively (`-c cfg.json5`) and absolutely is the same config
    # (a resident server compares its settings with a client's from another folder).
    return config, (Path(os.path.abspath(path)) if path is not None and path.exists() else None)


def _leaf_paths(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The key paths of `data`'s values (a list is one value; an empty object none)."""
    if isinstance(data, dict):
        return [leaf for key, value in data.items() for leaf in _leaf_paths(value, prefix + (key,))]
    return [prefix] if prefix else []


def config_origin(config: MemsiftConfig, path: tuple[Any, ...]) -> str:
    """Which source set the raw key at `path` (or the nearest key above it that one did)."""
    origins: dict[tuple[Any, ...], str] = getattr(config, "_origins", None) or {}
    for end in range(len(path), 0, -1):
        found = origins.get(path[:end])
        if found:
            return found
    below = [origin for key, origin in origins.items() if key[:len(path)] == path]  # a block: the keys in it
    return below[-1] if below else "defaults"


def _check_agent_typos(raw: dict[str, Any]) -> None:
    """Agent entries carry many reference keys memsift ignores, so unknown keys there are not
    errors; but one that is a near miss of a key memsift reads (`memorySerch`) would silently run
    the defaults. Those are errors, with the suggestion the strict sections give."""
    agents = raw.get("agents")
    if not isinstance(agents, dict):
        return
    entries = [("agents", agents, AgentsConfig), ("agents.defaults", agents.get("defaults"), AgentDefaults)]
    if isinstance(agents.get("list"), list):
        entries += [(f"agents.list[{i}]", e, AgentEntry) for i, e in enumerate(agents["list"])]
    if isinstance(agents.get("entries"), dict):
        entries += [(f"agents.entries.{k}", e, KeyedAgentEntry) for k, e in agents["entries"].items()]
    lines, first = [], None
    for where, entry, model in entries:
        if not isinstance(entry, dict):
            continue
        ours = [f.alias or n for n, f in model.model_fields.items()]  # type: ignore[attr-defined]
        for key in entry:
            hint = difflib.get_close_matches(str(key), ours, n=1, cutoff=0.8) if key not in ours else []
            if hint:
                first = first or f"{where}.{key}"
                lines.append(f"{where}.{key}: unknown key (did you mean {hint[0]!r}?); memsift reads "
                             f"{', '.join(ours)} here (other keys of the reference are ignored)")
    if lines:
        raise ConfigError("invalid config:\n  " + "\n  ".join(lines), key_path=first)


def _floor_clamp(value: float, lo: int, hi: int | None = None) -> int:
    if not math.isfinite(value):
        return lo
    v = max(lo, math.floor(value))
    return min(v, hi) if hi is not None else v


def _clamp01(value: float) -> float:
    return min(1.0, max(0.0, value)) if math.isfinite(value) else 0.0


def normalise_chunking(c: ChunkingConfig) -> ChunkingConfig:
    """Pick the chunker and its sizes (see ChunkingConfig): evidence-sized chunks by default, the
    reference's chunker (400 / 80 unless given, clamped as it clamps) once tokens or overlap is set."""
    strategy = c.strategy or ("reference" if (c.tokens, c.overlap) != (None, None) else "evidence")
    if strategy == "evidence":
        if c.overlap:
            raise ConfigError(
                "chunking.overlap is not used by the evidence chunker (its chunks are shown whole, so overlap would "
                "show "
                'lines twice); remove it, or set chunking.strategy: "reference"',
                key_path="memorySearch.chunking.overlap",
            )
        return c.model_copy(update={"strategy": strategy, "tokens": max(1, c.tokens or EVIDENCE_TOKENS), "overlap": 0})
    tokens = max(1, c.tokens if c.tokens is not None else REFERENCE_TOKENS)
    overlap = c.overlap if c.overlap is not None else REFERENCE_OVERLAP
    return c.model_copy(update={"strategy": strategy, "tokens": tokens, "overlap": min(max(0, overlap), tokens - 1)})


def normalise_memory_search(ms: MemorySearchConfig) -> MemorySearchConfig:
    """Apply the reference's clamping and normalisation (as OpenClaw does; docs/parity.md) to a merged config."""
    chunking = normalise_chunking(ms.chunking)
    h = ms.query.hybrid
    vw, tw = _clamp01(h.vector_weight), _clamp01(h.text_weight)
    total = vw + tw
    vw, tw = (vw / total, tw / total) if total > 0 else (0.7, 0.3)
    hybrid = h.model_copy(
        update={
            "vector_weight": vw,
            "text_weight": tw,
            "candidate_multiplier": _floor_clamp(h.candidate_multiplier, 1, 20),
            "mmr": h.mmr.model_copy(update={"lambda_": _clamp01(h.mmr.lambda_)}),
            "temporal_decay": h.temporal_decay.model_copy(
                update={"half_life_days": _floor_clamp(h.temporal_decay.half_life_days, 1)}
            ),
        }
    )
    query = ms.query.model_copy(update={"min_score": _clamp01(ms.query.min_score), "hybrid": hybrid})
    sources = [s for s in dict.fromkeys(ms.sources) if s != "sessions" or ms.experimental.session_memory]
    cache = ms.cache.model_copy(
        update={"max_entries": None if ms.cache.max_entries is None else _floor_clamp(ms.cache.max_entries, 1)}
    )
    sessions = ms.sync.sessions.model_copy(
        update={
            "delta_bytes": _floor_clamp(ms.sync.sessions.delta_bytes, 0),
            "delta_messages": _floor_clamp(ms.sync.sessions.delta_messages, 0),
        }
    )
    mm = ms.multimodal
    # Unset, "all", or "all" in the list: image and audio (the reference's reading).
    wanted = ["all"] if mm.modalities is None or mm.modalities == "all" else mm.modalities
    modalities = ["image", "audio"] if "all" in wanted else list(dict.fromkeys(wanted))
    multimodal = mm.model_copy(update={"modalities": modalities if mm.enabled else []})
    extra = list(dict.fromkeys(p.strip() for p in ms.extra_paths if p and p.strip()))
    return ms.model_copy(
        update={
            "chunking": chunking,
            "query": query,
            "sources": sources or ["memory"],
            "cache": cache,
            "sync": ms.sync.model_copy(update={"sessions": sessions}),
            "multimodal": multimodal,
            "extra_paths": extra,
        }
    )


def resolve_agent(
    config: MemsiftConfig,
    *,
    agent_id: str | None = None,
    workspace: str | os.PathLike[str] | None = None,
    config_path: Path | None = None,
    environ: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    trace: dict[str, Any] | None = None,
) -> ResolvedConfig:
    """Merge the defaults with one agent's own settings and normalise (agents.py says which
    agent, which keys and in what order). As in the reference, the defaults apply to any agent id,
    an id no entry has runs on the defaults alone, and ids match case-insensitively.

    `cwd` is the folder relative workspace paths start from (and the default workspace): the
    process's own unless given (a resident server answers for a client elsewhere).

    `trace`, when given, receives the paths as named before the file system was asked about them
    (symlinks, the upward search for a workspace), which a settings snapshot checks again before
    it is used (`snapshot.py`)."""
    env = os.environ if environ is None else environ
    chosen = choose_agent(config, agent_id if agent_id is not None else env.get("MEMSIFT_AGENT"))
    agent = chosen.id
    layers = search_layers(config, chosen)
    merged, set_by = merge_layers(layers)
    where_set = dotted(layers[-1][0]) if layers else "agents.defaults.memorySearch"  # the most specific

    def where(key: str) -> str:
        """The key a setting was read from (for its error), as the file spells it."""
        return dotted(set_by[key][-1]) if key in set_by else f"{where_set}.{key}"

    ms = normalise_memory_search(_validate(MemorySearchConfig, merged, where_set))
    ms, zone_source, zone_note = _user_zone(config, ms)
    ms, endpoint_source = _provider_endpoint(config, ms)
    _check_multimodal(ms)
    _check_rerank(ms)
    _register_secrets(ms)

    given_by, ws_raw, ws_key = next(
        ((by, raw, key) for by, raw, key in (
            ("--workspace", workspace, None),
            ("MEMSIFT_WORKSPACE", env.get("MEMSIFT_WORKSPACE"), None),
            *agent_workspaces(config, chosen),
        ) if raw),
        (None, None, None),
    )
    ws_given = _expand(ws_raw, given_by or "workspace") if ws_raw is not None else None
    if ws_given is not None and ws_given.is_absolute():
        ws_start = ws_given  # the current folder is not needed (it may be gone)
    else:
        base = Path(cwd) if cwd is not None else current_folder()
        ws_start = base / ws_given if ws_given is not None else base
    ws = find_workspace(ws_start.resolve(), given_by=given_by)
    state_dir = _expand(config.state_dir, "stateDir") if config.state_dir else default_state_dir(env)
    for raw in ms.extra_paths:
        _expand(raw, where("extraPaths"))
    for i, c in enumerate(config.memory.qmd.paths):
        _expand(c.path, f"memory.qmd.paths[{i}].path")
    for i, c in enumerate(ms.qmd.extra_collections):
        _expand(c.path, f"{where('qmd.extraCollections')}[{i}].path")
    if ms.store.path:
        store = _expand(ms.store.path.replace("{agentId}", agent), where("store.path"))
        store = store if store.is_absolute() else (ws / store)
    else:
        store = state_dir / "memory" / default_index_name(agent, ws, ms)
    if trace is not None:
        trace.update(workspace=[str(ws_start), given_by], state_dir=str(state_dir), store_folder=str(store.parent))
    # The folder is resolved, never the file itself: a symlink there is refused, not followed.
    store = Path(os.path.realpath(store.parent)) / store.name
    resolved = ResolvedConfig(
        agent_id=agent,
        workspace=ws,
        state_dir=state_dir.resolve(),
        store_path=store,
        config_path=config_path,
        memory_search=ms,
        memory=normalise_memory(config.memory, ws),
        workspace_given_by=given_by,
        notes=(*(getattr(config, "_notes", None) or ()), *_orphan_blocks(config), *zone_note),
        sources={
            **_memory_sources(config),
            **{
                f"memorySearch.{key}": " + ".join(f"{config_origin(config, p)}: {dotted(p)}" for p in paths)
                for key, paths in set_by.items()
            },
            "workspace": f"{config_origin(config, ws_key)}: {given_by}"
            if ws_key
            else (given_by or "the current folder"),
            "agentId": _agent_source(config, chosen, agent_id, env),
            **zone_source,
            **endpoint_source,
        },
        openclaw_config=getattr(config, "_openclaw_path", None),
        openclaw_state_dir=openclaw_state_dir(env) if getattr(config, "_openclaw_path", None) else None,
    )
    # Checked on what the index really covers: the extra paths and QMD's collections (config/coverage.py).
    covered = with_qmd_coverage(resolved).memory_search.extra_paths
    _check_index_path(store, ws, covered, where("store.path") if ms.store.path else "stateDir")
    _check_export_dir(resolved, covered)
    return resolved


def _user_zone(config: MemsiftConfig,
               ms: MemorySearchConfig) -> tuple[MemorySearchConfig, dict[str, str], tuple[str, ...]]:
    """OpenClaw's `agents.defaults.userTimezone` (the zone its daily memory files are named in) as
    `query.time.timezone` where memsift's own key is unset; an unknown name is set aside and said, as
    OpenClaw falls back to the machine's zone. Returns the settings, the key's source and the note."""
    raw = (config.agents.defaults.user_timezone or "").strip()
    if not raw or ms.query.time.timezone is not None:
        return ms, {}, ()
    key = ("agents", "defaults", "userTimezone")
    where = f"{config_origin(config, key)}: agents.defaults.userTimezone"
    try:
        zone_info(raw)
    except BadZone as exc:
        return ms, {}, (f"{where}: {exc}; days are read in this machine's time zone instead",)
    query = ms.query.model_copy(update={"time": ms.query.time.model_copy(update={"timezone": raw})})
    return ms.model_copy(update={"query": query}), {"memorySearch.query.time.timezone": where}, ()


def _provider_endpoint(config: MemsiftConfig, ms: MemorySearchConfig) -> tuple[MemorySearchConfig, dict[str, str]]:
    """OpenClaw's `models.providers.<id>` for the embedding provider of that id: its endpoint, key
    and headers where `memorySearch.remote` leaves them unset (the reference's order: remote, then
    the provider's, then the provider's default). Returns the settings and the keys' sources."""
    found = config.models.providers.get(ms.provider)
    if found is None:
        return ms, {}
    remote = ms.remote
    update: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for field, key, value in (("base_url", "baseUrl", found.base_url), ("api_key", "apiKey", found.api_key)):
        if value is not None and getattr(remote, field) is None:
            update[field] = value
            sources[f"memorySearch.remote.{key}"] = (
                f"{config_origin(config, ('models', 'providers', ms.provider, key))}: "
                f"models.providers.{ms.provider}.{key}")
    if found.headers:
        update["headers"] = {**found.headers, **remote.headers}
        sources["memorySearch.remote.headers"] = (
            f"{config_origin(config, ('models', 'providers', ms.provider, 'headers'))}: "
            f"models.providers.{ms.provider}.headers" + (" + memorySearch.remote.headers" if remote.headers else ""))
    return ms.model_copy(update={"remote": remote.model_copy(update=update)}), sources


def _orphan_blocks(config: MemsiftConfig) -> list[str]:
    """A `memory.<name>` block no installed backend reads (a plugin removed, a name mistyped) is
    ignored, and said so; the backend in use reads its own (compose/factory.py)."""
    from ..plugins import registry  # noqa: PLC0415

    blocks = dict(config.memory.model_extra or {})  # plugin_blocks.plugin_blocks (which imports this module)
    known = registry.names("backend") if blocks else []
    return [
        f"memory.{name} ({config_origin(config, ('memory', name))}): no installed backend is called {name!r}, so "
        f"memsift "
        f"ignores this block (installed: {', '.join(known)})"
        for name in blocks
        if name not in known
    ]


def _memory_sources(config: MemsiftConfig) -> dict[str, str]:
    """Where each `memory.*` setting (backend, citations, qmd, …) and `stateDir` came from."""
    out: dict[str, str] = {}
    for leaf in _leaf_paths(
        config.memory.model_dump(by_alias=True, exclude_unset=True, exclude={"search"}), ("memory",)
    ):
        out[".".join(str(p) for p in leaf)] = f"{config_origin(config, leaf)}: {'.'.join(str(p) for p in leaf)}"
    if config.state_dir:
        out["stateDir"] = f"{config_origin(config, ('stateDir',))}: stateDir"
    return out


def _agent_source(config: MemsiftConfig, chosen: Any, agent_id: str | None, env: Mapping[str, str]) -> str:
    if agent_id:
        return "-a (--agent)"
    if env.get("MEMSIFT_AGENT"):
        return "MEMSIFT_AGENT"
    system = config.agents.defaults.system_agent
    if system and system.agent_id:
        return (
            f"{config_origin(config, ('agents', 'defaults', 'systemAgent', 'agentId'))}: "
            f"agents.defaults.systemAgent.agentId"
        )
    if chosen.keyed or chosen.listed:
        return "the default agent of the config's roster (no -a)"
    return "memsift's default agent id (no -a, no agent configured)"


def current_folder() -> Path:
    """The current folder; one that was deleted or moved away (a shell left in it) is a clear error."""
    here = current_path()
    if here is None:
        raise ConfigError("the current folder no longer exists (it was deleted or moved): cd to a folder that "
                          "exists, or name the workspace with -w /path/to/workspace")
    return Path(here)


def _expand(raw: str | os.PathLike[str], key: str) -> Path:
    """`~` expanded; `~nosuchuser/…` (a user without a known home) is a config error, not a crash."""
    try:
        return Path(raw).expanduser()
    except RuntimeError:
        raise ConfigError(
            f"{key}: {str(raw)[:200]!r} names a user whose home folder is unknown", key_path=key
        ) from None


def _index_path_clash(store: Path, workspace: Path, extra_paths: list[str]) -> str | None:
    """Why `store` (its folder already resolved) may not hold the index: it is a memory file, or
    inside the memory files."""
    real = store
    if real.name.lower().endswith(".md"):
        return "a Markdown file"
    files = [workspace / n for n in ("MEMORY.md", "memory.md", "DREAMS.md")]
    folders = [workspace / "memory"]
    for raw in extra_paths:
        p = Path(raw).expanduser()
        p = p if p.is_absolute() else workspace / p
        (files if p.name.lower().endswith(".md") else folders).append(p)
    for f in files:
        if real == Path(os.path.realpath(f)):
            return f"the memory file {f}"
    for d in folders:
        root = Path(os.path.realpath(d))
        if real == root or root in real.parents:
            return f"inside the memory folder {d}"
    return None


def _check_index_path(store: Path, workspace: Path, extra_paths: list[str], key: str) -> None:
    """memsift writes, renames and deletes files at the index path: never among the memory files."""
    clash = _index_path_clash(store, workspace, extra_paths)
    if clash:
        raise ConfigError(
            f"{key}: the index path {store} is {clash}; memsift never writes among the memory files. "
            f"Set {key} to a place outside MEMORY.md, memory/, the extra paths and the QMD collection folders "
            f"(memory.qmd.paths), or leave it unset",
            key_path=key,
        )


def _check_export_dir(settings: ResolvedConfig, covered: list[str]) -> None:
    """QMD's session export writes and deletes files in its folder: never among the memory files
    (the workspace root, memory/, an extra path, a QMD collection folder)."""
    sessions = settings.memory.qmd.sessions
    if not (sessions.enabled and sessions.export_dir):
        return
    ws = settings.workspace
    export = Path(os.path.realpath(Path(sessions.export_dir).expanduser()))
    # (folder, what it is, whether a folder below it is refused too)
    places = [(ws, "the workspace folder (where MEMORY.md lives)", False), (ws / "memory", "the memory folder", True)]
    for raw in [*covered, *(c.path for c in settings.memory.qmd.paths),
                *(c.path for c in settings.memory_search.qmd.extra_collections)]:
        p = Path(raw).expanduser()
        places.append((p if p.is_absolute() else ws / p, "an extra path or QMD collection", True))
    for place, what, below in places:
        root = Path(os.path.realpath(place))
        if export == root or (below and root in export.parents):
            raise ConfigError(
                f"memory.qmd.sessions.exportDir: {sessions.export_dir} is {'' if export == root else 'inside '}{what} "
                f"{place}; memsift writes and deletes session exports there and never among the memory files. "
                "Set it to a folder of its own (or leave it unset: a folder in memsift's state folder)",
                key_path="memory.qmd.sessions.exportDir",
            )


def _register_secrets(ms: MemorySearchConfig) -> None:
    """Header values, and a literal API key (not the name of a variable), are masked in every
    output from the moment the config is known."""
    for remote in (ms.remote, ms.query.rerank.remote):
        register_header_secrets(remote.headers)
        register_url_secrets(remote.base_url)
        key = remote.api_key.get_secret_value() if remote.api_key else None
        if key and not names_a_variable(key):  # (`${NAME}` still here was unset: includes.py)
            register_secret(key)


def _check_rerank(ms: MemorySearchConfig) -> None:
    """A rerank stage that is on must say where its reranker is (nothing is downloaded)."""
    rr = ms.query.rerank
    if not rr.enabled:
        return
    if rr.provider == "local" and not rr.model_path:
        raise ConfigError(
            "memorySearch.query.rerank.modelPath: the local reranker needs a folder holding model.onnx and "
            "tokenizer.json (a cross-encoder exported to ONNX); set it, choose a remote provider, or set enabled: "
            "false",
            key_path="memorySearch.query.rerank.modelPath",
        )
    if rr.provider == "endpoint" and not rr.remote.base_url:
        raise ConfigError(
            "memorySearch.query.rerank.remote.baseUrl: the endpoint provider needs the server's base URL "
            "(e.g. http://127.0.0.1:8080 for TEI; requests go to {baseUrl}/rerank)",
            key_path="memorySearch.query.rerank.remote.baseUrl",
        )


def _check_multimodal(ms: MemorySearchConfig) -> None:
    if not (ms.multimodal.enabled and ms.multimodal.modalities):
        return
    model = ms.model
    for prefix in ("models/", "gemini/", "google/"):
        model = model.removeprefix(prefix)
    if ms.provider != "gemini" or model != "gemini-embedding-2-preview":
        raise ConfigError(
            "memorySearch.multimodal needs provider 'gemini' with model 'gemini-embedding-2-preview'",
            key_path="memorySearch.multimodal",
        )
    if ms.fallback != "none":
        raise ConfigError(
            "memorySearch.multimodal cannot be combined with a fallback provider",
            key_path="memorySearch.fallback",
        )
