"""A config file composed the way OpenClaw composes `openclaw.json`: `$include` directives and
`${VAR}` references, so the file OpenClaw reads is the file memsift reads.

- `{"$include": "./agents.json5"}` replaces the object holding it with that file's contents; a
  list of files is deep-merged in order; keys beside `$include` are merged over the result.
- Paths are relative to the including file and must stay inside the top config file's folder
  (or a folder of `$OPENCLAW_INCLUDE_ROOTS`, absolute paths separated by `:`); at most 10
  levels deep, 2 MB a file, and at most 64 files and 8 MB read in all (a fan-out of 8 files 6
  levels deep is 300,000 reads: it is refused at the 65th, not read for minutes); a file that
  includes itself (directly or not) is an error.
- `${NAME}` in a string (upper-case names only) is the variable's value; `$${NAME}` is the text
  `${NAME}`. A variable that is unset or empty stays as written, and is reported.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Callable, Mapping

from ..errors import ConfigError

__all__ = ["resolve_includes", "substitute_env", "MAX_INCLUDE_DEPTH", "MAX_INCLUDE_BYTES", "MAX_INCLUDED_FILES",
           "MAX_INCLUDED_BYTES"]

MAX_INCLUDE_DEPTH = 10
MAX_INCLUDE_BYTES = 2 * 2**20  # one file
MAX_INCLUDED_FILES = 64  # files read in all (one file included twice counts twice: it is read twice)
MAX_INCLUDED_BYTES = 8 * 2**20  # bytes read in all
_VAR = re.compile(r"\$(\$?)\{([A-Z_][A-Z0-9_]*)\}")


def _merge(base: Any, top: Any) -> Any:
    if isinstance(base, dict) and isinstance(top, dict):
        out = dict(base)
        for key, value in top.items():
            out[key] = _merge(out[key], value) if key in out else value
        return out
    return top


def _roots(config_file: Path, env: Mapping[str, str]) -> list[Path]:
    roots = [Path(os.path.realpath(config_file.parent))]
    for raw in (env.get("OPENCLAW_INCLUDE_ROOTS") or "").split(os.pathsep):
        if raw.strip() and os.path.isabs(raw.strip()):
            roots.append(Path(os.path.realpath(raw.strip())))
    return roots


def resolve_includes(data: Any, *, config_file: Path, env: Mapping[str, str],
                     read: Callable[[Path, str], Any]) -> Any:
    """`data` with every `$include` replaced by what it names. `read(path, where)` parses one
    included file (JSON5, bounded) and raises ConfigError naming `where` when it cannot."""
    roots = _roots(config_file, env)
    total = {"files": 0, "bytes": 0}

    def count(target: Path, where: str) -> None:
        total["files"] += 1
        try:
            total["bytes"] += os.stat(target).st_size
        except OSError:
            pass  # read() says what is wrong with it
        if total["files"] > MAX_INCLUDED_FILES or total["bytes"] > MAX_INCLUDED_BYTES:
            raise ConfigError(
                f"{where}.$include: the includes read over {MAX_INCLUDED_FILES} files or "
                f"{MAX_INCLUDED_BYTES // 2**20} MB in all ({total['files']} files, {total['bytes']:,} bytes "
                "so far); include fewer files, or each once",
                key_path=where,
            )

    def include(spec: Any, holder: Path, where: str, chain: tuple[Path, ...]) -> Any:
        specs = spec if isinstance(spec, list) else [spec]
        if not specs or not all(isinstance(s, str) and s.strip() for s in specs):
            raise ConfigError(f"{where}.$include: a file path or a list of file paths (got {spec!r})", key_path=where)
        merged: Any = None
        for raw in specs:
            if "\x00" in raw or len(raw) >= 4096:
                raise ConfigError(f"{where}.$include: {raw[:80]!r} is not a usable path", key_path=where)
            target = Path(os.path.realpath(holder.parent / os.path.expanduser(raw)))
            if not any(target == r or r in target.parents for r in roots):
                raise ConfigError(f"{where}.$include: {raw!r} resolves to {target}, outside {roots[0]} (the config's "
                                  "folder); add its folder to $OPENCLAW_INCLUDE_ROOTS to allow it", key_path=where)
            if target in chain:
                raise ConfigError(
                    f"{where}.$include: {raw!r} includes itself ({' → '.join(p.name for p in (*chain, target))})",
                    key_path=where,
                )
            if len(chain) > MAX_INCLUDE_DEPTH:
                raise ConfigError(
                    f"{where}.$include: includes nest over {MAX_INCLUDE_DEPTH} levels deep", key_path=where
                )
            count(target, where)
            value = walk(read(target, f"{where}.$include ({raw})"), target, where, (*chain, target))
            merged = value if merged is None else _merge(merged, value)
        return merged

    def walk(value: Any, holder: Path, where: str, chain: tuple[Path, ...]) -> Any:
        if isinstance(value, dict):
            if "$include" in value:
                base = include(value["$include"], holder, where, chain)
                rest = {
                    k: walk(v, holder, f"{where}.{k}".lstrip("."), chain) for k, v in value.items() if k != "$include"
                }
                return _merge(base, rest) if rest else base
            return {k: walk(v, holder, f"{where}.{k}".lstrip("."), chain) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, holder, f"{where}[{i}]", chain) for i, v in enumerate(value)]
        return value

    return walk(data, Path(os.path.realpath(config_file)), "", (Path(os.path.realpath(config_file)),))


def substitute_env(data: Any, env: Mapping[str, str], *, where: str = "") -> tuple[Any, list[str]]:
    """`${NAME}` replaced in every string of `data`; returns it and the keys naming unset variables."""
    unset: list[str] = []

    def one(text: str, key: str) -> str:
        def sub(m: re.Match[str]) -> str:
            if m.group(1):  # `$${NAME}`: the text itself
                return "${" + m.group(2) + "}"
            value = env.get(m.group(2))
            if not value:
                unset.append(f"{key}: ${{{m.group(2)}}} is not set (left as written)")
                return m.group(0)
            return value

        return _VAR.sub(sub, text) if "${" in text else text

    def walk(value: Any, key: str) -> Any:
        if isinstance(value, str):
            return one(value, key)
        if isinstance(value, dict):
            return {k: walk(v, f"{key}.{k}".lstrip(".")) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, f"{key}[{i}]") for i, v in enumerate(value)]
        return value

    return walk(data, where), unset
