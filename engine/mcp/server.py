"""The MCP server (`memsift mcp`): memory_search, memory_get and memory_status as read-only tools.

One manager serves every call; a background task keeps its index fresh (as `memsift watch`
does). The scope rules judge every call, memory_get and memory_status as memory_search, by the
server's `--session-key` or else the call's `sessionKey`. Expected outages (provider down, QMD
fallen back or down, scope denial, a path that is not a memory file) come back as values the
model can read, never as exceptions. Every answer is bounded by
`memory.qmd.limits.maxInjectedChars` (or `--max-chars`).

The MCP SDK (a default dependency) is imported only here and by the transports, after the handshake
(handshake.py, serving.py).
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any, Awaitable, Callable, Optional

from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.alias_generators import to_camel

from ..config import ResolvedConfig
from ..errors import CommandTimeout, MemsiftError, PathNotAllowedError
from ..manager import SearchManager
from ..results import Degraded, ManagerStatus, ScopeDenial, SearchAnswer
from ..compose.scoped import SHOWN_PATH_CHARS, scoped
from ..text import shorten, utf16_len, utf16_slice
from ..limits import budget_s, run_within
from ..requests import (
    InvalidRequest,
    ReadOptions,
    SearchOptions,
    StatusOptions,
    check_session_key,
    door_name,
    run_read,
    run_status,
)
from ..records.schema import model_of, pydantic_type
from ..search.citations import decorate_snippet
from .handshake import INSTRUCTIONS

__all__ = ["build_server", "tool_result", "MemoryServer", "SearchOutput", "GetOutput", "StatusOutput", "INSTRUCTIONS"]


SEARCH_DESCRIPTION = (
    "Mandatory recall step: search long-term memory (MEMORY.md, memory/*.md) before answering any "
    "question about prior work, decisions, dates, people, preferences or todos. Returns the best "
    "snippets with path, line range, score and a citation. An empty result is explained by the "
    "`denied`, `disabled`, `fallback` or `degraded` fields. Follow up with memory_get to read more lines."
)
GET_DESCRIPTION = (
    "Read a memory file found by memory_search (e.g. `memory/2026-03-02.md`), or only a line range: "
    "`from` is the first line (1-based), `lines` how many; a hit's citation (`memory/2026-03-02.md#L5-L8`) "
    "or header (`memory/2026-03-02.md:5-8`) works as the path too. Long files come back in pages: when "
    "`truncated` is true, call again with `from` = `nextFrom` (and `offset` = `nextOffset` when a long "
    "line was cut). Only memory files can be read, and the session transcripts memory_search cites "
    "(`sessions/<name>.jsonl`: their messages at the transcript's line numbers). Pass the chat's "
    "`sessionKey` as for memory_search."
)
STATUS_DESCRIPTION = (
    "Show the memory index's health: backend, files and chunks indexed, embedding provider, search "
    "mode, and anything degraded or fallen back. Call it when memory_search answers look wrong or empty."
)

_QUOTA = re.compile(r"insufficient_quota|quota|429", re.I)
# The answer's parts as pydantic models (engine/records/schema.py): the tools' output schemas are pydantic's.
_Denial = model_of(ScopeDenial)
_Degraded = model_of(Degraded)
_Status = model_of(ManagerStatus)


class _Out(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class MemoryHit(_Out):
    path: str
    start_line: int
    end_line: int
    score: float
    snippet: str
    source: str = "memory"
    citation: str | None = None
    rescued: bool | None = None  # under minScore, kept for its keyword match
    below_min_score: bool | None = None  # nothing reached minScore: one of the closest few, shown below it
    stale: bool | None = None  # the file changed after it was indexed


# What memory_search shows of a SearchAnswer: every field of the result model (a new one reaches
# MCP by itself) except the request's own echo and the internals below; every field optional,
# since an answer refused before any search (a bad argument, a timeout) has none of them.
_NOT_SHOWN = frozenset({"query", "min_score", "max_results", "relaxed", "pending_files"})
_MCP_OWN = frozenset({"results", "degraded", "unavailable"})  # shown in MCP's own form (SearchOutput)
_ShownAnswer: type[_Out] = create_model(  # type: ignore[call-overload]
    "_ShownAnswer", __base__=_Out,
    **{info.name: (Optional[pydantic_type(info.annotation)], Field(None, description=info.description))
       for info in SearchAnswer.record_fields(resolved=True) if info.name not in _NOT_SHOWN | _MCP_OWN},
)


class SearchOutput(_ShownAnswer):  # type: ignore[valid-type,misc]
    """memory_search's answer: hits, plus how they were served (the SearchAnswer's fields), and
    what only MCP says: whether the search could run at all, and what to do."""

    results: list[MemoryHit] = Field(default_factory=list)
    degraded: _Degraded | None = None  # type: ignore[valid-type]  # only when something is degraded
    disabled: bool = False  # the search could not run; `error` says why and `action` what fixes it
    unavailable: bool = False
    error: str | None = None
    warning: str | None = None
    action: str | None = None
    truncated: bool = False  # hits were cut to fit maxInjectedChars
    invalid: str | None = None  # the argument that was refused (as MCP spells it): nothing was searched


class GetOutput(_Out):
    path: str
    text: str = ""
    from_: int = Field(default=1, alias="from")
    lines: int = 0  # lines returned
    total_lines: int = 0
    missing: bool = False
    truncated: bool = False
    next_from: int | None = None  # call again from here for the rest
    next_offset: int | None = None  # ... and skip this many characters of that line (a long line was cut)
    disabled: bool = False
    error: str | None = None
    denied: _Denial | None = None  # type: ignore[valid-type]  # scope rules refused this chat: nothing was read
    warning: str | None = None
    invalid: str | None = None  # the argument that was refused (as MCP spells it)


class StatusOutput(_Out):
    status: _Status | None = None  # type: ignore[valid-type]
    invalid: str | None = None  # the argument that was refused (as MCP spells it)
    error: str | None = None
    denied: _Denial | None = None  # type: ignore[valid-type]  # scope rules refused this chat: nothing is shown
    warning: str | None = None


def _counted(call: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """A tool call counted while it runs (MemoryServer.replace waits for them)."""
    @functools.wraps(call)
    async def counted(self: MemoryServer, *args: Any, **kw: Any) -> Any:
        self._calls += 1
        try:
            return await call(self, *args, **kw)
        finally:
            self._calls -= 1

    return counted


class MemoryServer:
    """The three tools over one manager; transport-free so it is easy to test and embed.

    Each call builds the request every door builds (`engine/requests.py`) from the tool's
    arguments; a request the model refuses is answered with `error` and `invalid` (the option, as
    MCP spells it), which the transport turns into a tool error."""

    def __init__(self, manager: SearchManager, settings: ResolvedConfig, *, session_key: str | None = None,
                 max_chars: int | None = None) -> None:
        if session_key is not None and (not isinstance(session_key, str) or not session_key.strip()):
            raise ValueError("the fixed session key is empty: pass the chat's session key, or None to take each call's")
        # Whatever manager it is given, every tool call goes through the scope rules.
        self.manager, self.settings, self.served = scoped(manager, settings), settings, manager
        self.session_key = session_key  # fixed by the operator: wins over a per-call key
        self._max_chars = max_chars
        self.max_chars = int(max_chars or settings.memory.qmd.limits.max_injected_chars)
        self._calls = 0  # tool calls under way: a replaced manager is closed once they are done

    async def replace(self, manager: SearchManager, settings: ResolvedConfig, *, wait_s: float = 30.0) -> None:
        """Serve `manager` with `settings` from the next call on (the config changed); the one served
        so far is closed once the calls already under way are done (at most `wait_s`)."""
        import anyio  # noqa: PLC0415

        old = self.served
        self.manager, self.settings, self.served = scoped(manager, settings), settings, manager
        self.max_chars = int(self._max_chars or settings.memory.qmd.limits.max_injected_chars)
        try:
            with anyio.move_on_after(wait_s):
                while self._calls:
                    await anyio.sleep(0.05)
        finally:
            with anyio.CancelScope(shield=True):
                await old.aclose()

    @_counted
    async def search(self, query: str, **options: Any) -> SearchOutput:
        key, warning = self._key(options.pop("session_key", None))
        try:
            # The one request: key, scope (a denied chat's arguments change nothing), options, times.
            request = self.manager.request("mcp", query=query, session_key=key, **options)
        except InvalidRequest as exc:
            if exc.field == "session_key":
                return SearchOutput(
                    mode="none", error=f"sessionKey: {exc.problem}", invalid="sessionKey", warning=warning
                )
            return SearchOutput(mode="none", error=str(exc), invalid=door_name(SearchOptions, exc.field, "mcp")
                                if exc.field in SearchOptions.model_fields else exc.field, warning=warning,
                                action="Fix that argument and search again; nothing was searched")
        if request.scope is not None and not request.scope.allowed:
            out = _from_answer(await self.manager.answer(request), self.max_chars)
            out.warning = warning
            return out
        if not request.query.strip():
            return SearchOutput(mode="none", warning="the query is empty: nothing was searched",
                                action="Pass what to recall: a name, a date, a decision or a few keywords")
        try:
            answer = await run_within(lambda: self.manager.answer(request), command="search",
                                      budget=budget_s(self.settings, "search"))
        except CommandTimeout as exc:
            return SearchOutput(mode="none", unavailable=True, error=str(exc), warning="memory search took too long",
                                action="Try again shortly; the operator can raise memory.limits.search")
        except (MemsiftError, OSError) as exc:
            quota = bool(_QUOTA.search(str(exc)))
            return SearchOutput(
                disabled=True,
                unavailable=True,
                error=str(exc),
                warning="embedding provider quota is exhausted" if quota else "memory search failed",
                action="Top up or switch embedding provider"
                if quota
                else "Check the memory search configuration (memsift status --deep)",
            )
        out = _from_answer(answer, self.max_chars)
        out.warning = warning
        return out

    @_counted
    async def get(self, path: str, **options: Any) -> GetOutput:
        """`path` may be a citation or a hit header (its range applies unless `from`/`lines` are
        given); `offset` skips that many characters (UTF-16 units) of the first line."""
        key, warning = self._key(options.pop("session_key", None))
        try:
            check_session_key(key)
        except InvalidRequest as exc:
            return GetOutput(
                path=shorten(str(path), SHOWN_PATH_CHARS),
                disabled=True,
                error=f"sessionKey: {exc.problem}",
                invalid="sessionKey",
                warning=warning,
            )
        denied = self.manager.denial(key, "read")  # scope first, before the path is even parsed
        if denied is not None:
            return GetOutput(path=shorten(str(path), SHOWN_PATH_CHARS), disabled=True, denied=denied, warning=warning,
                             error=f"denied by scope ({denied.rule})")
        try:
            request = ReadOptions.build("mcp", path=path, session_key=key, **options)
        except InvalidRequest as exc:
            return GetOutput(
                path=shorten(str(path), SHOWN_PATH_CHARS),
                disabled=True,
                error=str(exc),
                warning=warning,
                invalid=door_name(ReadOptions, exc.field, "mcp")
                if exc.field in ReadOptions.model_fields
                else exc.field,
            )
        target, from_line, lines = request.target()
        start, skip = from_line or 1, request.offset
        try:
            # Just over the bound: enough to tell that a page is cut, never a whole huge file; the
            # skipped characters are streamed past, never held.
            result = await run_within(
                lambda: run_read(self.manager, request, max_chars=self.max_chars + 1),
                command="get",
                budget=budget_s(self.settings, "get"),
            )
        except (PathNotAllowedError, MemsiftError, OSError) as exc:  # the error names the path (shortened)
            return GetOutput(path=shorten(target, 200), disabled=True, error=str(exc), warning=warning)
        if result.denied:  # the scoped manager guards every caller too
            return GetOutput(path=result.path, disabled=True, denied=result.denied, warning=warning,
                             error=f"denied by scope ({result.denied.rule})")
        page, taken, cut = _page(result.text, self.max_chars)
        next_from = next_offset = None
        if cut and taken == 0:  # the page ends inside its first line: continue in that line
            next_from, next_offset = start, skip + utf16_len(page)
        elif cut:
            next_from = start + taken
        else:
            available = max(0, result.total_lines - start + 1)
            taken = min(lines, available) if lines else available
        return GetOutput(
            path=result.path, text=page, **{"from": start}, lines=taken, total_lines=result.total_lines,
            missing=result.missing, truncated=cut, next_from=next_from, next_offset=next_offset, warning=warning,
        )

    @_counted
    async def status(self, **options: Any) -> StatusOutput:
        key, warning = self._key(options.pop("session_key", None))
        try:
            request = StatusOptions.build("mcp", session_key=key, **options)
        except InvalidRequest as exc:
            return StatusOutput(error=str(exc), invalid=door_name(StatusOptions, exc.field, "mcp")
                                if exc.field in StatusOptions.model_fields else exc.field, warning=warning)
        denied = self.manager.denial(key, "status")  # scope first
        if denied is not None:
            return StatusOutput(denied=denied, error=f"denied by scope ({denied.rule})", warning=warning)
        try:
            st = await run_status(self.manager, request)
        except (MemsiftError, OSError) as exc:
            return StatusOutput(error=str(exc), warning=warning)
        if st.denied:
            return StatusOutput(denied=st.denied, error=f"denied by scope ({st.denied.rule})", warning=warning)
        notes = "; ".join(self.settings.notes)  # the config's own warnings (a block memsift ignores, an unset ${VAR})
        return StatusOutput(status=st, warning="; ".join(w for w in (warning, notes) if w) or None)

    def _key(self, per_call: str | None) -> tuple[str | None, str | None]:
        if self.session_key is None:
            return per_call, None
        if per_call and per_call.strip() != self.session_key:
            return self.session_key, "sessionKey is fixed by the server; the per-call value was ignored"
        return self.session_key, None


def _from_answer(answer: SearchAnswer, budget: int) -> SearchOutput:
    """Hits as the tool shows them (snippet + `Source:` line), whole while they fit the budget."""
    hits, used, truncated = [], 0, False
    for h in answer.results:
        snippet = decorate_snippet(h.snippet, h.citation) if h.citation else h.snippet.strip()
        size = utf16_len(snippet)
        if used + size > budget:
            truncated = True
            room = budget - used
            if room >= 80:  # a fragment shorter than this tells the model nothing
                hits.append(_hit(h, utf16_slice(snippet, room)))
            break
        hits.append(_hit(h, snippet))
        used += size
    shown = {name: getattr(answer, name) for name in _ShownAnswer.model_fields}
    return SearchOutput(
        results=hits, truncated=truncated,
        degraded=answer.degraded if (answer.degraded.vector or answer.degraded.fts or answer.degraded.rerank) else None,
        disabled=answer.denied is not None or answer.unavailable is not None,
        unavailable=answer.unavailable is not None, error=answer.unavailable, **shown,
    )


def _hit(h: Any, snippet: str) -> MemoryHit:
    return MemoryHit(path=h.path, start_line=h.start_line, end_line=h.end_line, score=h.score, snippet=snippet,
                     source=h.source, citation=h.citation, rescued=h.rescued,
                     below_min_score=h.below_min_score, stale=h.stale)


def _page(text: str, budget: int) -> tuple[str, int, bool]:
    """Whole lines while they fit `budget`; (text, whole lines taken, cut). A first line longer
    than the budget is itself cut (0 whole lines taken), so a page is never empty."""
    if utf16_len(text) <= budget:
        return text, 0, False
    out: list[str] = []
    used = 0
    for line in text.splitlines(keepends=True):
        size = utf16_len(line)
        if used + size > budget:
            if not out:
                return utf16_slice(line, budget), 0, True
            break
        out.append(line)
        used += size
    return "".join(out), len(out), True


def build_server(memory: MemoryServer) -> Any:
    """The MCPServer with the three read-only tools registered."""
    from mcp.server.mcpserver import MCPServer  # noqa: PLC0415  (loaded only by `memsift mcp`)
    from mcp.server.mcpserver.exceptions import ToolError  # noqa: PLC0415
    from mcp.types import ToolAnnotations  # noqa: PLC0415

    from ..logging import route_library_logs  # noqa: PLC0415
    from .tools import tool_function  # noqa: PLC0415

    from importlib.metadata import version  # noqa: PLC0415

    route_library_logs()  # before MCPServer, whose set-up would give the process rich's wrapped log lines
    server = _plain_errors(MCPServer)("memsift", instructions=INSTRUCTIONS, version=version("memsift"))
    read_only = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)

    async def refused(kind: str, out: Any) -> Any:
        """A request the model refused is a tool error (isError), as the SDK makes of a schema error."""
        if out.invalid:
            raise ToolError(f"invalid arguments: {out.error}")  # the SDK puts "Error executing tool <name>: " before it
        return tool_result(out)

    async def search(**fields: Any) -> SearchOutput:
        return await refused("memory_search", await memory.search(**fields))

    async def get(**fields: Any) -> GetOutput:
        return await refused("memory_get", await memory.get(**fields))

    async def status(**fields: Any) -> StatusOutput:
        return await refused("memory_status", await memory.status(**fields))

    # Each tool's parameters are the request model's MCP fields (engine/requests.py).
    for model, call, name, title, description, returns, required in (
        (SearchOptions, search, "memory_search", "Search memory", SEARCH_DESCRIPTION, SearchOutput, ("query",)),
        (ReadOptions, get, "memory_get", "Read memory lines", GET_DESCRIPTION, GetOutput, ("path",)),
        (StatusOptions, status, "memory_status", "Memory index status", STATUS_DESCRIPTION, StatusOutput, ()),
    ):
        server.tool(description=description, annotations=read_only, title=title)(
            tool_function(model, call, name=name, returns=returns, required=required))

    return server


def tool_result(out: BaseModel) -> Any:
    """The answer as the client gets it: structured content and its JSON text, both without the
    fields that hold nothing (a null is noise the model reads: two hits took 5,542 characters in
    OpenClaw's tool message with them)."""
    from mcp.types import CallToolResult, TextContent  # noqa: PLC0415  (loaded only by `memsift mcp`)

    data = _without_nulls(out.model_dump(mode="json", by_alias=True, exclude_none=True))
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


def _without_nulls(value: Any) -> Any:
    """exclude_none leaves the None values of plain dicts (a status's details): dropped here too."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _plain_errors(base: Any) -> Any:
    """`base` (MCPServer) whose argument errors read `maxResults: Input should be greater than or
    equal to 1 (got 0)`, without pydantic's type codes and documentation URL."""
    from mcp.server.mcpserver.exceptions import ToolError  # noqa: PLC0415
    from pydantic import ValidationError  # noqa: PLC0415

    class Server(base):  # type: ignore[misc, valid-type]
        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as exc:
                cause = exc.__cause__
                if not isinstance(cause, ValidationError):
                    raise
                problems = "; ".join(
                    f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
                    + (f" (got {e['input']!r})" if not isinstance(e.get("input"), (dict, list)) else "")
                    for e in cause.errors()
                )
                raise ToolError(f"Error executing tool {name}: invalid arguments: {problems}") from cause

    return Server
