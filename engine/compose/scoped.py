"""`ScopedSearchManager`: the scope rules (`memory.qmd.scope`) and the memory-file rules
(`engine/files/rules.py`) for every backend, once, above them.

The factory wraps every manager it builds in one, and so does the MCP server, so a chat the rules
deny is denied by every call that reads memory: `search`, `read` (memory_get) and `status`, on
the builtin backend as on QMD (and its fallback). A denial is an answer that says so (`denied`:
the rule, channel and chat type), logged as a warning; no backend runs, no process is spawned.
`sync` and `aclose` are the operator's and pass through, as does every other attribute.

A read is judged by the same rules before the backend runs (a path outside memory is refused
whatever the backend would do with it), and the backend must answer with the file it was asked
for.

Every hit of an allowed search must name a memory file by the one set of rules every backend
reads by (`MemoryRules.admits_hit`); a hit that does not (a QMD collection that indexed a symlink,
a file outside its pattern) is dropped, logged and counted in the answer's notes.
"""

from __future__ import annotations

from typing import Any

from ..config.models import QueryConfig, ScopeConfig
from ..errors import BackendError, PathNotAllowedError
from ..requests import ReadOptions, SearchOptions, StatusOptions, check_session_key
from ..search.fts_query import MAX_QUERY_CHARS
from ..search.request import SearchRequest
from ..logging import get_logger
from ..manager import SearchManager
from ..files.rules import MemoryRules
from ..results import ManagerStatus, ReadResult, ScopeDenial, SearchAnswer, SearchHit
from ..config.scope import ScopeDecision, decide_scope
from ..config.zones import zone_shown
from ..text import shorten
from .wrapped import WrappedManager

__all__ = ["ScopedSearchManager", "scoped", "build_search", "search_request"]

log = get_logger("memsift.scope")

SHOWN_PATH_CHARS = 200  # a denied read echoes at most this much of the path


class ScopedSearchManager(WrappedManager):
    """A `SearchManager` that answers only the session keys its scope rules allow."""


    def __init__(self, inner: SearchManager, scope: ScopeConfig | None, *, agent_id: str,
                 memory_rules: MemoryRules | None = None, query_config: QueryConfig | None = None,
                 transcripts: str | None = None) -> None:
        super().__init__(inner)
        self.scope = scope
        self.agent_id = agent_id
        self.memory_rules = memory_rules
        self._query_config = query_config or QueryConfig()
        self._transcripts = transcripts  # where the session transcripts are read from, when they are a source

    @property
    def query_config(self) -> QueryConfig:
        return self._query_config

    def decide(self, session_key: str | None, call: str) -> ScopeDecision:
        return _judged(self.scope, session_key, call)

    def denial(self, session_key: str | None, call: str) -> ScopeDenial | None:
        """What the rules say to this chat's `call` when they deny it (logged), else None. Front
        ends ask it first, before they look at the call's other arguments."""
        decision = self.decide(session_key, call)
        return None if decision.allowed else _denial(decision)

    def denied_search(self, denied: ScopeDenial, query: str = "", *, max_results: int | None = None,
                      min_score: float | None = None) -> SearchAnswer:
        """The answer to a denied search: no hit, no backend run, the rule that decided."""
        return SearchAnswer(
            query=query[:MAX_QUERY_CHARS],
            results=[],
            backend=self._inner.backend,
            mode="none",
            min_score=min_score or 0.0,
            max_results=max_results or 0,
            took_ms=0.0,
            denied=denied,
        )

    def request(self, door: str = "api", *, now: float | None = None, candidates: int | None = None,
                **fields: Any) -> SearchRequest:
        """`build_search` with this stage's rules and query config."""
        return build_search(door, scope=self.scope, query_config=self._query_config, now=now, candidates=candidates,
                            **fields)

    # --- SearchManager --------------------------------------------------------------------------

    async def search(self, query: str, *, now: float | None = None, candidates: int | None = None,
                     **options: Any) -> SearchAnswer:
        """The Python API's door: the request every door builds (InvalidRequest, a ValueError, for
        an option no door accepts), after the scope rules (an empty key is refused first: it is no
        local caller)."""
        return await self.answer(self.request("api", now=now, candidates=candidates, query=query, **options))

    async def answer(self, request: SearchRequest) -> SearchAnswer:
        """The backend's answer, or the denial when the rules deny the asking chat (decided at the
        door, in `build_search`; here only for a request built without them)."""
        decision = request.scope if request.scope is not None else self.decide(request.session_key, "search")
        if not decision.allowed:
            return self.denied_search(_denial(decision), request.query, max_results=request.max_results,
                                      min_score=request.min_score)
        answer = self._only_memory(await self._inner.answer(request))
        if request.corpus not in (None, "all"):  # a backend that does not read `corpus` (memsift's own all do)
            answer.results = [h for h in answer.results if request.keeps(h.source)]
        if request.corpus == "sessions" and not answer.results and not self._reads_transcripts():
            answer.notes = [*(answer.notes or []), NO_TRANSCRIPTS]
        return answer

    def _reads_transcripts(self) -> bool:
        """Whether any session transcript can be a hit here: sessions a source, or QMD's export."""
        rules = self.memory_rules
        return rules is None or rules.sessions_dir is not None or any(c.kind == "sessions" for c in rules.collections)

    def _only_memory(self, answer: SearchAnswer) -> SearchAnswer:
        """Drop every hit that names no memory file (by the rules every backend reads by)."""
        rules = self.memory_rules
        if rules is None or not answer.results:
            return answer
        kept: list[SearchHit] = []
        dropped: list[SearchHit] = []
        for hit in answer.results:
            (kept if rules.admits_hit(hit.path, hit.source) else dropped).append(hit)
        if dropped:
            log.warning("hits that name no memory file were dropped", backend=answer.backend, dropped=len(dropped),
                        paths=[shorten(h.path, 120) for h in dropped[:5]])
            answer.results = kept
            answer.notes = [
                *(answer.notes or []),
                f"{len(dropped)} hit(s) left out: they name no memory file "
                "(a symlink, or a file outside MEMORY.md, memory/, the extra paths and the QMD collections)",
            ]
        return answer

    async def read(self, path: str, from_line: int | None = None, lines: int | None = None, *,
                   session_key: str | None = None, **options: Any) -> ReadResult:
        check_session_key(session_key)
        denied = self.denial(session_key, "read")
        if denied is not None:
            shown = shorten(path, SHOWN_PATH_CHARS) if isinstance(path, str) else ""
            return ReadResult(path=shown, text="", denied=denied)
        if not isinstance(path, str):
            raise PathNotAllowedError(str(path)[:SHOWN_PATH_CHARS], "path required")
        request = ReadOptions.build(
            "api", path=path, from_line=from_line, lines=lines, session_key=session_key, **options
        )
        target, start, count = request.target()
        judged = self.memory_rules.readable(target) if self.memory_rules is not None else None  # PathNotAllowedError
        got = await self._inner.read(target, start, count, max_chars=request.max_chars, offset=request.offset)
        if judged is not None and not got.denied and got.path != judged:
            # The backend read another file than the one judged: its text is not shown.
            log.warning("a backend read another file than the one asked for", backend=self._inner.backend,
                        asked=shorten(judged, 120), read=shorten(str(got.path), 120))
            raise BackendError(f"the {self._inner.backend} backend answered a read of {shorten(judged, 120)} with "
                               f"{shorten(str(got.path), 120)}: refused (a bug in that backend)")
        return got

    async def status(self, *, deep: bool = False, session_key: str | None = None, **_: Any) -> ManagerStatus:
        check_session_key(session_key)
        denied = self.denial(session_key, "status")
        if denied is not None:  # not even the workspace folder is shown
            return ManagerStatus(backend=self._inner.backend, agent_id=self.agent_id, workspace_dir="", denied=denied)
        status = await self._inner.status(deep=StatusOptions.build("api", deep=deep).deep)
        return status.model_copy(update={"time_zone": zone_shown(self._query_config.time.timezone),
                                         "transcripts": self._transcripts})

    async def aclose(self) -> None:
        await self._inner.aclose()


