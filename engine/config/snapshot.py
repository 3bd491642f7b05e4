"""Settings a command resolved before, used again while nothing they came from has changed.

Reading a config means parsing JSON5, checking every key with pydantic and merging the agent's
layers: about 100 ms of a cold `memsift search`, most of it importing pydantic and building its
models, for settings that are almost always the ones the last command resolved. So the CLI keeps
what it resolved (`<state>/settings/<key>.json`, 0600 in a 0700 folder) with what it depended on,
and the next command with the same arguments, folder and environment uses it when all of that is
as it was:

- the files read: the config file (or its absence), the OpenClaw config, every `$include`, each
  by inode, size and modification and change times;
- the environment: the variables the loader read (`${VAR}`, `$MEMSIFT_WORKSPACE`, …), every
  `MEMSIFT*` variable (a new `MEMSIFT__…` override), `HOME` and the XDG folders;
- the places: the workspace found again from where it was named (its markers, symlinks on the way),
  the state folder and the index's folder resolved again;
- what is installed: memsift's config code, and each `sys.path` folder's modification time (a plugin
  installed or removed changes which names are valid).

Anything else is a miss, and the config is read as always (and its errors said as always: nothing
failing is kept). Settings that hold a secret or a remote endpoint (an API key, headers, a DSN) are
never written: they would rest on disk, and their values must be registered for redaction as the
loader does. A snapshot that cannot be read or does not fit is a miss too; it is only a cache.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Mapping

from ..private_dirs import default_state_path
from ..records import Record
from ..secrets import Secret
from . import models as _models
from .resolved import ResolvedConfig

try:  # the built-in SHA-256: hashlib would load OpenSSL (4 ms)
    from _sha2 import sha256  # Python ≥ 3.12
except ImportError:  # pragma: no cover - depends on the interpreter
    try:
        from _sha256 import sha256  # Python 3.11
    except ImportError:
        from hashlib import sha256

__all__ = ["resolve_settings", "settings_and_sources", "file_signature", "SNAPSHOT_VERSION"]

SNAPSHOT_VERSION = 1
MAX_SNAPSHOT_BYTES = 1 << 20
KEPT_SNAPSHOTS = 64  # one per folder and arguments used; the least recently written go first
_ALWAYS_ENV = ("HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "OPENCLAW_INCLUDE_ROOTS")
_RECORDS: dict[str, type[Record]] = {
    **{name: value for name, value in vars(_models).items() if isinstance(value, type) and issubclass(value, Record)},
    "ResolvedConfig": ResolvedConfig,
}


def resolve_settings(config_path: str | None = None, *, workspace: str | None = None, agent: str | None = None,
                     openclaw_config: str | None = None) -> ResolvedConfig:
    """The settings `compose.factory.resolve_config` gives for these arguments, this process's folder
    and environment: from the snapshot when it holds, else resolved and kept."""
    return settings_and_sources(config_path, workspace=workspace, agent=agent, openclaw_config=openclaw_config)[0]


def settings_and_sources(config_path: str | None = None, *, workspace: str | None = None, agent: str | None = None,
                         openclaw_config: str | None = None) -> tuple[ResolvedConfig, list[tuple[Any, Any]]]:
    """`resolve_settings`, with the config files they came from, each with its `file_signature` as it
    was read (a command that follows its config looks at them again: config/follow.py)."""
    env = os.environ
    try:
        key = _key([config_path, workspace, agent, openclaw_config])
        entry: Path | None = Path(default_state_path(env)) / "settings" / f"{key}.json"
    except OSError:  # the current folder is gone: the loader says so
        entry = None
    found = _read(entry, env) if entry is not None else None
    if found is not None:
        return found
    from .load import load_config, resolve_agent  # noqa: PLC0415  (pydantic: the config is read)
    from .sources import recording_reads  # noqa: PLC0415

    seen_env = _RecordingEnv(env)
    trace: dict[str, Any] = {}
    with recording_reads(file_signature) as files:  # as compose.factory.resolve_config reads it
        config, path = load_config(config_path, environ=seen_env, openclaw_config=openclaw_config)
        settings = resolve_agent(config, agent_id=agent, workspace=workspace, config_path=path, environ=seen_env,
                                 trace=trace)
    if entry is not None and _keepable(settings):
        _write(entry, settings, files=files, env_names=seen_env.names, trace=trace)
    return settings, list(files)


# --- what a snapshot depends on ----------------------------------------------------------------


def _key(asked: list[str | None]) -> str:
    """The snapshot's name: what was asked, from where, by whom, with which memsift."""
    return sha256(json.dumps([SNAPSHOT_VERSION, asked, os.getcwd(), os.getuid(), sys.version,
                              _code_signature()]).encode()).hexdigest()[:32]


def _code_signature() -> list[Any]:
    """The config code and records that made the snapshot (an upgrade, or an edit in a clone)."""
    here = os.path.dirname(__file__)
    folders = (here, os.path.join(os.path.dirname(here), "records"))
    files = [os.path.join(f, name) for f in folders for name in sorted(os.listdir(f)) if name.endswith(".py")]
    return [file_signature(f) for f in files]


