"""Finding plugins: the entry points of the `memsift.*` groups, memsift's own first.

A lookup by name reads memsift's own entry points (its `entry_points.txt`, without
`importlib.metadata`: about a millisecond), and scans every installed distribution only for a
name that is not memsift's own, or to list them all. A plugin that fails
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
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from ..errors import ConfigError
from . import GROUPS, BackendPlugin, ProviderPlugin, RerankerPlugin

if TYPE_CHECKING:
    from importlib import metadata

__all__ = [
    "Found",
    "installed",
    "load",
    "names",
    "check_name",
    "backend",
    "describe_unknown",
    "origin",
    "own_version",
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


class _Point:
    """An entry point as `entry_points.txt` names it (what `_points` reads of one)."""

    __slots__ = ("group", "name", "value")

    def __init__(self, group: str, name: str, value: str) -> None:
        self.group, self.name, self.value = group, name, value


class _OwnDistribution:
    """memsift's own installed metadata, read from its `.dist-info` folder directly: a lookup of
    one of memsift's own names is every cold command's, and `importlib.metadata` imports the email
    package (~6 ms) to read the two small files this reads. Only what the registry asks of a
    distribution: `metadata["Name"]`, `metadata["Version"]` and `entry_points`."""

    def __init__(self, folder: str) -> None:
        version = os.path.basename(folder)[len(OWN_DISTRIBUTION) + 1: -len(".dist-info")]
        self.metadata = {"Name": OWN_DISTRIBUTION, "Version": version}
        self.entry_points: list[_Point] = []
        group = ""
        with open(os.path.join(folder, "entry_points.txt"), encoding="utf-8") as lines:
            for raw in lines:
                line = raw.strip()
                if not line or line.startswith(("#", ";")):
                    continue
                if line.startswith("[") and line.endswith("]"):
                    group = line[1:-1].strip()
                elif "=" in line and group:
                    name, _, value = line.partition("=")
                    self.entry_points.append(_Point(group, name.strip(), value.strip()))


def _own_folder() -> str | None:
    """The first `memsift-<version>.dist-info` on sys.path, as `importlib.metadata` would find it."""
    prefix = OWN_DISTRIBUTION + "-"
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if name.startswith(prefix) and name.endswith(".dist-info") and "-" not in name[len(prefix): -10]:
                folder = os.path.join(entry or ".", name)
                if os.path.isfile(os.path.join(folder, "entry_points.txt")):
                    return folder
    return None


@functools.cache
def _own() -> Any:
    folder = _own_folder()
    if folder is not None:
        try:
            return _OwnDistribution(folder)
        except (OSError, UnicodeDecodeError):
            pass  # importlib.metadata says what is wrong with it
    from importlib import metadata  # noqa: PLC0415

    try:
        return metadata.distribution(OWN_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None


def own_version() -> str | None:
    """The installed memsift's version (None when memsift is not installed)."""
    own = _own()
    return _name_and_version(own)[1] if own is not None else None


@functools.cache
def _name_and_version(dist: Any) -> tuple[str, str]:
    """A distribution's name and version from one read of its METADATA (each `dist.metadata` or
    `dist.version` parses it again: memsift's, which holds the README, 15 times a cold search)."""
    meta = dist.metadata
    return meta["Name"] or "?", meta["Version"] or "?"


@functools.cache
def _entry_points(dist: Any) -> tuple[Any, ...]:
    return tuple(dist.entry_points)


def _points(dist: Any, kind: str, *, builtin: bool) -> Iterator[Found]:
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
    from importlib import metadata  # noqa: PLC0415  (every installed package: a listing, or another's name)

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


def _verdicts_path() -> Path | None:
    from ..private_dirs import user_cache_path  # noqa: PLC0415

    base = user_cache_path(os.environ)
    return Path(base) / "memsift" / "plugin-imports.json" if base is not None else None


def _verdict_key(found: Found) -> str:
    return f"{found.package}=={found.version} {found.target}"


def _read_verdicts() -> dict[str, Any]:
    path = _verdicts_path()
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
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
    if path is None:  # no home folder known: not remembered
        return
    verdicts = _read_verdicts()
    verdicts[_verdict_key(found)] = {"error": error, "limit": limit, "at": time.time()}
    try:
        import tempfile  # noqa: PLC0415

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
    got: dict[str, Any] = {}

    def run() -> None:
        try:
            got["value"] = _load_target(found.target)
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


def _load_target(target: str) -> Any:
    """What an entry point's `module:attribute` names (as `EntryPoint.load` reads it)."""
    import importlib  # noqa: PLC0415

    module, _, attribute = target.split("[", 1)[0].partition(":")  # `[extras]` name no object
    value = importlib.import_module(module.strip())
    for part in filter(None, attribute.strip().split(".")):
        value = getattr(value, part)
    return value


def _load(found: Found) -> Found:
    key = (found.kind, found.name)
    if found.shadowed_by is None and key in _loaded:
        return _loaded[key]
    if found.builtin:
        value, found.error = _load_target(found.target), None
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
