"""What the CLI prints and how it exits, shared by the cold CLI and the resident server (which
answers a CLI search with exactly what the CLI would have printed).

Exit codes: 0 success (also no hits, also a scope denial, which the answer states), 1 unexpected
error, 2 usage (a bad option), 3 config error, 4 index unusable, 5 embedding provider error, 6 path
not allowed, 7 backend unavailable with no fallback allowed, 8 the command's time budget ran out.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import (
    BackendError,
    CommandTimeout,
    ConfigError,
    IndexUnusableError,
    MemsiftError,
    PathNotAllowedError,
    ProviderError,
)
from ..secrets import redact

__all__ = ["EXIT_CODES", "EXIT_MEANINGS", "exit_code", "json_text", "search_output"]

EXIT_CODES = {
    "ok": 0,
    "error": 1,
    "usage": 2,
    "config": 3,
    "index": 4,
    "provider": 5,
    "path": 6,
    "backend": 7,
    "timeout": 8,
}
# What each exit code tells a script (the CLI reference is made from this).
EXIT_MEANINGS = {
    0: "success, also when nothing matched, and for a scope denial (the answer states it)",
    1: "unexpected error: a bug, said in one line; its traceback is kept in `<state folder>/crashes/` (printed "
       "with -v)",
    2: "usage: a bad option or value",
    3: "config error, or memory search disabled for the agent",
    4: "index unusable (another program's file at the index path, a disk that cannot be written)",
    5: "embedding provider error (no key, quota, outage) where no fallback applies; from `index`, also when the notes "
       "were indexed for keyword search but their vectors could not be made (the next `index` makes them)",
    6: "path not allowed: not a memory file",
    7: "backend unavailable (QMD or Postgres) and its fallback is `none`",
    8: "gave up: the command's time budget ran out (memory.limits, --timeout), or `index` saw nothing move for "
       "memory.limits.stall",
}


def exit_code(exc: MemsiftError) -> int:
    if isinstance(exc, ConfigError):
        return EXIT_CODES["config"]
    if isinstance(exc, IndexUnusableError):
        return EXIT_CODES["index"]
    if isinstance(exc, ProviderError):
        return EXIT_CODES["provider"]
    if isinstance(exc, PathNotAllowedError):
        return EXIT_CODES["path"]
    if isinstance(exc, BackendError):  # QMD or Postgres cannot serve and no fallback may: as search says
        return EXIT_CODES["backend"]
    if isinstance(exc, CommandTimeout):
        return EXIT_CODES["timeout"]
    return EXIT_CODES["error"]


def json_text(data: Any) -> str:
    """Every document the CLI prints; masked once more on the way out (keys, header values). Escaped
    to ASCII where stdout cannot write every character, so the document stays valid JSON there."""
    from .streams import writes_unicode  # noqa: PLC0415

    return redact(json.dumps(data, ensure_ascii=not writes_unicode(), indent=2))


def search_output(answer: Any, *, as_json: bool, explain: bool) -> tuple[str, str, int]:
    """What `memsift search` prints: (stdout, stderr, exit code)."""
    from .render import render_answer  # noqa: PLC0415

    if answer.unavailable:
        # An outage is not "no results": nothing on stdout in text (a script reading it must not see
        # an empty answer), the JSON document (it says `unavailable`), exit 7 either way.
        out = json_text(answer.to_json_dict()) + "\n" if as_json else ""
        hint = (
            f' (memory.{answer.backend}.fallback is "none": no fallback answers)'
            if answer.backend in ("qmd", "postgres")
            else ""
        )
        return out, redact(f"memsift: {answer.unavailable}{hint}\n"), EXIT_CODES["backend"]
    out = json_text(answer.to_json_dict()) if as_json else redact(render_answer(answer, explain=explain))
    return out + "\n", "", EXIT_CODES["ok"]
