"""Finding plugins: the entry points of the `memsift.*` groups, memsift's own first.

A lookup by name reads memsift's own entry points (about a millisecond), and scans every installed
distribution only for a name that is not memsift's own, or to list them all. A plugin that fails
to import (an exception, `sys.exit`, an import that hangs past `$MEMSIFT_PLUGIN_IMPORT_TIMEOUT`
seconds), or names something that is not a plugin, is recorded with its error and never stops
the others (nor the built-ins) from loading; what it prints at import goes to stderr.

A package whose import hung is remembered (`$XDG_CACHE_HOME/memsift/plugin-imports.json`, by
package, version and entry point), so that `status` and `plugins` do not pay its whole bound on
every call: it is tried again once its version changes, or with a longer
`$MEMSIFT_PLUGIN_IMPORT_TIMEOUT` than the one it hung under.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import json
import os
import re
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Iterator

from ..errors import ConfigError
from . import GROUPS, BackendPlugin, ProviderPlugin, RerankerPlugin

__all__ = [
    "Found",
    "installed",
    "load",
    "names",
    "check_name",
    "backend",
    "describe_unknown",
    "origin",
    "OWN_DISTRIBUTION",
]

OWN_DISTRIBUTION = "memsift"
DEFAULT_IMPORT_TIMEOUT_S = 10.0
_IMPORT_LOCK = threading.Lock()  # one plugin import at a time: stdout is redirected process-wide meanwhile
_KINDS: dict[str, Any] = {"backend": BackendPlugin, "provider": ProviderPlugin, "reranker": RerankerPlugin}
_KEY_PATHS = {
    "backend": "memory.backend",
    "provider": "memorySearch.provider",
    "reranker": "memorySearch.query.rerank.provider",
}


@dataclass
class Found:
    """One entry point of a memsift group, loaded or not."""

    kind: str  # backend, provider, reranker
    name: str
    target: str  # module:attribute
    package: str
    version: str
    builtin: bool  # registered by memsift itself
    plugin: Any = None
    error: str | None = None  # why it could not be loaded
    shadowed_by: str | None = None  # another package registered the same name first

    @property
    def loaded(self) -> bool:
        return self.plugin is not None

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "package": self.package, "version": self.version,
                "builtin": self.builtin, "target": self.target, "ok": self.error is None and self.shadowed_by is None,
                "error": self.error, "shadowedBy": self.shadowed_by,
                "description": getattr(self.plugin, "description", "") or None}


_loaded: dict[tuple[str, str], Found] = {}  # (kind, name) → what loading it gave, once per process


@functools.cache
def _own() -> metadata.Distribution | None:
    try:
        return metadata.distribution(OWN_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None


@functools.cache
def _name_and_version(dist: metadata.Distribution) -> tuple[str, str]:
    """A distribution's name and version from one read of its METADATA (each `dist.metadata` or
    `dist.version` parses it again: memsift's, which holds the README, 15 times a cold search)."""
    meta = dist.metadata
    return meta["Name"] or "?", meta["Version"] or "?"


@functools.cache
def _entry_points(dist: metadata.Distribution) -> tuple[metadata.EntryPoint, ...]:
    return tuple(dist.entry_points)


def _points(dist: metadata.Distribution, kind: str, *, builtin: bool) -> Iterator[Found]:
    group = GROUPS[kind]
    for ep in _entry_points(dist):
        if ep.group == group:
            yield Found(kind, ep.name, ep.value, *_name_and_version(dist), builtin)


_scanned: dict[str, list[Found]] = {}  # kind → every entry point, once per process (installs need a restart)


def _all_points(kind: str) -> list[Found]:
    if kind not in _scanned:
        _scanned[kind] = _scan(kind)
    return _scanned[kind]


def _dist_name(dist: metadata.Distribution) -> str:
    """A distribution's normalised name: from its folder's name where it has one (`memsift_lancedb-
    0.1.0.dist-info`; reading its METADATA parses a mail header, a few ms a package, and even
    importlib's own `_normalized_name` costs ~7 ms over a hundred packages)."""
    folder = os.path.basename(str(getattr(dist, "_path", "")))
    if folder.endswith((".dist-info", ".egg-info")):
        name = folder.rpartition(".")[0].partition("-")[0]
    else:
        name = getattr(dist, "_normalized_name", None) or dist.metadata["Name"] or ""
    return re.sub(r"[-_.]+", "-", name).lower()


