"""Where raw config comes from: built-in defaults, a JSON5 file, environment variables.

Each source returns a plain nested dict with the file's camelCase keys. `load.py` merges them in
the order given by `SOURCE_ORDER`; later sources win.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import stat
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import json5

from ..errors import ConfigError
from ..records import Record
from ..private_dirs import user_config_path
from .includes import resolve_includes, substitute_env
from .models import MemsiftConfig

__all__ = ["default_config_path", "read_config_file", "recording_reads", "env_overrides", "parse_json5",
           "nesting_depth", "ENV_PREFIX",
           "MAX_CONFIG_BYTES", "MAX_NESTING", "MEMSIFT_SECTIONS", "FOREIGN_SECTIONS"]

ENV_PREFIX = "MEMSIFT__"  # MEMSIFT__MEMORY__BACKEND=qmd, MEMSIFT__AGENTS__DEFAULTS__MEMORYSEARCH__PROVIDER=local
# A config file is a few KB; a whole reference (OpenClaw) config is well under this.
MAX_CONFIG_BYTES = 2**20

# The top-level keys memsift reads; every other top-level key of a file is OpenClaw's (or a
# stranger's) and is set aside, so a whole `openclaw.json` can be pointed at.
MEMSIFT_SECTIONS = ("agents", "memory", "memorySearch", "stateDir")
# Of OpenClaw's `models.providers`, the entries of memsift's remote embedding providers and, of each,
# what reaches the provider: its endpoint, key and headers (as OpenClaw's embedding adapters read them).
PROVIDER_ENDPOINT_IDS = ("openai", "gemini", "voyage", "mistral", "ollama")
_ENDPOINT_KEYS = ("baseUrl", "apiKey", "headers")
# OpenClaw's own sections (early 2026 and 2026.9): set aside quietly. Any other top-level key is
# set aside with a warning, or refused when it is a near miss of memsift's (`memroy`).
FOREIGN_SECTIONS = frozenset(
    {
        "$schema", "meta", "env", "wizard", "auth", "models", "channels", "gateway", "session",
        "tools", "plugins", "hooks", "skills", "ui", "logging", "messages", "commands", "browser",
        "cron", "diagnostics", "update", "talk", "discovery", "canvasHost", "bindings",
        "broadcast", "audio", "web", "approvals", "secrets", "acp", "nodeHost", "identity",
        # OpenClaw 2026.9
        "mcp", "telemetry", "accessGroups", "worktreeRoot", "worktreeAcceleration", "security", "attachments",
        "tts", "transcripts", "cloudWorkers", "desktop", "surfaces", "proxy", "multiAgent",
    }
)


def default_config_path(environ: Mapping[str, str] | None = None) -> Path | None:
    """`$MEMSIFT_CONFIG`, else `$XDG_CONFIG_HOME/memsift/config.json5` (~/.config by default); None
    where no home folder is known (HOME unset, an arbitrary uid): there is no default config then."""
    env = os.environ if environ is None else environ
    if env.get("MEMSIFT_CONFIG"):
        return Path(env["MEMSIFT_CONFIG"]).expanduser()
    base = user_config_path(env)
    return Path(base) / "memsift" / "config.json5" if base is not None else None


def _read_bounded(path: Path) -> bytes:
    """The file's bytes: a regular file only (a fifo, device or folder never blocks or streams
    forever), at most MAX_CONFIG_BYTES."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # O_NONBLOCK: opening a fifo never waits
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"config file {path} is not a regular file (a fifo, device or folder); "
                              "point --config at a JSON5 file")
        if st.st_size > MAX_CONFIG_BYTES:
            raise ConfigError(f"config file {path} is {st.st_size:,} bytes; the limit is {MAX_CONFIG_BYTES:,}")
        chunks, size = [], 0
        while size <= MAX_CONFIG_BYTES:
            data = os.read(fd, 65536)
            if not data:
                break
            chunks.append(data)
            size += len(data)
        if size > MAX_CONFIG_BYTES:  # it grew while being read
            raise ConfigError(f"config file {path} is over {MAX_CONFIG_BYTES:,} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


MAX_NESTING = 32  # a config nests under ten levels; the JSON5 parser recurses ~20 frames a level (50 overflow)


def nesting_depth(text: str) -> int:
    """How deep `{`/`[` nest in JSON5 text, strings and comments skipped (checked before parsing:
    the parser recurses, and 100 levels in 210 bytes ended in a RecursionError)."""
    depth = deepest = 0
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in "\"'":
            i += 1
            while i < n and text[i] != ch:
                i += 2 if text[i] == "\\" else 1
        elif text.startswith("//", i):
            i = text.find("\n", i)
            i = n if i < 0 else i
        elif text.startswith("/*", i):
            i = text.find("*/", i + 2)
            i = n if i < 0 else i + 1
        elif ch in "{[":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "}]":
            depth -= 1
        i += 1
    return deepest


def parse_json5(text: str, where: str) -> Any:
    """JSON5 → data, or a ConfigError that names `where` (the file, or the variable): too deep,
    a repeated key (the last would silently win), or a syntax error with its line and column."""
    depth = nesting_depth(text)
    if depth > MAX_NESTING:
        raise ConfigError(f"{where} nests {depth} levels deep (at most {MAX_NESTING}); a memsift config needs a few")
    try:
        return json5.loads(text, allow_duplicate_keys=False)
    except RecursionError:
        raise ConfigError(f"{where} nests too deeply to read") from None
    except ValueError as exc:
        message = str(exc).replace("<string>:", "line ")
        if message.startswith("Duplicate key"):
            message += " (the same key twice in one object: keep one)"
        raise ConfigError(f"{where} is not valid JSON5: {message}") from None


def read_config_file(path: Path, *, required: bool, environ: Mapping[str, str] | None = None,
                     notes: list[str] | None = None) -> dict[str, Any]:
    """The sections memsift reads from a JSON5 file: memsift's own config, or a whole OpenClaw
    config (its `$include`s and `${VAR}`s resolved as OpenClaw resolves them, includes.py; its
    other sections set aside). A missing optional file is an empty config. What was set aside or
    left unresolved is appended to `notes` as a sentence for the user."""
    env = os.environ if environ is None else environ
    notes = [] if notes is None else notes
    data = _parse_file(path, required=required)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold an object at the top level")
    if "$include" in data:  # a root include: the whole file is composed first
        data = _composed(data, path, env)
    kept: dict[str, Any] = {}
    for key, value in data.items():
        if key == "models" and isinstance(value, dict):
            kept[key] = value  # filtered once its includes are read
        elif key in MEMSIFT_SECTIONS or difflib.get_close_matches(str(key), MEMSIFT_SECTIONS, n=1, cutoff=0.8):
            kept[key] = value  # a near miss (`memroy`) stays, to be refused with a suggestion
        elif key not in FOREIGN_SECTIONS:
            notes.append(f"{path}: top-level key {key!r} is neither memsift's ({', '.join(MEMSIFT_SECTIONS)}) "
                         "nor OpenClaw's; it is ignored")
    kept = _composed(kept, path, env)
    if "models" in kept:  # the rest of OpenClaw's models (other providers, their models) is not read, nor said
        endpoints = _provider_endpoints(kept.pop("models"))
        kept.update({"models": {"providers": endpoints}} if endpoints else {})
    kept, unset = substitute_env(kept, env)
    notes.extend(f"{path}: {u}" for u in unset)
    return kept


def _provider_endpoints(models: Any) -> dict[str, Any]:
    providers = models.get("providers") if isinstance(models, dict) else None
    if not isinstance(providers, dict):
        return {}
    return {pid: {k: entry[k] for k in _ENDPOINT_KEYS if k in entry} for pid, entry in providers.items()
            if pid in PROVIDER_ENDPOINT_IDS and isinstance(entry, dict) and any(k in entry for k in _ENDPOINT_KEYS)}


_reads: list[tuple[list[tuple[Path, Any]], Callable[[Path], Any]]] = []  # open `recording_reads()`, innermost last


@contextlib.contextmanager
def recording_reads(signature: Callable[[Path], Any]) -> Iterator[list[tuple[Path, Any]]]:
    """The config files read (or looked for and missing) inside the block, includes too, each with
    `signature(path)` taken before it is read (so a file written meanwhile reads as changed next
    time): what a settings snapshot depends on (`snapshot.py`)."""
    seen: list[tuple[Path, Any]] = []
    entry = (seen, signature)
    _reads.append(entry)
    try:
        yield seen
    finally:
        _reads.remove(entry)


def _parse_file(path: Path, *, required: bool, what: str = "config file") -> Any:
    for seen, signature in _reads:
        seen.append((path, signature(path)))
    try:
        text = _read_bounded(path).decode("utf-8")
    except (FileNotFoundError, NotADirectoryError):  # NotADirectory: under HOME=/dev/null, as services set it
        if required:
            raise ConfigError(f"{what} not found: {path}") from None
        return None
    except UnicodeDecodeError as exc:  # Windows editors save UTF-16 (with a byte-order mark) or a code page
        raise ConfigError(
            f"cannot read {what} {path}: it is not UTF-8 (byte {exc.start} is {exc.object[exc.start]:#04x}); "
            "save it as UTF-8"
        ) from None
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    return parse_json5(text, f"{what} {path}") if text.strip() else {}


def _composed(data: dict[str, Any], path: Path, env: Mapping[str, str]) -> dict[str, Any]:
    if "$include" not in json.dumps(data, default=str):
        return data
    return resolve_includes(
        data,
        config_file=path,
        env=env,
        read=lambda target, where: _parse_file(target, required=True, what=f"the file included at {where}"),
    )


def _field_alias(model: type[Record], segment: str) -> tuple[str, Any] | None:
    """The camelCase key in `model` matching an upper-cased env segment, and its annotation."""
    want = segment.replace("_", "").lower()
    for field in model.record_fields(resolved=True):
        alias = field.alias or field.name
        if alias.replace("_", "").lower() == want:
            return alias, field.annotation
    return None


def _submodel(annotation: Any) -> type[Record] | None:
    candidates = [annotation, *getattr(annotation, "__args__", ())]
    for c in candidates:
        if isinstance(c, type) and issubclass(c, Record):
            return c
    return None


def _parse_env_value(raw: str, name: str) -> Any:
    """JSON5 when the value reads as JSON5 (`6`, `true`, `["a"]`), else the plain string."""
    if nesting_depth(raw) > MAX_NESTING:
        raise ConfigError(f"environment variable {name} nests {nesting_depth(raw)} levels deep (at most {MAX_NESTING})")
    try:
        return json5.loads(raw)
    except RecursionError:
        raise ConfigError(f"environment variable {name} nests too deeply to read") from None
    except ValueError:
        return raw


def env_overrides(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Nested overrides from `MEMSIFT__SECTION__KEY=value` variables (values parsed as JSON5)."""
    env = os.environ if environ is None else environ
    out: dict[str, Any] = {}
    for name in sorted(env):
        if not name.upper().startswith(ENV_PREFIX):
            continue
        segments = [s for s in name[len(ENV_PREFIX) :].split("__") if s]
        model: type[Record] | None = MemsiftConfig
        keys: list[str] = []
        for seg in segments:
            found = _field_alias(model, seg) if model else None
            if found is None:
                where = ".".join(keys) or "the top level"
                raise ConfigError(
                    f"environment variable {name}: no key {seg!r} under {where}", key_path=".".join(keys)
                )
            alias, annotation = found
            keys.append(alias)
            model = _submodel(annotation)
        node = out
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        node[keys[-1]] = _parse_env_value(env[name], name)
    return out