def _denial(decision: ScopeDecision) -> ScopeDenial:
    return ScopeDenial(rule=decision.rule, channel=decision.channel, chat_type=decision.chat_type,
                       session_key=decision.session_key)


def _judged(scope: ScopeConfig | None, session_key: str | None, call: str) -> ScopeDecision:
    """The rules' decision for this chat's `call`, a denial logged."""
    decision = decide_scope(scope, session_key)
    if not decision.allowed:
        log.warning(
            f"memory {call} denied by scope",
            rule=decision.rule,
            channel=decision.channel or "unknown",
            chat_type=decision.chat_type,
            session=decision.session_key or "<none>",
        )
    return decision


def build_search(door: str = "api", *, scope: ScopeConfig | None, query_config: QueryConfig, now: float | None = None,
                 candidates: int | None = None, **fields: Any) -> SearchRequest:
    """The one search request of every door (the CLI, the resident helper, MCP, the Python API,
    `parity`), built once and passed whole: the session key checked, the scope rules decided (a
    denied chat's request carries the denial and nothing else of it is read), the options validated
    and the question's times read with the configured hemisphere and clock (`now`). A bad value is
    an InvalidRequest naming the option as `door` spells it. `scope` and `query_config` are the
    agent's (`settings.memory.qmd.scope`, `settings.memory_search.query`)."""
    key = check_session_key(fields.get("session_key"))  # an empty key is no local caller: refused first
    decision = _judged(scope, key, "search")
    if not decision.allowed:  # a denied chat's other arguments change nothing
        return SearchRequest.denied(fields.get("query"), key, decision)
    options = SearchOptions.build(door, **fields)
    return options.resolve(query_config, door=door, now=now, candidates=candidates, scope=decision)


def search_request(settings: Any, door: str = "api", *, now: float | None = None, **fields: Any) -> SearchRequest:
    """`build_search` with an agent's settings (the Python API's form, docs/gateways/python-api.md)."""
    return build_search(door, scope=settings.memory.qmd.scope, query_config=settings.memory_search.query, now=now,
                        **fields)


NO_TRANSCRIPTS = ('no session transcripts are searched here: add "sessions" to memorySearch.sources, with '
                  "memorySearch.experimental.sessionMemory: true (or memory.qmd.sessions.enabled on QMD)")


def scoped(manager: SearchManager, settings: Any) -> ScopedSearchManager:
    """`manager` under the scope rules of `settings` (a manager already scoped is returned as is)."""
    if isinstance(manager, ScopedSearchManager):
        return manager
    rules = MemoryRules.from_settings(settings)
    transcripts = str(rules.sessions_dir) if rules.sessions_dir is not None else None
    return ScopedSearchManager(manager, settings.memory.qmd.scope, agent_id=settings.agent_id, memory_rules=rules,
                               query_config=settings.memory_search.query, transcripts=transcripts)
