"""The requests every door builds: search, read and status, defined and validated once.

The cold CLI, the CLI answered by the resident helper or `watch` (the same arguments, parsed
again by the server), the MCP server (stdio, HTTP) and the Python API each translate their own
syntax into one of these models and render the one answer; none names a manager's keyword
arguments itself. A new option is a field here, with its CLI flag and MCP name in the field's
metadata: it reaches the click options (`cli/options.py`), the MCP tool schemas (`mcp/tools.py`)
and the `SearchRequest` below the door (`SearchOptions.resolve`) at once.

Validation happens here only: an unknown mode, a date that is no date, a number out of range or
an empty session key is an `InvalidRequest` naming the option as each door spells it; the CLI
exits 2 with it, MCP answers it as an error value, the Python API raises it (a ValueError).
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

__all__ = ["InvalidRequest", "SearchOptions", "ReadOptions", "StatusOptions", "MAX_RESULTS_LIMIT", "door_name",
           "check_session_key", "run_read", "run_status", "spellings"]

MAX_RESULTS_LIMIT = 100  # hits one search may ask for, on every door (the candidate pool is 200)

TimeBound = str | date | datetime | float | None


class InvalidRequest(ValueError):
    """A request no door may run: `field` is the model's field, `problem` says why, in words."""

    def __init__(self, field: str, problem: str, *, spelled: str | None = None) -> None:
        super().__init__(f"{spelled or field}: {problem}")
        self.field, self.problem = field, problem


def _spec(description: str, *, cli: tuple[str, ...] = (), mcp: str | None = None, **kw: Any) -> Any:
    """A field with how each door spells it: `cli` flags (first is the long one), `mcp` name."""
    return Field(description=description, json_schema_extra={"cli": list(cli), "mcp": mcp}, **kw)


def spellings(model: type[BaseModel], field: str) -> dict[str, Any]:
    """How the doors spell a field: {"cli": [flags], "mcp": name}."""
    extra = model.model_fields[field].json_schema_extra
    return extra if isinstance(extra, dict) else {}


def door_name(model: type[BaseModel], field: str, door: str) -> str:
    """How a door spells a field (`--max-results`, `maxResults`), for messages."""
    extra = spellings(model, field)
    spelled = extra.get("cli") if door == "cli" else extra.get("mcp")
    if door == "cli":
        return spelled[0] if spelled else field.replace("_", "-")
    return spelled or field


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    @classmethod
    def build(cls, door: str = "api", **values: Any) -> Any:
        """The request, or InvalidRequest naming the first bad option as `door` spells it. None
        means "not given": the field's default applies."""
        try:
            return cls(**{k: v for k, v in values.items() if v is not None})
        except ValidationError as exc:
            err = exc.errors()[0]
            field = str(err["loc"][0]) if err.get("loc") else "request"
            message = str(err.get("msg", "invalid")).removeprefix("Value error, ")
            if (
                "input" in err
                and err.get("type") not in ("value_error", "missing")
                and not isinstance(err["input"], (dict, list))
            ):
                message += f" (got {err['input']!r})"
            spelled = door_name(cls, field, door) if field in cls.model_fields else field
            raise InvalidRequest(field, message, spelled=spelled) from None


def _session_key(value: str | None) -> str | None:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise ValueError(
            "is empty (an unset shell variable?); pass the chat's session key, or leave it out for a local caller"
        )
    return value


