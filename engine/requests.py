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

from .records import Record, spec

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
    """A field with how each door spells it: `cli` flags (first is the long one), `mcp` name;
    `kind` (int, float, bool, str, "time") and the bounds `ge`, `le` are checked when it is built."""
    return spec(description=description, cli=list(cli), mcp=mcp, **kw)


def spellings(model: type[Record], field: str) -> dict[str, Any]:
    """How the doors spell a field: {"cli": [flags], "mcp": name}."""
    extra = model.model_fields[field].extra
    return {"cli": extra.get("cli") or [], "mcp": extra.get("mcp")}


def door_name(model: type[Record], field: str, door: str) -> str:
    """How a door spells a field (`--max-results`, `maxResults`), for messages."""
    extra = spellings(model, field)
    spelled = extra.get("cli") if door == "cli" else extra.get("mcp")
    if door == "cli":
        return spelled[0] if spelled else field.replace("_", "-")
    return spelled or field


class _Bad(Exception):
    """A value a field refuses: the words, and whether the value is worth echoing (`(got 0)`)."""

    def __init__(self, problem: str, *, echo: bool = True) -> None:
        super().__init__(problem)
        self.problem, self.echo = problem, echo


_NUMBERS: dict[str, tuple[Any, str, str]] = {"int": (int, "integer", "an integer"),
                                              "float": (float, "number", "a number")}
_TRUE = {"1", "on", "t", "true", "y", "yes"}
_FALSE = {"0", "off", "f", "false", "n", "no"}


def _as_kind(value: Any, kind: str) -> Any:
    """`value` as a field of `kind` takes it: the conversions JSON and the Python API need
    (a whole float as an int, "5" as 5, "true" as True), and nothing looser."""
    if kind == "str":
        if isinstance(value, str):
            return value
        raise _Bad("Input should be a valid string")
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, (int, float)) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        raise _Bad("Input should be a valid boolean")
    if kind in _NUMBERS:
        make, words, one = _NUMBERS[kind]
        if isinstance(value, (int, float)) and (kind == "float" or float(value).is_integer()):
            return make(value)
        if isinstance(value, str):
            try:
                return make(value.strip())
            except ValueError:
                raise _Bad(f"Input should be a valid {words}, unable to parse string as {one}") from None
        raise _Bad(f"Input should be a valid {words}")
    if kind == "time":  # a date, a phrase or POSIX seconds: read later, with the configured clock
        if isinstance(value, str):
            return value.strip()  # blank: no bound, as an empty value is
        if isinstance(value, date):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):  # True is no second 1
            return float(value)
        raise _Bad("Input should be a date, a phrase or a number of seconds")
    return value


class _Request(Record, frozen=True):
    """A request: built by every door with `build`, checked field by field when it is made."""

    def _check(self) -> None:
        values = self.__dict__
        for field in type(self).record_fields():
            value = values[field.name]
            if value is None:
                continue
            try:
                checked = _as_kind(value, field.extra.get("kind", "any"))
                low, high = field.extra.get("ge"), field.extra.get("le")
                if low is not None and checked < low:
                    raise _Bad(f"Input should be greater than or equal to {low}")
                if high is not None and checked > high:
                    raise _Bad(f"Input should be less than or equal to {high}")
                validate = getattr(self, f"_check_{field.name}", None)
                if validate is not None:
                    try:
                        checked = validate(checked)
                    except ValueError as exc:
                        raise _Bad(str(exc), echo=False) from None
            except _Bad as bad:
                problem = bad.problem
                if bad.echo and not isinstance(value, (dict, list)):
                    problem += f" (got {value!r})"
                raise InvalidRequest(field.name, problem) from None
            values[field.name] = checked

    @classmethod
    def build(cls, door: str = "api", **values: Any) -> Any:
        """The request, or InvalidRequest naming the first bad option as `door` spells it. None
        means "not given": the field's default applies."""
        given = {k: v for k, v in values.items() if v is not None}
        for key, value in given.items():
            if key not in cls.model_fields:
                problem = "Extra inputs are not permitted"
                if not isinstance(value, (dict, list)):
                    problem += f" (got {value!r})"
                raise InvalidRequest(key, problem, spelled=key)
        for field in cls.record_fields():
            if field.required and field.name not in given:
                raise InvalidRequest(field.name, "Field required", spelled=door_name(cls, field.name, door))
        try:
            return cls(**given)
        except InvalidRequest as exc:
            raise InvalidRequest(exc.field, exc.problem, spelled=door_name(cls, exc.field, door)) from None


def _session_key(value: str | None) -> str | None:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise ValueError(
            "is empty (an unset shell variable?); pass the chat's session key, or leave it out for a local caller"
        )
    return value