def file_signature(path: Path | str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None  # absent: a file created later is a change
    return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _env_value(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name)
    return None if value is None else sha256(value.encode("utf-8", "surrogateescape")).hexdigest()


def _env_names(env: Mapping[str, str], read: set[str]) -> list[str]:
    return sorted({*read, *_ALWAYS_ENV, *(n for n in env if n.upper().startswith("MEMSIFT"))})


def _installed() -> list[list[Any]]:
    """Each import folder and when it last changed: a package installed or removed changes it. Not
    the first, which is the script's own (the console script's, or the current folder's)."""
    return [[p, file_signature(p)] for p in sys.path[1:] if p and os.path.isdir(p)]


class _RecordingEnv(Mapping[str, str]):
    """The environment, noting each variable the loader reads."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self._env, self.names = env, set[str]()

    def __getitem__(self, name: str) -> str:
        self.names.add(name)
        return self._env[name]

    def __iter__(self) -> Any:
        return iter(self._env)

    def __len__(self) -> int:
        return len(self._env)


def _keepable(settings: ResolvedConfig) -> bool:
    """No secret (an API key, a DSN) and no remote endpoint (headers, a base URL): nothing that must
    not rest on disk or be left unregistered for redaction."""
    ms = settings.memory_search
    if any(remote.headers or remote.base_url for remote in (ms.remote, ms.query.rerank.remote)):
        return False
    return not _holds_secret(settings)


def _holds_secret(value: Any) -> bool:
    if isinstance(value, Secret):
        return True
    if isinstance(value, Record):
        return any(_holds_secret(value.__dict__[f.name]) for f in value.record_fields()) or _holds_secret(
            value.model_extra)
    if isinstance(value, (list, tuple)):
        return any(_holds_secret(v) for v in value)
    if isinstance(value, dict):
        return any(_holds_secret(v) for v in value.values())
    return False


# --- writing and reading -----------------------------------------------------------------------


def _write(entry: Path, settings: ResolvedConfig, *, files: list[tuple[Path, Any]], env_names: set[str],
           trace: dict[str, Any]) -> None:
    env = os.environ
    try:
        doc = {
            "version": SNAPSHOT_VERSION,
            "files": [[str(path), signature] for path, signature in files],
            "env": {name: _env_value(env, name) for name in _env_names(env, env_names)},
            "installed": _installed(),
            "places": trace,
            "settings": _encode(settings),  # a value of a type it cannot keep: no snapshot, never an error
        }
        from ..private_dirs import make_private_dir  # noqa: PLC0415

        make_private_dir(entry.parent)
        temporary = entry.with_name(f".{entry.name}.{os.getpid()}")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(doc, out, ensure_ascii=False, separators=(",", ":"))
        os.replace(temporary, entry)
        _prune(entry.parent)
    except (OSError, TypeError, ValueError):
        return  # a read-only or full state folder: the next command reads the config again


def _prune(folder: Path) -> None:
    kept = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
    for old in kept[KEPT_SNAPSHOTS:]:
        old.unlink(missing_ok=True)


def _read(entry: Path, env: Mapping[str, str]) -> tuple[ResolvedConfig, list[tuple[Any, Any]]] | None:
    try:
        with open(entry, "rb") as handle:
            raw = handle.read(MAX_SNAPSHOT_BYTES + 1)
        if len(raw) > MAX_SNAPSHOT_BYTES:
            return None
        doc = json.loads(raw)
        if doc.get("version") != SNAPSHOT_VERSION or not _still_holds(doc, env):
            return None
        settings = _decode(doc["settings"])
        if isinstance(settings, ResolvedConfig) and _places_hold(doc["places"], settings):
            return settings, [(path, signature) for path, signature in doc["files"]]
        return None
    except Exception:  # noqa: BLE001  (missing, damaged, from another version: read the config instead)
        return None


def _still_holds(doc: dict[str, Any], env: Mapping[str, str]) -> bool:
    if any(file_signature(path) != signature for path, signature in doc["files"]):
        return False
    recorded: dict[str, str | None] = doc["env"]
    names = _env_names(env, set(recorded))
    if set(names) != set(recorded) or any(_env_value(env, n) != recorded[n] for n in names):
        return False
    return doc["installed"] == _installed()


def _places_hold(places: dict[str, Any], settings: ResolvedConfig) -> bool:
    """The workspace, state folder and index folder, found again, are the ones kept."""
    from .workspace import find_workspace  # noqa: PLC0415

    start, given_by = places["workspace"]
    if find_workspace(Path(start).resolve(), given_by=given_by) != settings.workspace:
        return False
    if Path(places["state_dir"]).resolve() != settings.state_dir:
        return False
    return Path(os.path.realpath(places["store_folder"])) == settings.store_path.parent


def _encode(value: Any) -> Any:
    if isinstance(value, Record):
        own = value.__dict__
        out: dict[str, Any] = {"@": type(value).__name__, "@set": sorted(own["model_fields_set"])}
        if own.get("model_extra") is not None:
            out["@extra"] = _encode(own["model_extra"])
        out.update({f.name: _encode(own[f.name]) for f in value.record_fields()})
        return out
    if isinstance(value, Path):
        return {"@path": str(value)}
    if isinstance(value, tuple):
        return {"@tuple": [_encode(v) for v in value]}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {"@dict": {str(k): _encode(v) for k, v in value.items()}}
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    raise TypeError(f"a setting of type {type(value).__name__} is not kept in a snapshot")


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "@path" in value:
        return Path(value["@path"])
    if "@tuple" in value:
        return tuple(_decode(v) for v in value["@tuple"])
    if "@dict" in value:
        return {k: _decode(v) for k, v in value["@dict"].items()}
    record = _RECORDS[value["@"]]
    fields = {k: _decode(v) for k, v in value.items() if not k.startswith("@")}
    out = record(**fields)
    out.__dict__["model_fields_set"] = frozenset(value["@set"])
    if "@extra" in value:
        out.__dict__["model_extra"] = _decode(value["@extra"])
    return out
