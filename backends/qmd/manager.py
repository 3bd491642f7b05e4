"""`QmdSearchManager`: the QMD command-line tool as a sidecar behind the `SearchManager` protocol.

Each agent gets a private QMD home under memsift's state dir (`agents/<id>/qmd/`): its own
`XDG_CONFIG_HOME` and `XDG_CACHE_HOME`, an explicit `--index memsift`, absolute paths, `PWD` and
`CI` removed from the child environment, and a fixed working directory, so the user's own QMD
index is never touched and no project-local `.qmd/` can shadow it. The user's downloaded models
are linked in, never downloaded.

Every mutating call (collection add/remove, update, embed) runs under one lock (an flock shared by
all memsift processes, plus an in-process lock): QMD crashes on concurrent writers.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Mapping

import anyio

from memsift.engine.logging import get_logger
from memsift.engine.citations import citation_for, citations_enabled
from memsift.engine.config import ResolvedConfig
from memsift.engine.durations import parse_duration_ms
from memsift.engine.errors import PathNotAllowedError
from memsift.engine.fts_query import MAX_QUERY_CHARS, clean_query
from memsift.engine.manager import SyncReport
from memsift.engine.memory_files import read_memory_file
from memsift.engine.private_dirs import make_private_dir
from memsift.engine.search_modes import QMD_MODE_FOR, parse_search_mode
from memsift.engine.results import ManagerStatus, ReadResult, SearchAnswer, SearchHit
from memsift.engine.text import utf16_len, utf16_slice

from .collections import ManagedCollection, read_index_yml, resolve_collections
from .parse import QmdHit, parse_search_output, parse_status, parse_version
from .process import QmdError, QmdExitError, command_prefix, resolve_command, run_qmd
from .sessions import export_sessions

__all__ = ["QmdSearchManager", "INDEX_NAME"]

log = get_logger("memsift.qmd")

INDEX_NAME = "memsift"
_UNSUPPORTED_FLAG = ("unknown flag", "unknown option", "unrecognized option", "flag provided but not defined", "unexpected argument")
_NOT_FOUND = ("collection not found", "collection does not exist")
_BUSY = ("sqlite_busy", "database is locked", "timed out")
EMBED_BACKOFF_BASE_S = 60.0
EMBED_BACKOFF_CAP_S = 3600.0


def _ms(value: float, default: float) -> float:
    return value / 1000 if value and value > 0 else default / 1000


class QmdSearchManager:
    backend = "qmd"

    def __init__(self, settings: ResolvedConfig, *, environ: Mapping[str, str] | None = None) -> None:
        self.settings = settings
        self.qmd = settings.memory.qmd
        self.home = settings.state_dir / "agents" / settings.agent_id / "qmd"
        self.config_dir = self.home / "xdg-config"
        self.cache_dir = self.home / "xdg-cache"
        self.state_file = self.home / "memsift-state.json"
        self._environ = dict(os.environ if environ is None else environ)
        u = self.qmd.update
        self.command_timeout = _ms(u.command_timeout_ms, 30_000)
        self.update_timeout = _ms(u.update_timeout_ms, 120_000)
        self.embed_timeout = _ms(u.embed_timeout_ms, 120_000)
        self.search_timeout = _ms(self.qmd.limits.timeout_ms, 4000)
        self.debounce_s = max(0.0, u.debounce_ms / 1000)
        self.interval_s = parse_duration_ms(u.interval, default_ms=300_000) / 1000
        self.embed_interval_s = parse_duration_ms(u.embed_interval, default_ms=3_600_000) / 1000
        self.sessions_dir = settings.state_dir / "agents" / settings.agent_id / "sessions"
        sess = self.qmd.sessions
        self.export_dir = Path(sess.export_dir).expanduser() if sess.export_dir else self.home / "sessions"
        self.collections = resolve_collections(settings, self.export_dir if sess.enabled else None)
        self._exe: str | None = None
        self._argv0: list[str] | None = None
        self._version: str | None = None
        self._started = False
        self._lock = anyio.Lock()
        self._missing: list[str] = []

    # --- environment and processes --------------------------------------------------------------

    def child_env(self) -> dict[str, str]:
        env = {k: v for k, v in self._environ.items() if k not in ("PWD", "OLDPWD", "CI", "INDEX_PATH", "QMD_CONFIG_DIR")}
        env.update(
            {
                "XDG_CONFIG_HOME": str(self.config_dir),
                "XDG_CACHE_HOME": str(self.cache_dir),
                "QMD_CONFIG_DIR": str(self.config_dir / "qmd"),
                "NO_COLOR": "1",
                "QMD_FORCE_CPU": env.get("QMD_FORCE_CPU", "1"),
            }
        )
        return env

    @property
    def index_yml(self) -> Path:
        return self.config_dir / "qmd" / f"{INDEX_NAME}.yml"

    @property
    def index_db(self) -> Path:
        return self.cache_dir / "qmd" / f"{INDEX_NAME}.sqlite"

    async def _qmd(self, *args: str, timeout: float, check: bool = True):
        env = self.child_env()
        if self._argv0 is None:
            self._exe = self._exe or resolve_command(self.qmd.command, env)
            self._argv0 = command_prefix(self._exe, env)
        return await run_qmd([*self._argv0, "--index", INDEX_NAME, *args], env=env, cwd=str(self.home), timeout_s=timeout, check=check)

    @asynccontextmanager
    async def _write_lock(self) -> AsyncIterator[None]:
        """One writer per QMD index, across threads and processes."""
        async with self._lock:
            fd = os.open(self.home / "qmd.lock", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                await anyio.to_thread.run_sync(fcntl.flock, fd, fcntl.LOCK_EX)
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)

    def _link_models(self) -> None:
        """Share the user's downloaded QMD models (never download them here)."""
        target = self.cache_dir / "qmd" / "models"
        if target.exists() or target.is_symlink():
            return
        user_cache = Path(self._environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        shared = user_cache / "qmd" / "models"
        if shared.is_dir() and shared.resolve() != target.resolve():
            try:
                target.symlink_to(shared, target_is_directory=True)
            except OSError as exc:
                log.warning("cannot link the shared QMD models", error=str(exc))

    def models_available(self) -> bool:
        models = self.cache_dir / "qmd" / "models"
        return models.is_dir() and any(p.suffix == ".gguf" and "embed" in p.name.lower() for p in models.iterdir())

    # --- persisted state ------------------------------------------------------------------------

    def _state(self) -> dict[str, Any]:
        try:
            return json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return {}

    def _save_state(self, **updates: Any) -> None:
        state = {**self._state(), **updates}
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, self.state_file)

    # --- start-up and collections ---------------------------------------------------------------

    async def _ensure_started(self) -> None:
        if self._started:
            return
        for d in (self.config_dir / "qmd", self.cache_dir / "qmd"):
            make_private_dir(d)
        self._exe = resolve_command(self.qmd.command, self.child_env())
        self._link_models()
        async with self._write_lock():
            await self._reconcile()
        self._started = True

    async def _reconcile(self) -> None:
        """Make QMD's collections match the managed ones (add, rebind, drop stale)."""
        existing = read_index_yml(self.index_yml)
        wanted = {c.name for c in self.collections}
        self._missing = []
        for c in self.collections:
            if not c.path.is_dir():
                self._missing.append(str(c.path))
                continue
            current = existing.get(c.name)
            if current == (str(c.path), c.pattern):
                continue
            if current is not None:
                await self._qmd("collection", "remove", c.name, timeout=self.command_timeout)
            try:
                await self._qmd("collection", "add", str(c.path), "--name", c.name, "--glob", c.pattern, timeout=self.update_timeout)
            except QmdExitError as exc:
                if "already" not in exc.stderr.lower() and "already" not in exc.stdout.lower():
                    raise
                holder = next((n for n, spec in existing.items() if spec == (str(c.path), c.pattern) and n != c.name), None)
                if holder is None:
                    raise
                await self._qmd("collection", "remove", holder, timeout=self.command_timeout)
                await self._qmd("collection", "add", str(c.path), "--name", c.name, "--glob", c.pattern, timeout=self.update_timeout)
        agent_suffix = f"-{self.collections[0].name.rsplit('-', 1)[-1]}" if self.collections else None
        for name in existing:
            if name not in wanted and agent_suffix and name.endswith(agent_suffix):
                await self._qmd("collection", "remove", name, timeout=self.command_timeout)

    def _live_collections(self) -> list[ManagedCollection]:
        registered = read_index_yml(self.index_yml)
        return [c for c in self.collections if c.name in registered and c.path.is_dir()]

    # --- update and embed -----------------------------------------------------------------------

    async def _update(self, reason: str, *, force_embed: bool = False) -> SyncReport:
        started = time.perf_counter()
        report = SyncReport(reason=reason)
        async with self._write_lock():
            vanished = [str(c.path) for c in self.collections if c.name in read_index_yml(self.index_yml) and not c.path.is_dir()]
            if vanished:
                # QMD would mark every document of a vanished folder as removed: keep the index.
                self._save_state(lastError=f"update skipped: folder missing: {', '.join(vanished)}")
                log.warning("qmd update skipped: a collection folder is missing", folders=vanished)
                raise QmdError(f"collection folder missing: {', '.join(vanished)}; update skipped to keep the index")
            if self.qmd.sessions.enabled:
                export_sessions(self.sessions_dir, self.export_dir, self.qmd.sessions.retention_days)
            await self._reconcile()
            for attempt in range(3):
                try:
                    res = await self._qmd("update", timeout=self.update_timeout)
                    break
                except QmdError as exc:
                    if attempt == 2 or not any(b in str(exc).lower() for b in _BUSY):
                        self._save_state(lastError=str(exc))
                        raise
                    await anyio.sleep(0.5 * (attempt + 1))
            self._save_state(lastUpdateAt=time.time(), lastError=None)
            report.files_indexed = sum(int(n) for n in _numbers(res.stdout, "new") + _numbers(res.stdout, "updated"))
            report.files_removed = sum(int(n) for n in _numbers(res.stdout, "removed"))
            report.files_unchanged = sum(int(n) for n in _numbers(res.stdout, "unchanged"))
            await self._maybe_embed(force=force_embed)
        report.took_ms = (time.perf_counter() - started) * 1000
        return report

    async def _maybe_embed(self, *, force: bool) -> None:
        state = self._state()
        now = time.time()
        if not force and now < state.get("embedBackoffUntil", 0):
            return
        due = force or state.get("lastEmbedAt") is None or now - state.get("lastEmbedAt", 0) >= self.embed_interval_s
        if not due:
            return
        if not self.models_available():
            # Without local models `qmd embed` would try a download and hang for minutes.
            self._save_state(embedSkipped=f"no local embedding model in {self.cache_dir / 'qmd' / 'models'}")
            return
        try:
            res = await self._qmd("embed", timeout=self.embed_timeout)
            if "already running" in res.stdout.lower():
                return
            self._save_state(lastEmbedAt=now, embedFailures=0, embedBackoffUntil=0, embedSkipped=None)
        except QmdError as exc:
            failures = state.get("embedFailures", 0) + 1
            backoff = min(EMBED_BACKOFF_CAP_S, EMBED_BACKOFF_BASE_S * 2 ** (failures - 1))
            self._save_state(embedFailures=failures, embedBackoffUntil=now + backoff, lastEmbedError=str(exc))
            log.warning("qmd embed failed; backing off", seconds=backoff, error=str(exc))

    async def sync(self, *, force: bool = False, reason: str = "manual") -> SyncReport:
        await self._ensure_started()
        return await self._update(reason, force_embed=force)

    async def start_background(self, task_group: anyio.abc.TaskGroup) -> None:
        """For long-running hosts (MCP server, watcher): the boot update (awaited when
        `waitForBootSync`, else in the background), then updates every `update.interval`; embeds
        follow `embedInterval` with their back-off. Cancelling the task group stops it all."""
        await self._ensure_started()
        if self.qmd.update.on_boot and self.qmd.update.wait_for_boot_sync:
            await self._safe_update("boot")
            task_group.start_soon(self._interval_loop)
        else:
            task_group.start_soon(self._boot_then_interval)

    async def _boot_then_interval(self) -> None:
        if self.qmd.update.on_boot:
            await self._safe_update("boot")
        await self._interval_loop()

    async def _interval_loop(self) -> None:
        if self.interval_s <= 0:  # "0s" disables periodic updates
            return
        while True:
            await anyio.sleep(self.interval_s)
            await self._safe_update("interval")

    async def _safe_update(self, reason: str) -> None:
        try:
            await self._update(reason)
        except QmdError as exc:
            log.warning("qmd update failed", reason=reason, error=str(exc))

    async def _fresh_enough(self) -> None:
        """Before a search: update when the last update is older than the debounce window."""
        if not self.settings.memory_search.sync.on_search:
            return
        last = self._state().get("lastUpdateAt")
        if last is None or time.time() - last > self.debounce_s:
            await self._safe_update("search")

    # --- search ---------------------------------------------------------------------------------

    async def _search_collection(self, mode: str, q: str, limit: int, c: ManagedCollection, facts: dict[str, Any]) -> list[QmdHit]:
        args = [mode, "--json", "-n", str(limit), "-c", c.name, "--", q]
        try:
            res = await self._qmd(*args, timeout=self.search_timeout)
        except QmdExitError as exc:
            text = (exc.stderr + exc.stdout).lower()
            if mode != "query" and any(f in text for f in _UNSUPPORTED_FLAG):
                facts["effective_mode"], facts["mode_fallback"] = "query", "unsupported-search-flags"
                return await self._search_collection("query", q, limit, c, facts)
            if any(f in text for f in _NOT_FOUND) and not facts.get("repaired"):
                facts["repaired"] = True
                async with self._write_lock():
                    await self._reconcile()
                return await self._search_collection(mode, q, limit, c, facts)
            raise
        hits = parse_search_output(res.stdout, res.stderr)
        if not hits and mode == "vsearch" and "(100%) need embeddings" in res.stderr:
            # QMD answers `[]` when nothing is embedded: that is an outage, not "no memories".
            raise QmdError("qmd vsearch has no embeddings to search (every document needs `qmd embed`, which needs local models)")
        return hits

    def _map_path(self, c: ManagedCollection, rel: str) -> str | None:
        abs_path = Path(os.path.normpath(c.path / rel))
        if abs_path != c.path and c.path not in abs_path.parents:
            return None  # a hit outside its collection: drop it
        ws = self.settings.workspace
        if ws in abs_path.parents:
            out = abs_path.relative_to(ws).as_posix()
            if not out.startswith("qmd/"):
                return out
        return f"qmd/{c.name}/{Path(rel).as_posix()}"

    async def search(
        self,
        query: str,
        *,
        max_results: int | None = None,
        min_score: float | None = None,
        session_key: str | None = None,
        explain: bool = False,
        now: float | None = None,
        mode: str | None = None,
    ) -> SearchAnswer:
        started = time.perf_counter()
        query = (query or "")[:MAX_QUERY_CHARS]  # an argv of megabytes cannot even start qmd
        q = clean_query(query).strip()
        limits = self.qmd.limits
        cap = max(1, int(limits.max_results))
        limit = min(cap, max_results) if max_results else cap
        threshold = 0.0 if min_score is None else min(1.0, max(0.0, min_score))
        # A mode asked for per search picks QMD's command (keyword: search, vector: vsearch, hybrid: query).
        mode = QMD_MODE_FOR.get(parse_search_mode(mode), self.qmd.search_mode)
        facts: dict[str, Any] = {"effective_mode": mode}
        hits: list[SearchHit] = []
        if q:
            await self._ensure_started()
            await self._fresh_enough()
            best: dict[str, tuple[QmdHit, ManagedCollection]] = {}
            for c in self._live_collections():
                for h in await self._search_collection(facts["effective_mode"], q, limit, c, facts):
                    key = h.docid or f"{c.name}:{h.path}"
                    if key not in best or h.score > best[key][0].score:
                        best[key] = (h, c)
            hits = self._to_hits(best.values(), threshold, limit, session_key, explain, facts)
        return SearchAnswer(
            query=query,
            results=hits,
            backend=self.backend,
            mode=facts["effective_mode"],
            provider="qmd",
            model=f"qmd {self._version}" if self._version else "qmd",
            citations=self.settings.memory.citations,
            min_score=threshold,
            max_results=limit,
            took_ms=round((time.perf_counter() - started) * 1000, 3),
        )

    def _to_hits(self, found, threshold: float, limit: int, session_key: str | None, explain: bool, facts: dict) -> list[SearchHit]:
        max_snippet = max(1, int(self.qmd.limits.max_snippet_chars))
        cite = citations_enabled(self.settings.memory.citations, session_key)
        ranked: list[SearchHit] = []
        for h, c in sorted(found, key=lambda hc: (-hc[0].score, hc[0].path or "")):
            if h.score < threshold or not h.path:
                continue
            path = self._map_path(c, h.path)
            if path is None:
                continue
            start = h.start_line or 1
            end = h.end_line or start
            hit = SearchHit(
                path=path,
                start_line=start,
                end_line=end,
                score=h.score,
                snippet=utf16_slice(h.snippet, max_snippet),
                source="sessions" if c.kind == "sessions" else "memory",
                citation=citation_for(path, start, end) if cite else None,
            )
            if explain:
                hit.qmd = {"mode": facts["effective_mode"], "rawScore": h.score, "docid": h.docid, "collection": c.name}
            ranked.append(hit)
        return _clamp_injected(_diversify(ranked)[:limit], int(self.qmd.limits.max_injected_chars))

    # --- read -----------------------------------------------------------------------------------

    async def read(self, path: str, from_line: int | None = None, lines: int | None = None, *,
                   max_chars: int | None = None) -> ReadResult:
        def go() -> tuple[str, str, int, bool]:
            raw = (path or "").strip().replace("\\", "/")
            if raw.startswith("qmd/"):
                _, coll, *rest = raw.split("/", 2)
                c = next((x for x in self.collections if x.name == coll), None)
                if c is None or not rest or not rest[0]:
                    raise PathNotAllowedError(path, f"no QMD collection named {coll!r}")
                rel, text, total, missing = read_memory_file(c.path, (str(c.path),), rest[0], from_line, lines, max_chars=max_chars)
                return raw, text, total, missing
            extra = tuple(self.settings.memory_search.extra_paths) + tuple(str(c.path) for c in self.collections if c.kind == "custom")
            return read_memory_file(self.settings.workspace, extra, path, from_line, lines, max_chars=max_chars)

        rel, text, total, missing = await anyio.to_thread.run_sync(go)
        return ReadResult(path=rel, text=text, **{"from": max(1, int(from_line or 1))}, lines=lines, total_lines=total, missing=missing)

    # --- status ---------------------------------------------------------------------------------

    async def status(self, *, deep: bool = False) -> ManagerStatus:
        info: dict[str, Any] = {}
        state = self._state()
        try:
            self._exe = self._exe or resolve_command(self.qmd.command, self.child_env())
            res = await self._qmd("--version", timeout=self.command_timeout)
            self._version = parse_version(res.stdout)
            if self.index_yml.exists():
                info.update(parse_status((await self._qmd("status", timeout=self.command_timeout)).stdout))
        except QmdError as exc:
            info["error"] = str(exc)
        registered = read_index_yml(self.index_yml)
        collections = [
            {"name": c.name, "path": str(c.path), "pattern": c.pattern, "kind": c.kind,
             "registered": c.name in registered, "folderExists": c.path.is_dir()}
            for c in self.collections
        ]
        docs = info.get("documents", 0)
        return ManagerStatus(
            backend=self.backend,
            agent_id=self.settings.agent_id,
            workspace_dir=str(self.settings.workspace),
            db_path=str(self.index_db),
            files=docs,
            chunks=docs,
            provider="qmd",
            requested_provider="qmd",
            model=self.qmd.search_mode,
            sources=["memory"] + (["sessions"] if self.qmd.sessions.enabled else []),
            search_mode=self.qmd.search_mode,
            vector={"available": bool(info.get("vectors")), "rows": info.get("vectors")},
            qmd={
                "version": self._version,
                "command": self._exe or self.qmd.command,
                "home": str(self.home),
                "collections": collections,
                "documents": docs,
                "vectors": info.get("vectors"),
                "pendingEmbeddings": info.get("pending"),
                "lastUpdateAt": state.get("lastUpdateAt"),
                "lastEmbedAt": state.get("lastEmbedAt"),
                "embedSkipped": state.get("embedSkipped"),
                "embedFailures": state.get("embedFailures", 0),
                "embedBackoffUntil": state.get("embedBackoffUntil"),
                "lastError": state.get("lastError") or info.get("error"),
                "modelsAvailable": self.models_available(),
            },
        )

    async def aclose(self) -> None:
        return None  # every qmd process is awaited (and killed on timeout) by the call that started it


def _numbers(text: str, word: str) -> list[str]:
    return re.findall(rf"(\d+) {word}", text or "")


def _diversify(hits: list[SearchHit]) -> list[SearchHit]:
    """Round-robin memory and sessions hits (best source first) when both are present."""
    by_source: dict[str, list[SearchHit]] = {}
    for h in hits:
        by_source.setdefault(h.source, []).append(h)
    if len(by_source) < 2:
        return hits
    queues = sorted(by_source.values(), key=lambda q: -q[0].score)
    out: list[SearchHit] = []
    while any(queues):
        for queue in queues:
            if queue:
                out.append(queue.pop(0))
    return out


def _clamp_injected(hits: list[SearchHit], budget: int) -> list[SearchHit]:
    """Whole snippets while they fit, the next one truncated, the rest dropped."""
    out, used = [], 0
    for h in hits:
        size = utf16_len(h.snippet)
        if used + size <= budget:
            out.append(h)
            used += size
            continue
        room = budget - used
        if room > 0:
            h.snippet = utf16_slice(h.snippet, room)
            out.append(h)
        break
    return out