_MARKERS = tuple(f"[{group}]" for group in GROUPS.values())


@functools.cache
def _plugin_dists() -> tuple[metadata.Distribution, ...]:
    """Other installed distributions that declare a memsift entry point, once per process (an
    install needs a restart): each one's entry_points.txt is read, no other file."""
    seen: set[str] = {OWN_DISTRIBUTION}
    out: list[metadata.Distribution] = []
    for dist in metadata.distributions():
        name = _dist_name(dist)
        if name in seen:  # the same distribution twice on sys.path: the first one counts
            continue
        seen.add(name)
        declared = dist.read_text("entry_points.txt") or ""
        if any(marker in declared for marker in _MARKERS):
            out.append(dist)
    return tuple(out)


def _scan(kind: str) -> list[Found]:
    """Every entry point of the group: memsift's own first, then other packages by name; a name
    registered twice is kept once (the first), the others marked as shadowed."""
    own = _own()
    found = list(_points(own, kind, builtin=True)) if own else []
    if os.environ.get("MEMSIFT_NO_PLUGINS"):  # memsift's own only: a broken package set aside, or a clean demo
        return found
    others = [f for dist in _plugin_dists() for f in _points(dist, kind, builtin=False)]
    taken: dict[str, Found] = {f.name: f for f in found}
    for f in sorted(others, key=lambda f: (f.package.lower(), f.name)):
        if f.name in taken:
            f.shadowed_by = taken[f.name].package
        else:
            taken[f.name] = f
        found.append(f)
    return found


def import_timeout() -> float:
    """How long another package's plugin may take to import (`$MEMSIFT_PLUGIN_IMPORT_TIMEOUT`, s)."""
    try:
        return max(0.1, float(os.environ.get("MEMSIFT_PLUGIN_IMPORT_TIMEOUT", DEFAULT_IMPORT_TIMEOUT_S)))
    except ValueError:
        return DEFAULT_IMPORT_TIMEOUT_S


def _verdicts_path() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "memsift" / "plugin-imports.json"


def _verdict_key(found: Found) -> str:
    return f"{found.package}=={found.version} {found.target}"


def _read_verdicts() -> dict[str, Any]:
    try:
        data = json.loads(_verdicts_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _remembered_hang(found: Found, limit: float) -> str | None:
    """The error of an import of this very package version that hung under a bound at least this long."""
    seen = _read_verdicts().get(_verdict_key(found))
    if not isinstance(seen, dict) or not isinstance(seen.get("limit"), (int, float)) or seen["limit"] < limit:
        return None
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(float(seen.get("at") or 0)))
    return (f"{seen.get('error')}; remembered from {when}, not tried again until {found.package} changes version "
            f"(or with a longer $MEMSIFT_PLUGIN_IMPORT_TIMEOUT; the record: {_verdicts_path()})")


def _remember_hang(found: Found, limit: float, error: str) -> None:
    """Best effort: a cache folder that cannot be written only means the next call waits again."""
    path = _verdicts_path()
    verdicts = _read_verdicts()
    verdicts[_verdict_key(found)] = {"error": error, "limit": limit, "at": time.time()}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".plugin-imports.")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(dict(list(verdicts.items())[-200:]), fh)  # bounded: the newest 200 packages
        os.replace(tmp, path)
    except OSError:
        pass