class SearchOptions(_Request):
    """One search, as every door asks for it."""

    query: str = _spec("What to recall, in natural language or keywords.", mcp="query")
    max_results: int | None = _spec("Most hits to return (default query.maxResults, 6).", cli=("--max-results", "-n"),
                                    mcp="maxResults", default=None, ge=1, le=MAX_RESULTS_LIMIT)
    min_score: float | None = _spec("Lowest score to keep (default query.minScore, 0.35).", cli=("--min-score",),
                                    mcp="minScore", default=None, ge=0, le=1)
    session_key: str | None = _spec("The asking chat's session key: scope rules, and citations in auto mode.",
                                    cli=("--session-key",), mcp="sessionKey", default=None)
    explain: bool = _spec("Show how each hit's score was made.", cli=("--explain",), default=False)
    mode: str | None = _spec(
        "Retrieval for this search: auto (as configured), hybrid, keyword (BM25 only: exact words, "
        "names, identifiers) or vector (meaning).",
        cli=("--mode", "-m"),
        mcp="mode",
        default=None,
    )
    since: TimeBound = _spec('Only hits of this day or later: YYYY-MM-DD or a phrase ("last week", "last March", '
                             '"3 days ago"; a phrase from its first day).',
                             cli=("--since",), mcp="since", default=None)
    until: TimeBound = _spec("Only hits of this day or earlier (same forms as since; a phrase to its last day).",
                             cli=("--until",), mcp="until",
                             default=None)
    corpus: str | None = _spec("Which memory to search: memory (the memory files), sessions (indexed chat "
                               "transcripts) or all (default: every configured source).", cli=("--corpus",),
                               mcp="corpus", default=None)

    MODES: ClassVar[tuple[str, ...]] = ("auto", "hybrid", "keyword", "vector")
    CORPORA: ClassVar[tuple[str, ...]] = ("memory", "sessions", "all")

    _session = field_validator("session_key")(classmethod(lambda cls, v: _session_key(v)))

    @field_validator("query", mode="before")
    @classmethod
    def _query(cls, value: Any) -> str:
        if not isinstance(value, str):
            raise ValueError("must be text")
        return value

    @field_validator("corpus")
    @classmethod
    def _corpus(cls, value: str | None) -> str | None:
        if value is not None and value not in cls.CORPORA:
            raise ValueError(f"must be one of {', '.join(cls.CORPORA)}")
        return value

    @field_validator("mode")
    @classmethod
    def _mode(cls, value: str | None) -> str | None:
        from .search.modes import parse_search_mode  # noqa: PLC0415

        return None if value is None else parse_search_mode(value)

    def resolve(self, config: Any, *, door: str = "api", now: float | None = None, candidates: int | None = None,
                scope: Any = None) -> Any:
        """The `SearchRequest` every stage and backend takes, read once with the configured hemisphere
        and clock (`config`: the query config; `now`: POSIX seconds, default the clock): a since
        or until that is no date is an InvalidRequest naming it as `door` spells it."""
        from .search.request import SearchRequest  # noqa: PLC0415
        from .search.time_query import BadTimeBound  # noqa: PLC0415

        try:
            return SearchRequest.parse(self.query, config, max_results=self.max_results, min_score=self.min_score,
                                       mode=self.mode, since=self.since, until=self.until, now=now,
                                       session_key=self.session_key, explain=self.explain, candidates=candidates,
                                       scope=scope, corpus=self.corpus)
        except BadTimeBound as exc:
            raise InvalidRequest(exc.bound, str(exc), spelled=door_name(SearchOptions, exc.bound, door)) from None


class ReadOptions(_Request):
    """One `memory_get`: a path (or a hit's header or citation) and an optional range."""

    path: str = _spec("A memory file as search names it; a hit's header (memory/2026-03-02.md:5-8) or citation "
                      "(memory/2026-03-02.md#L5-L8) works too.", mcp="path")
    from_line: int | None = _spec("First line, 1-based.", cli=("--from",), mcp="from", default=None, ge=1)
    lines: int | None = _spec(
        "How many lines (default: to the end).", cli=("--lines",), mcp="lines", default=None, ge=1
    )
    offset: int = _spec("Characters (UTF-16 units) of the first line to skip: continues a line a page cut.",
                        cli=("--offset",), mcp="offset", default=0, ge=0)
    max_chars: int | None = _spec("Return at most this many characters.", cli=("--max-chars",), default=None, ge=1)
    session_key: str | None = _spec("The asking chat's session key, for scope rules.", cli=("--session-key",),
                                    mcp="sessionKey", default=None)

    _session = field_validator("session_key")(classmethod(lambda cls, v: _session_key(v)))

    def target(self) -> tuple[str, int | None, int | None]:
        """(path, first line, line count): a header or citation's range unless from/lines are given."""
        from .search.citations import parse_memory_ref  # noqa: PLC0415

        path, ref_from, ref_lines = parse_memory_ref(self.path)
        return path, self.from_line or ref_from, self.lines or ref_lines


class StatusOptions(_Request):
    deep: bool = _spec("Also probe the embedding provider and check the database.", cli=("--deep",), mcp="deep",
                       default=False)
    session_key: str | None = _spec("The asking chat's session key, for scope rules.", cli=("--session-key",),
                                    mcp="sessionKey", default=None)

    _session = field_validator("session_key")(classmethod(lambda cls, v: _session_key(v)))


def check_session_key(value: str | None) -> str | None:
    """A session key as every door accepts it: None (a local caller) or a key; never an empty one."""
    try:
        return _session_key(value)
    except ValueError as exc:
        raise InvalidRequest("session_key", str(exc)) from None


async def run_read(manager: Any, options: ReadOptions, *, max_chars: int | None = None) -> Any:
    """The one read call of every door; `max_chars`: the door's own bound when the request sets none."""
    path, from_line, lines = options.target()
    return await manager.read(path, from_line, lines, session_key=options.session_key,
                              max_chars=options.max_chars or max_chars, offset=options.offset)


async def run_status(manager: Any, options: StatusOptions) -> Any:
    return await manager.status(deep=options.deep, session_key=options.session_key)
