"""A backend plugin: every search reads the memory files and keeps the lines holding the query's
words (no index). Small, but a whole SearchManager: search, read, status, sync."""

from __future__ import annotations

import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from memsift.engine.files.discovery import discover_memory_files
from memsift.engine.files.rules import MemoryRules, read_memory
from memsift.engine.manager import SyncReport
from memsift.engine.plugins import BackendContext, BackendPlugin
from memsift.engine.results import ManagerStatus, ReadResult, SearchAnswer, SearchHit
from memsift.engine.search.citations import citation_for
from memsift.engine.search.request import KeywordSearch


class GrepConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)

    case_sensitive: bool = False
    max_hits: int = Field(5, ge=1)
    crash_on: str | None = None  # a query that makes this plugin crash, as a buggy one would
    value_error_on: str | None = None  # a query its storage library answers with a ValueError ("table not found")
    naive_read: bool = False  # read whatever path it is given, as a naive plugin would
    read_instead: str | None = None  # read this file whatever is asked for, and say so


class GrepManager(KeywordSearch):
    backend = "notes-grep"

    def __init__(self, ctx: BackendContext) -> None:
        self.settings, self.config = ctx.settings, ctx.config
        self.rules = MemoryRules.from_settings(ctx.settings)

    def _files(self):
        files, _ = discover_memory_files(self.settings.workspace, self.settings.memory_search.extra_paths)
        return files

    @property
    def query_config(self):
        return self.settings.memory_search.query

    async def answer(self, request):
        query, max_results = request.query, request.max_results
        if query == self.config.crash_on:
            raise KeyError("a bug in the plugin")
        if query == self.config.value_error_on:
            raise ValueError("Table 'files_g7' was not found")
        fold = (lambda s: s) if self.config.case_sensitive else str.lower
        words = [fold(w) for w in query.split()]
        hits = []
        for f in self._files():
            for n, line in enumerate(Path(f.abs_path).read_text(encoding="utf-8").split("\n"), 1):
                found = sum(1 for w in words if w in fold(line))
                if found:
                    hits.append(SearchHit(path=f.rel_path, start_line=n, end_line=n, score=found / len(words),
                                          snippet=line, citation=citation_for(f.rel_path, n, n)))
        hits.sort(key=lambda h: -h.score)
        limit = min(max_results or self.config.max_hits, self.config.max_hits)
        return SearchAnswer(query=query, results=hits[:limit], backend=self.backend, mode="grep", min_score=0,
                            max_results=limit, took_ms=0.0)

    async def read(self, path, from_line=None, lines=None, *, max_chars=None, offset=0):
        if self.config.read_instead:
            path = self.config.read_instead
        if self.config.naive_read or self.config.read_instead:
            target = Path(path) if Path(path).is_absolute() else self.settings.workspace / path
            return ReadResult(path=path, text=target.read_text(encoding="utf-8"))
        return await read_memory(self.rules, path, from_line, lines, max_chars=max_chars, offset=offset)

    async def status(self, *, deep=False):
        return ManagerStatus(
            backend=self.backend,
            agent_id=self.settings.agent_id,
            workspace_dir=str(self.settings.workspace),
            files=len(self._files()),
            chunks=0,
            dirty=False,
            provider="none",
            model=None,
            search_mode="grep",
            search_now="grep over the memory files (no index)",
        )

    async def sync(self, *, force=False, reason="manual"):
        started = time.perf_counter()
        return SyncReport(reason=reason, backend=self.backend, files_seen=len(self._files()),
                          took_ms=(time.perf_counter() - started) * 1000)

    async def aclose(self):
        return None


backend = BackendPlugin(
    "notes-grep", GrepManager, "grep over the memory files (a test plugin)", config_model=GrepConfig
)


class OlderGrepManager(GrepManager):
    """A plugin written for the protocol before `answer(request)`: only `search(query, **options)`."""

    backend = "older-grep"
    answer = None  # type: ignore[assignment]  # what the older protocol did not have

    async def search(self, query, **options):
        return SearchAnswer(query=query, results=[], backend=self.backend, mode="grep", min_score=0, max_results=1,
                            took_ms=0.0)


older = BackendPlugin(
    "older-grep", OlderGrepManager, "a plugin for an older memsift (a test plugin)", config_model=GrepConfig
)