def _import_guarded(found: Found) -> tuple[Any, str | None]:
    """Import another package's entry point so that nothing it does at import stops memsift: any
    exception, `sys.exit` included (a keyboard interrupt excepted), is its error; what it prints goes
    to stderr, never into `--json` on stdout; one that does not finish in time is left behind."""
    point = metadata.EntryPoint(found.name, found.target, GROUPS[found.kind])
    got: dict[str, Any] = {}

    def run() -> None:
        try:
            got["value"] = point.load()
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001  (SystemExit too: a plugin never ends memsift)
            got["error"] = f"{type(exc).__name__}: {exc}"

    limit = import_timeout()
    remembered = _remembered_hang(found, limit)
    if remembered is not None:
        return None, remembered
    with _IMPORT_LOCK, contextlib.redirect_stdout(sys.stderr):
        worker = threading.Thread(target=run, name=f"memsift-plugin-import-{found.name}", daemon=True)
        worker.start()
        worker.join(limit)
    if worker.is_alive():
        error = f"importing {found.target} did not finish within {limit:g} s (it hangs at import)"
        _remember_hang(found, limit, error)
        return None, error
    return got.get("value"), got.get("error")


def _load(found: Found) -> Found:
    key = (found.kind, found.name)
    if found.shadowed_by is None and key in _loaded:
        return _loaded[key]
    if found.builtin:
        value, found.error = metadata.EntryPoint(found.name, found.target, GROUPS[found.kind]).load(), None
    else:
        value, found.error = _import_guarded(found)
    if found.error is None:
        cls = _KINDS[found.kind]
        if not isinstance(value, cls):
            found.error = f"{found.target} is a {type(value).__name__}, not a memsift.engine.plugins.{cls.__name__}"
        elif value.name != found.name:
            found.error = f"entry point {found.name!r} names a plugin called {value.name!r}"
        else:
            found.plugin = value
    if found.shadowed_by is None:
        _loaded[key] = found
    return found


def installed(kind: str, *, load_all: bool = True) -> list[Found]:
    """Every registered plugin of a kind, loaded (with the error of each that fails)."""
    points = _all_points(kind)
    return [_load(f) if load_all and f.shadowed_by is None else f for f in points]


def names(kind: str) -> list[str]:
    """The names a config may use for this kind (entry points not yet imported)."""
    return [f.name for f in _all_points(kind) if f.shadowed_by is None]


_own_names: dict[str, frozenset[str]] = {}


def check_name(kind: str, name: str) -> None:
    """ValueError (with the installed names and a "did you mean") unless `name` is registered;
    memsift's own names are checked without scanning the installed packages."""
    if kind not in _own_names:
        own = _own()
        _own_names[kind] = frozenset(f.name for f in _points(own, kind, builtin=True)) if own else frozenset()
    if name in _own_names[kind]:
        return
    known = names(kind)
    if name not in known:
        raise ValueError(describe_unknown(kind, name, known))


def describe_unknown(kind: str, name: str, known: list[str]) -> str:
    hint = difflib.get_close_matches(name, known, n=1)
    did = f" (did you mean {hint[0]!r}?)" if hint else ""
    return f"unknown {kind} {name!r}{did}; installed: {', '.join(known) or 'none'}"


def load(kind: str, name: str) -> Any:
    """The plugin registered under `name`: memsift's own entry points are read first, every
    installed package's only when the name is not among them. ConfigError (with the installed
    names, or the plugin's import error and the fix) when there is none to use."""
    key = (kind, name)
    if key in _loaded and _loaded[key].plugin is not None:
        return _loaded[key].plugin
    own = _own()
    point = next((f for f in _points(own, kind, builtin=True) if f.name == name), None) if own else None
    if point is None:
        everything = _all_points(kind)
        point = next((f for f in everything if f.name == name and f.shadowed_by is None), None)
        if point is None:
            raise ConfigError(describe_unknown(kind, name, [f.name for f in everything if f.shadowed_by is None]),
                              key_path=_KEY_PATHS[kind])
    found = _load(point)
    if found.plugin is None:
        raise ConfigError(
            f"the {kind} {name!r} (package {found.package} {found.version}) failed to load: {found.error}; "
            f"reinstall or remove that package (`memsift plugins` lists what is installed)",
            key_path=_KEY_PATHS[kind],
        )
    return found.plugin


def backend(name: str) -> BackendPlugin:
    return load("backend", name)


def origin(kind: str, name: str) -> Found | None:
    """Where a loaded plugin came from (its package and version)."""
    return _loaded.get((kind, name))