class SearchOptions(_Request, frozen=True):
    """One search, as every door asks for it."""

    query: str = _spec("What to recall, in natural language or keywords.", mcp="query", kind="any")
    max_results: int | None = _spec("Most hits to return (default query.maxResults, 6).", cli=("--max-results", "-n"),
                                    mcp="maxResults", default=None, kind="int", ge=1,
                                    le=MAX_RESULTS_LIMIT)
    min_score: float | None = _spec("Lowest score to keep (default query.minScore, 0.35).", cli=("--min-score",),
                                    mcp="minScore", default=None, kind="float", ge=0, le=1)
    session_key: str | None = _spec("The asking chat's session key: scope rules, and citations in auto mode.",
                                    cli=("--session-key",), mcp="sessionKey", default=None, kind="str")
    explain: bool = _spec("Show how each hit's score was made.", cli=("--explain",), default=False, kind="bool")
    mode: str | None = _spec(
        "Retrieval for this search: auto (as configured), hybrid, keyword (BM25 only: exact words, "
        "names, identifiers) or vector (meaning).",
        cli=("--mode", "-m"),
        mcp="mode",
        default=None,
        kind="str",
    )
    since: TimeBound = _spec('Only hits of this day or later: YYYY-MM-DD or a phrase ("last week", "last March", '
                             '"3 days ago"; a phrase from its first day).',
                             cli=("--since",), mcp="since", default=None, kind="time")
    until: TimeBound = _spec("Only hits of this day or earlier (same forms as since; a phrase to its last day).",
                             cli=("--until",), mcp="until", default=None, kind="time")
    corpus: str | None = _spec("Which memory to search: memory (the memory files), sessions (indexed chat "
                               "transcripts) or all (default: every configured source).", cli=("--corpus",),
                               mcp="corpus", default=None, kind="str")

    MODES: ClassVar[tuple[str, ...]] = ("auto", "hybrid", "keyword", "vector")
    CORPORA: ClassVar[tuple[str, ...]] = ("memory", "sessions", "all")

    _check_session_key = staticmethod(_session_key)

    @staticmethod
    def _check_query(value: Any) -> str:
        if not isinstance(value, str):
            raise ValueError("must be text")
        return value

    def _check_corpus(self, value: str) -> str:
        if value not in self.CORPORA:
            raise ValueError(f"must be one of {', '.join(self.CORPORA)}")
        return value

    @staticmethod
    def _check_mode(value: str) -> str:
        from .search.modes import parse_search_mode  # noqa: PLC0415

        return parse_search_mode(value)

    def resolve(self, config: Any, *, door: str = "api", now: float | None = None, candidates: int | None = None,
                scope: Any = None) -> Any:
        """The `SearchRequest` every stage and backend takes, read once with the configured hemisphere
        and clock (`config`: the query config; `now`: POSIX seconds, default the clock): a since
        or until that is no date is an InvalidRequest naming it as `door` spells it."""
        from .search.clock import check_now  # noqa: PLC0415
        from .search.request import SearchRequest  # noqa: PLC0415
        from .search.time_query import BadTimeBound  # noqa: PLC0415

        try:
            check_now(now)
        except ValueError as exc:
            raise InvalidRequest("now", str(exc)) from None
        try:
            return SearchRequest.parse(self.query, config, max_results=self.max_results, min_score=self.min_score,
                                       mode=self.mode, since=self.since, until=self.until, now=now,
                                       session_key=self.session_key, explain=self.explain, candidates=candidates,
                                       scope=scope, corpus=self.corpus)
        except BadTimeBound as exc:
            raise InvalidRequest(exc.bound, str(exc), spelled=door_name(SearchOptions, exc.bound, door)) from None


class ReadOptions(_Request, frozen=True):
    """One `memory_get`: a path (or a hit's header or citation) and an optional range."""

    path: str = _spec("A memory file as search names it; a hit's header (memory/2026-03-02.md:5-8) or citation "
                      "(memory/2026-03-02.md#L5-L8) works too.", mcp="path", kind="str")
    from_line: int | None = _spec("First line, 1-based.", cli=("--from",), mcp="from", default=None, kind="int", ge=1)
    lines: int | None = _spec(
        "How many lines (default: to the end).", cli=("--lines",), mcp="lines", default=None, kind="int", ge=1
    )
    offset: int = _spec("Characters (UTF-16 units) of the first line to skip: continues a line a page cut.",
                        cli=("--offset",), mcp="offset", default=0, kind="int", ge=0)
    max_chars: int | None = _spec("Return at most this many characters.", cli=("--max-chars",), default=None,
                                  kind="int", ge=1)
    session_key: str | None = _spec("The asking chat's session key, for scope rules.", cli=("--session-key",),
                                    mcp="sessionKey", default=None, kind="str")

    _check_session_key = staticmethod(_session_key)

    def target(self) -> tuple[str, int | None, int | None]:
        """(path, first line, line count): a header or citation's range unless from/lines are given."""
        from .search.citations import parse_memory_ref  # noqa: PLC0415

        path, ref_from, ref_lines = parse_memory_ref(self.path)
        return path, self.from_line or ref_from, self.lines or ref_lines


class StatusOptions(_Request, frozen=True):
    """One `memory_status`."""

    deep: bool = _spec("Also probe the embedding provider and check the database.", cli=("--deep",), mcp="deep",
                       default=False, kind="bool")
    session_key: str | None = _spec("The asking chat's session key, for scope rules.", cli=("--session-key",),
                                    mcp="sessionKey", default=None, kind="str")

    _check_session_key = staticmethod(_session_key)


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
