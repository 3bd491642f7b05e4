"""`QmdSearchManager`: the QMD command-line tool as a sidecar behind the `SearchManager` protocol.

Each agent gets a private QMD home under memsift's state dir (`agents/<id>/qmd/`): its own
`XDG_CONFIG_HOME` and `XDG_CACHE_HOME`, an explicit `--index memsift`, absolute paths, `PWD` and
`CI` removed from the child environment, and a fixed working directory, so the user's own QMD
index is never touched and no project-local `.qmd/` can shadow it. The user's downloaded models
are linked in, never downloaded.

Every mutating call (collection add/remove, update, embed) lives in `maintenance.py`, under one
writer lock shared by all memsift processes. A search never takes that lock for long: it has one
budget (`limits.timeoutMs`) for waiting on an update (at most half of it) and for its `qmd search`
processes, and a search that cannot finish in it fails (the fallback then answers).
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Mapping

import anyio
import yaml

from memsift.engine.logging import get_logger
from memsift.engine.search.citations import citation_for, citations_enabled
from memsift.engine.config import ResolvedConfig
from memsift.engine.durations import parse_duration_ms
from memsift.engine.errors import PathNotAllowedError
from memsift.engine.files.transcripts import sessions_folder
from memsift.engine.files.sync import MAX_MARKDOWN_BYTES, pending_changes
from memsift.engine.manager import SyncReport
from memsift.engine.files.rules import MemoryRules, read_memory, session_export_dir
from memsift.engine.private_dirs import make_private_dir, user_cache_path
from memsift.engine.search.modes import QMD_MODE_FOR
from memsift.engine.results import BelowMinScore, ManagerStatus, ReadResult, SearchAnswer, SearchHit
from memsift.engine.text import utf16_len, utf16_slice
from memsift.engine.files.note_dates import day_at
from memsift.engine.search.ranking import Candidate
from memsift.engine.search.hits import hits_from_ranked
from memsift.engine.search.expansion import expand_terms
from memsift.engine.search.pipeline import time_only_answer
from memsift.engine.search.time_only import MAX_COMMON_WORDS, names_only_a_time, nearby_windows, topic_words
from memsift.engine.search.request import KeywordSearch, SearchRequest
from memsift.engine.search.time_query import TimeWindow, without_time_expressions
from memsift.engine.search.time_rank import (
    apply_time_filter,
    apply_time_windows,
    candidate_windows,
    candidates_inside_first,
)

from .collections import ManagedCollection, read_index_yml, resolve_collections
from .lock import LockBusy
from .maintenance import QmdMaintenance
from .parse import QmdHit, parse_ls, parse_search_output, parse_status, parse_version, spelled_on_disk
from .process import (
    KILL_GRACE_S,
    QmdError,
    QmdExitError,
    QmdSpawnError,
    QmdTimeout,
    command_prefix,
    resolve_command,
    run_qmd,
)
from .window_notes import weightless_in_notes, window_notes

__all__ = ["QmdSearchManager", "INDEX_NAME", "EVERY_WORD_NOTE", "EVERY_WORD_NOTE_NO_MODELS"]

ReadNote = Callable[[ManagedCollection, str], str]  # a note of a collection, by its path there

log = get_logger("memsift.qmd")

INDEX_NAME = "memsift"
TIMED_FETCH_FACTOR, MAX_TIMED_FETCH = 4, 100  # hits fetched per collection when a time filter or window applies
_UNSUPPORTED_FLAG = (
    "unknown flag",
    "unknown option",
    "unrecognized option",
    "flag provided but not defined",
    "unexpected argument",
)
# "Collection not found: x", "Collection 'x' not found", "collection "x" does not exist", "No such collection".
_NOT_FOUND = re.compile(
    r"collection\b.{0,200}?\b(?:not found|does not exist|doesn't exist|is missing)|no such collection|unknown "
    r"collection",
    re.I | re.S,
)
EVERY_WORD_NOTE = (
    "QMD's `search` mode (BM25) finds only notes that contain every word of the query, and none does. "
    "Try fewer words, `--mode hybrid` or `--mode vector` (QMD's `query` / `vsearch`, which need its local "
    "embedding models), or set memory.qmd.searchMode."
)
# Without QMD's local models `query` and `vsearch` cannot run (a download would time out): only fewer words help.
EVERY_WORD_NOTE_NO_MODELS = (
    "QMD's `search` mode (BM25) finds only notes that contain every word of the query, and none does. "
    "Try fewer words (QMD's hybrid and vector modes need its local embedding models, which are not installed; "
    "`memsift -b builtin search` ranks notes by any of the words)."
)
STATUS_PROBE_S = 5.0  # `status` asks qmd at most this long per call (the reference's probe bound)


def _ms(value: float, default: float) -> float:
    return value / 1000 if value and value > 0 else default / 1000


class QmdSearchManager(KeywordSearch):
    backend = "qmd"

    def __init__(self, settings: ResolvedConfig, *, environ: Mapping[str, str] | None = None) -> None:
        self.settings = settings
        self.qmd = settings.memory.qmd
        self.home = settings.state_dir / "agents" / settings.agent_id / "qmd"
        self.config_dir = self.home / "xdg-config"
        self.cache_dir = self.home / "xdg-cache"
        self._environ = os.environ if environ is None else environ  # read at each call: a fixed PATH is seen
        u = self.qmd.update
        self.command_timeout = _ms(u.command_timeout_ms, 30_000)
        self.update_timeout = _ms(u.update_timeout_ms, 120_000)
        self.embed_timeout = _ms(u.embed_timeout_ms, 120_000)
        self.search_budget = _ms(self.qmd.limits.timeout_ms, 4000)  # one budget for the whole search
        self.debounce_s = max(0.0, u.debounce_ms / 1000)
        self.interval_s = parse_duration_ms(u.interval, default_ms=300_000) / 1000
        self.embed_interval_s = parse_duration_ms(u.embed_interval, default_ms=3_600_000) / 1000
        self.sessions_dir = sessions_folder(settings)
        sess = self.qmd.sessions
        self.export_dir = session_export_dir(settings)
        self.collections = resolve_collections(settings, self.export_dir if sess.enabled else None)
        self.memory_rules = MemoryRules.from_settings(settings)
        self._exe: str | None = None
        self._argv0: list[str] | None = None
        self._version: str | None = None
        self._set_up = False
        self._changes: Any = None  # the host's exact change check (a ChangeView), or our own
        self._own_changes: Any = None
        self._searches = 0
        self._left_out: tuple[Any, list[dict[str, str]]] | None = None  # (QMD's last update, its left-out files)
        self.maint = QmdMaintenance(
            home=self.home, index_yml=self.index_yml, collections=self.collections, run=self._qmd, settings=settings,
            sessions_dir=self.sessions_dir, export_dir=self.export_dir, models_available=self.models_available,
            models_dir=self.cache_dir / "qmd" / "models",
            timeouts={"command": self.command_timeout, "update": self.update_timeout, "embed": self.embed_timeout},
            debounce_s=self.debounce_s, interval_s=self.interval_s, embed_interval_s=self.embed_interval_s,
        )

    # --- environment and processes --------------------------------------------------------------

    def child_env(self) -> dict[str, str]:
        env = {
            k: v for k, v in self._environ.items() if k not in ("PWD", "OLDPWD", "CI", "INDEX_PATH", "QMD_CONFIG_DIR")
        }
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

    async def _qmd(self, *args: str, timeout: float, check: bool = True, doing: str | None = None,
                   kill_grace_s: float = KILL_GRACE_S):
        env = self.child_env()
        if self._argv0 is None:
            self._exe = self._exe or resolve_command(self.qmd.command, env)
            self._argv0 = command_prefix(self._exe, env)
        try:
            return await run_qmd(
                [*self._argv0, "--index", INDEX_NAME, *args],
                env=env,
                cwd=self._child_cwd(),
                timeout_s=timeout,
                check=check,
                doing=doing or f"running `qmd {args[0]}`",
                kill_grace_s=kill_grace_s,
            )
        except QmdSpawnError:
            self._exe = self._argv0 = None  # found again next time (qmd reinstalled elsewhere)
            self._set_up = False
            raise

    def _child_cwd(self) -> str:
        """QMD's working folder: its own home (no project-local `.qmd/` above it can shadow the
        index), made when missing (a fresh state folder); `/` when it cannot be made."""
        if not self.home.is_dir():
            try:
                make_private_dir(self.home)
            except OSError:
                return "/"
        return str(self.home)

    def _link_models(self) -> None:
        """Share the user's downloaded QMD models (never download them here)."""
        target = self.cache_dir / "qmd" / "models"
        if target.exists() or target.is_symlink():
            return
        base = user_cache_path(self._environ)
        if base is None:  # no home folder known: no user cache to share
            return
        shared = Path(base) / "qmd" / "models"
        if shared.is_dir() and shared.resolve() != target.resolve():
            try:
                target.symlink_to(shared, target_is_directory=True)
            except OSError as exc:
                log.warning("cannot link the shared QMD models", error=str(exc))

    def models_available(self) -> bool:
        models = self.cache_dir / "qmd" / "models"
        return models.is_dir() and any(p.suffix == ".gguf" and "embed" in p.name.lower() for p in models.iterdir())

    # --- start-up -------------------------------------------------------------------------------

    def _setup(self) -> None:
        """Folders, the command and the shared models: no qmd process, no lock."""
        if self._set_up:
            return
        for d in (self.config_dir / "qmd", self.cache_dir / "qmd"):
            make_private_dir(d)
        self._exe = resolve_command(self.qmd.command, self.child_env())
        self._link_models()
        self._set_up = True

    def _live_collections(self) -> list[ManagedCollection]:
        registered = read_index_yml(self.index_yml)
        return [c for c in self.collections if registered.get(c.name) == (str(c.path), c.pattern) and c.path.is_dir()]

    # --- update and embed (maintenance.py) ------------------------------------------------------

    async def sync(self, *, force: bool = False, reason: str = "manual") -> SyncReport:
        self._setup()
        return await self.maint.sync(reason, force_embed=force)

    async def start_background(self, task_group: anyio.abc.TaskGroup) -> None:
        """For long-running hosts (MCP server, watcher): the boot update (awaited when
        `waitForBootSync`, else in the background), then updates every `update.interval`; embeds
        follow `embedInterval` with their back-off. Updates a search starts outlive it here.
        Cancelling the task group stops it all."""
        self._setup()
        await self.maint.start(task_group)

    # --- freshness ------------------------------------------------------------------------------

    def watch_changes(self, probe: Any) -> None:
        """A long-running host's exact change check (a `ChangeView`, or None to stop): a search
        updates QMD first when a memory file changed since the last one, not only once
        `update.debounceMs` has passed, so a note written just before a search is found."""
        self._close_own_changes()
        self._changes = probe

    def _files_changed(self) -> bool:
        """Did a memory file change since the last search? A manager no host watches (the Python
        API's, kept open) makes its own check at its second search, and updates then for what came
        before it; a one-shot search (the cold CLI) keeps the debounce rule alone."""
        if self._changes is None:
            self._searches += 1
            if self._searches < 2 or not self.maint.on_search:
                return False
            from memsift.engine.files.change_probe import memory_change_probe  # noqa: PLC0415

            self._own_changes = self._changes = memory_change_probe(self.settings)
            return True
        return bool(self._changes.changed())

    def _close_own_changes(self) -> None:
        if self._own_changes is not None:
            self._own_changes.close()
            self._own_changes = self._changes = None

    # --- search ---------------------------------------------------------------------------------

    def _over_budget(self, detail: str) -> str:
        return f"qmd did not answer within {self.search_budget:.1f} s (memory.qmd.limits.timeoutMs): {detail}"

    async def _search_collection(
        self, mode: str, q: str, limit: int, c: ManagedCollection, facts: dict[str, Any]
    ) -> list[QmdHit]:
        args = [mode, "--json", "-n", str(limit), "-c", c.name, "--", q]
        left = facts["deadline"] - time.monotonic()
        if left <= 0:
            raise QmdTimeout(
                self._over_budget("; ".join([*facts["waited"], f"no time was left to search collection {c.name}"]))
            )
        try:
            # Read-only: a search that runs out of time is killed at once (no SIGTERM grace).
            res = await self._qmd(*args, timeout=left, doing=f"searching collection {c.name}", kill_grace_s=0)
        except QmdTimeout:
            raise QmdTimeout(
                self._over_budget(
                    "; ".join([*facts["waited"], f"searching collection {c.name} was stopped after {left:.1f} s"])
                )
            ) from None
        except QmdExitError as exc:
            text = (exc.stderr + exc.stdout).lower()
            if mode != "query" and any(f in text for f in _UNSUPPORTED_FLAG):
                facts["effective_mode"], facts["mode_fallback"] = "query", "unsupported-search-flags"
                return await self._search_collection("query", q, limit, c, facts)
            if _NOT_FOUND.search(text) and not facts.get("repaired"):
                facts["repaired"] = True
                log.info(f"qmd says collection {c.name} is missing: registering it again")
                try:
                    await self.maint.repair(facts["deadline"])
                except LockBusy as busy:
                    raise QmdError(
                        self._over_budget(f"collection {c.name} is missing and {busy.holder} holds QMD's lock")
                    ) from None
                return await self._search_collection(mode, q, limit, c, facts)
            raise
        hits = parse_search_output(res.stdout, res.stderr)
        if not hits and mode == "vsearch" and "(100%) need embeddings" in res.stderr:
            # QMD answers `[]` when nothing is embedded: that is an outage, not "no memories".
            raise QmdError(
                "qmd vsearch has no embeddings to search (every document needs `qmd embed`, which needs local models)"
            )
        return [h if not h.path else replace(h, path=spelled_on_disk(c.path, h.path)) for h in hits]

    def _map_path(self, c: ManagedCollection, rel: str) -> str | None:
        abs_path = Path(os.path.normpath(c.path / rel))
        if abs_path != c.path and c.path not in abs_path.parents:
            return None  # a hit outside its collection: drop it
        ws = self.settings.workspace
        if ws in abs_path.parents:
            out = abs_path.relative_to(ws).as_posix()
            if not out.startswith("qmd/"):
                return out
        if c.kind == "custom":
            # An extra path's file (or a memory.qmd.paths one) is cited as every backend cites it
            # (`../extra/runbooks/pager.md`), not as `qmd/custom-1-main/pager.md`: the same file has
            # one citation whichever backend answered (parity, an agent's stored citations).
            # `memsift get` reads either form.
            try:
                return self.memory_rules.resolve(str(abs_path))[1]
            except PathNotAllowedError:
                pass  # not a memory file by the shared rules: the alias below, which the scope drops
        return f"qmd/{c.name}/{Path(rel).as_posix()}"

    @property
    def query_config(self) -> Any:
        return self.settings.memory_search.query

    async def answer(self, req: SearchRequest) -> SearchAnswer:
        # The question was read as on every backend (cut, cleaned, its times); an argv of megabytes cannot even
        # start qmd. QMD gathers its own candidates (`req.candidates` is not for it), and its own default cut.
        started = time.perf_counter()
        max_results, min_score, session_key, explain = req.max_results, req.min_score, req.session_key, req.explain
        time_filter, query, q, windows, time_only = req.time_filter, req.query, req.q, req.windows, req.time_only
        words = topic_words(q, windows) if windows and not time_only else None  # a topic's words, beside the time
        limits = self.qmd.limits
        cap = max(1, int(limits.max_results))
        limit = min(cap, max_results) if max_results else cap
        # QMD knows no dates: with a time to honour, fetch more and judge each hit by its note's day.
        fetch = min(MAX_TIMED_FETCH, limit * TIMED_FETCH_FACTOR) if (time_filter or windows) else limit
        threshold = 0.0 if min_score is None else min(1.0, max(0.0, min_score))
        # A mode asked for per search picks QMD's command (keyword: search, vector: vsearch, hybrid: query).
        mode = QMD_MODE_FOR.get(req.mode, self.qmd.search_mode)
        facts: dict[str, Any] = {
            "effective_mode": mode,
            "deadline": time.monotonic() + self.search_budget,
            "waited": [],
        }
        hits: list[SearchHit] = []
        notes: list[str] = []
        pending = False
        below: BelowMinScore | None = None
        if q:
            self._setup()
            fresh = await self.maint.before_search(self.search_budget, changed=self._files_changed())
            notes, pending, facts["waited"] = fresh.notes, fresh.pending, fresh.waited
            registered = self._live_collections()
            if not registered and not any(c.path.is_dir() for c in self.collections):
                log.warning("qmd has no collection to search: none of its folders exists")
                notes.append("QMD has no collection to search: none of its folders exists "
                             "(memory.qmd.paths, memory.qmd.includeDefaultMemory)")
            elif not registered:
                if fresh.waited:
                    raise QmdError(self._over_budget(f"it has no collections to search yet: {'; '.join(fresh.waited)}"))
                why = "; ".join(fresh.notes) or "run `memsift -b qmd index`"
                raise QmdError(f"qmd has no collections to search: none is registered ({why})")
            # The corpus asked for: only its collections are searched.
            live = [c for c in registered if req.keeps("sessions" if c.kind == "sessions" else "memory")]
            read_note = self._notes_read_once()  # several steps below read the same notes
            if words and len(words) <= MAX_COMMON_WORDS:  # words beside the time may select no notes
                weightless = weightless_in_notes(live, words, read_note)
                time_only = names_only_a_time(q, windows, weightless.__contains__)
            # The named days' notes (or the nearest days') are the answer; QMD's BM25 has nothing left to match.
            if time_only:
                hits, time_only = self._window_hits(live, windows, time_filter, limit, session_key, explain)
                live = []
            else:
                log.info(
                    f"qmd: searching {len(live)} collection(s)",
                    mode=mode,
                    left=f"{facts['deadline'] - time.monotonic():.1f} s",
                )
            found = await self._search_live(live, without_time_expressions(q, windows), fetch, facts)
            if not found and words and facts["effective_mode"] == "search":
                # QMD's BM25 wants every word, and a time question's "what did I …" is in no note: its topic words.
                found = await self._search_live(live, " ".join(words), fetch, facts)
            if windows and words and not time_only:  # the window's notes QMD's every-word match left out
                found += self._window_candidates(live, windows, words, found, read_note)
            if time_filter or windows:
                found = self._timed(found, time_filter, windows, facts, read_note, words or [])
            if not time_only:
                hits = self._to_hits(found, threshold, limit, session_key, explain, facts)
            under = [h.score for h, _c in found if h.score < threshold]
            if not hits and under:
                below = BelowMinScore(candidates=len(under), best_score=max(under))
            elif not hits and facts["effective_mode"] == "search" and len(q.split()) > 1:
                notes.append(self._every_word_note())
        timed = req.time_facts(time_only=time_only)
        if timed.get("time_note") and (timed.get("time_window_days") or 0) > cap:
            timed["time_note"] += f"; QMD answers at most {cap} (memory.qmd.limits.maxResults)"
        return SearchAnswer(
            query=query,
            results=hits,
            backend=self.backend,
            mode=facts["effective_mode"],
            provider="qmd",
            model=None if facts["effective_mode"] == "search" else self._embed_model(),
            citations=self.settings.memory.citations,
            min_score=threshold,
            max_results=limit,
            took_ms=round((time.perf_counter() - started) * 1000, 3),
            sync_pending=pending or None,
            notes=notes or None,
            below_min_score=below,
            **timed,
        )

    def _window_hits(self, live: list[ManagedCollection], windows: list[TimeWindow], time_filter: TimeWindow | None,
                     limit: int, session_key: str | None, explain: bool) -> tuple[list[SearchHit], dict[str, Any]]:
        """A time-only question's answer: the windows' notes read from the collections' files, a day
        at a time (engine/search/time_only.py), each scoring 1.0, the since/until filter applied; for
        a window without notes, the nearest days' notes. Returns the hits and the window's facts."""
        chunking = self.settings.memory_search.chunking
        items = window_notes(live, nearby_windows(windows), shown_path=self._map_path, read_note=self._note_text,
                             strategy=chunking.strategy, tokens=chunking.tokens, overlap=chunking.overlap)
        ranked, window_facts = time_only_answer(_mtime, items, windows, time_filter, limit)
        facts = {"mode": "time-only", "boosts": {}, "rescued": set()}
        hits = hits_from_ranked(ranked, facts, terms=[], ranks={}, hybrid=self.settings.memory_search.query.hybrid,
                                cite=citations_enabled(self.settings.memory.citations, session_key),
                                snippet_chars=max(1, int(self.qmd.limits.max_snippet_chars)), explain=explain)
        return _clamp_injected(hits, int(self.qmd.limits.max_injected_chars)), window_facts

    async def _search_live(self, live: list[ManagedCollection], text: str, fetch: int,
                           facts: dict[str, Any]) -> list[tuple[QmdHit, ManagedCollection]]:
        """Each collection searched; a document found in several keeps its best hit."""
        best: dict[str, tuple[QmdHit, ManagedCollection]] = {}
        for c in live:
            for h in await self._search_collection(facts["effective_mode"], text, fetch, c, facts):
                key = h.docid or f"{c.name}:{h.path}"
                if key not in best or h.score > best[key][0].score:
                    best[key] = (h, c)
        return list(best.values())

    def _timed(self, found: list, time_filter: TimeWindow | None, windows: list[TimeWindow], facts: dict,
               read_note: ReadNote, words: list[str]) -> list:
        """QMD's hits judged by their notes' days: the since/until filter, then the question's windows
        (the shared engine/search/time_rank.py rules: each hit's score scaled, an in-window note of the
        topic before a margin's), the list re-sorted. Each hit's day and time factor are kept in
        `facts["time"]` for its explain, its closeness to the window and topic words in `facts["fit"]`."""
        items: list[Candidate] = []
        for i, (h, c) in enumerate(found):
            abs_path = Path(os.path.normpath(c.path / (h.path or "")))
            day = day_at(h.path or "", read_note(c, h.path or ""), h.start_line or 1, h.snippet or "")
            items.append(
                Candidate(
                    chunk_id=str(i),
                    path=str(abs_path),
                    source="memory",
                    start_line=h.start_line or 1,
                    end_line=h.end_line or 1,
                    text=h.snippet or "",
                    score=h.score,
                    day=day.day,
                    day_source=day.source,
                )
            )

        items = apply_time_filter(items, time_filter, _mtime)
        apply_time_windows(items, windows, self.settings.memory_search.query.time.weight)
        if windows:
            # QMD rounds a word that every note holds to a score of 0: the time decides such ties
            items.sort(key=lambda it: (-it.score, -it.time_factor))
            items = candidates_inside_first(items, words)
        out = []
        judged, fit = facts.setdefault("time", {}), facts.setdefault("fit", {})
        for it in items:
            h, c = found[int(it.chunk_id)]
            judged[(c.name, h.path, h.start_line)] = {"day": it.day, "daySource": it.day_source,
                                                      "timeFactor": round(it.time_factor, 3)}
            fit[(c.name, h.path, h.start_line)] = (it.window_closeness, it.topic_words)
            out.append((replace(h, score=it.score), c))
        return out

    def _window_candidates(self, live: list[ManagedCollection], windows: list[TimeWindow], words: list[str],
                           found: list[tuple[QmdHit, ManagedCollection]],
                           read_note: ReadNote) -> list[tuple[QmdHit, ManagedCollection]]:
        """The notes of the question's windows and their margins (the days every indexed backend adds
        to its candidates: `candidate_windows`) that hold some of the topic's words, read from the
        collections' files. QMD's BM25 wants every word: "what bug did I fix last week?" found only a
        note of months ago holding both, never last week's "Fixed HER-95". Each scores the share of
        the words it holds (a word or one of its forms, as word beginnings) times the best score QMD gave, so
        a note with every word still ranks first at the same time; the window then judges them all."""
        chunking = self.settings.memory_search.chunking
        by_name = {c.name: c for c in live}
        known = {(c.name, h.path) for h, c in found}
        best = max((h.score for h, _c in found), default=1.0)
        # a word or one of its forms ("meet": "met"), as word beginnings
        patterns = [
            re.compile(
                r"\b(?:"
                + "|".join(re.escape(f.casefold()) for f in [w, *expand_terms([w.casefold()], synonyms=False)])
                + ")"
            )
            for w in words
        ]
        out: list[tuple[QmdHit, ManagedCollection]] = []
        for item in window_notes(live, candidate_windows(windows), shown_path=self._map_path, read_note=read_note,
                                 strategy=chunking.strategy, tokens=chunking.tokens, overlap=chunking.overlap):
            name, rest = item.chunk_id.split(":", 1)
            rel = rest.rsplit(":", 1)[0]
            if (name, rel) in known:
                continue  # QMD found this note itself: its own hit stands
            text = item.text.casefold()
            share = sum(1 for p in patterns if p.search(text)) / len(patterns)
            if share > 0:
                out.append((QmdHit(None, round(best * share, 4), name, rel, None, item.text, item.start_line,
                                   item.end_line), by_name[name]))
        return out

    def _notes_read_once(self) -> ReadNote:
        """`_note_text` for one search: each note read once, whichever steps ask for it."""
        texts: dict[tuple[str, str], str] = {}

        def read(c: ManagedCollection, rel: str) -> str:
            if (c.name, rel) not in texts:
                texts[(c.name, rel)] = self._note_text(c, rel)
            return texts[(c.name, rel)]

        return read

    def _note_text(self, c: ManagedCollection, rel: str) -> str:
        """A hit's note, read by the memory rules (a file they refuse has no day: "")."""
        shown = self._map_path(c, rel)
        try:
            return self.memory_rules.read(shown, max_chars=MAX_MARKDOWN_BYTES).text if shown else ""
        except (PathNotAllowedError, OSError):
            return ""

    def _line_count(self, shown: str, counted: dict[str, int | None]) -> int | None:
        """A hit's file's number of lines, as `memory_get` counts them (streamed, nothing kept)."""
        if shown not in counted:
            try:
                counted[shown] = self.memory_rules.read(shown, max_chars=0).total_lines or None
            except (PathNotAllowedError, OSError):
                counted[shown] = None
        return counted[shown]

    def _every_word_note(self) -> str:
        return EVERY_WORD_NOTE if self.models_available() else EVERY_WORD_NOTE_NO_MODELS

    def _embed_model(self) -> str | None:
        """QMD's embedding model, as its config names it (`hf:…/embeddinggemma-300M-Q8_0.gguf` → the file stem)."""
        try:
            data = yaml.safe_load(self.index_yml.read_text(encoding="utf-8")) or {}
            uri = str((data.get("models") or {}).get("embed") or "")
        except (OSError, yaml.YAMLError, UnicodeDecodeError, AttributeError):
            return None
        return Path(uri).stem or None

    def _to_hits(
        self, found, threshold: float, limit: int, session_key: str | None, explain: bool, facts: dict
    ) -> list[SearchHit]:
        max_snippet = max(1, int(self.qmd.limits.max_snippet_chars))
        cite = citations_enabled(self.settings.memory.citations, session_key)
        ranked: list[SearchHit] = []
        counted: dict[str, int | None] = {}
        judged = facts.get("time", {})

        def order(hc: tuple[QmdHit, ManagedCollection]) -> tuple[float, float, str]:
            h, c = hc  # ties (QMD rounds scores) go to the question's time, then the path
            return -h.score, -judged.get((c.name, h.path, h.start_line), {}).get("timeFactor", 1.0), h.path or ""

        for h, c in sorted(found, key=order):
            if h.score < threshold or not h.path:
                continue
            path = self._map_path(c, h.path)
            if path is None:
                continue
            start = h.start_line or 1
            end = h.end_line or start
            total = self._line_count(path, counted)
            if total:  # QMD's snippet range may run one line past the end: a citation must read back
                end = min(end, total)
                start = min(start, end)
            hit = SearchHit(
                path=path,
                start_line=start,
                end_line=end,
                score=h.score,
                snippet=utf16_slice(h.snippet, max_snippet),
                source="sessions" if c.kind == "sessions" else "memory",
                citation=citation_for(path, start, end) if cite else None,
            )
            fit = facts.get("fit", {}).get((c.name, h.path, h.start_line), (None, None))
            hit.window_closeness, hit.topic_words = fit
            if explain:
                hit.details = {
                    "mode": facts["effective_mode"],
                    "rawScore": h.score,
                    "docid": h.docid,
                    "collection": c.name,
                    **facts.get("time", {}).get((c.name, h.path, h.start_line), {}),
                }
            ranked.append(hit)
        return _clamp_injected(_diversify(ranked)[:limit], int(self.qmd.limits.max_injected_chars))

    # --- read -----------------------------------------------------------------------------------

    async def read(self, path: str, from_line: int | None = None, lines: int | None = None, *,
                   max_chars: int | None = None, offset: int = 0) -> ReadResult:
        # `qmd/<collection>/<path>` and workspace paths alike: the rules every backend reads by.
        return await read_memory(self.memory_rules, path, from_line, lines, max_chars=max_chars, offset=offset)

    # --- status ---------------------------------------------------------------------------------

    async def status(self, *, deep: bool = False) -> ManagerStatus:
        info: dict[str, Any] = {}
        state = self.maint.state()
        probe = min(self.command_timeout, STATUS_PROBE_S)  # a hung qmd never holds status up for long
        try:
            self._exe = self._exe or resolve_command(self.qmd.command, self.child_env())
            res = await self._qmd("--version", timeout=probe, doing="reporting its version", kill_grace_s=0)
            self._version = parse_version(res.stdout)
            if self.index_yml.exists():
                res = await self._qmd("status", timeout=probe, doing="reporting its status", kill_grace_s=0)
                info.update(parse_status(res.stdout))
        except QmdError as exc:
            info["error"] = str(exc)
        registered = read_index_yml(self.index_yml)
        collections = [
            {"name": c.name, "path": str(c.path), "pattern": c.pattern, "kind": c.kind,
             "registered": c.name in registered, "folderExists": c.path.is_dir(),
             "state": _collection_state(c, registered, info.get("error"))}
            for c in self.collections
        ]
        docs = info.get("documents", 0)
        seen = self.maint.stamps()  # the memory files QMD's last update saw; None before one
        files, skipped = self._memory_files()  # skipped by memsift's rules (links, names, iCloud placeholders)
        pending = None if seen is None else pending_changes(files, seen, {})[0]
        left_out = [] if info.get("error") or not seen else await self._left_out_by_qmd(
            registered, probe, state.get("lastUpdateAt"), files, seen)
        return ManagerStatus(
            backend=self.backend,
            agent_id=self.settings.agent_id,
            workspace_dir=str(self.settings.workspace),
            db_path=str(self.index_db),
            files=docs,
            chunks=docs,
            provider="qmd",
            requested_provider="qmd",
            model=None if self.qmd.search_mode == "search" else self._embed_model(),
            sources=["memory"] + (["sessions"] if self.qmd.sessions.enabled else []),
            search_mode=self.qmd.search_mode,
            dirty=bool(pending),
            index={} if pending is None else {"pendingChanges": pending},
            skipped=[{"path": k.path, "reason": k.reason} for k in skipped] + left_out,
            vector={"available": bool(info.get("vectors")), "rows": info.get("vectors")},
            details={
                "version": self._version,
                "command": self._exe or self.qmd.command,
                "home": str(self.home),
                "error": info.get("error"),  # qmd did not answer status: searches would fall back
                "collections": collections,
                "documents": docs,
                "vectors": info.get("vectors"),
                "pendingEmbeddings": info.get("pending"),
                "updating": self.maint.lock.describe_holder(),
                "lastUpdateAt": state.get("lastUpdateAt"),
                "lastEmbedAt": state.get("lastEmbedAt"),
                "embedSkipped": None
                if self.models_available()
                else f"no local embedding model in {self.cache_dir / 'qmd' / 'models'}",
                "embedFailures": state.get("embedFailures", 0),
                "embedBackoffUntil": state.get("embedBackoffUntil"),
                "lastError": state.get("lastError") or info.get("error"),
                "modelsAvailable": self.models_available(),
            },
        )

    async def _left_out_by_qmd(self, registered: dict[str, tuple[str, str]], timeout: float, updated_at: Any,
                               files: list[Any], seen: dict[str, Any]) -> list[dict[str, str]]:
        """The Markdown memory files QMD's last update saw (`seen`) but did not index (its own rules
        leave out hidden names, `.MD` and some characters): unsearchable on this backend, so status
        names them. Kept until the next update (the OpenClaw plugin asks for status often; `qmd ls`
        takes 0.2 s)."""
        key = (updated_at, sorted(registered.items()))
        if self._left_out is not None and self._left_out[0] == key:
            return self._left_out[1]
        indexed: set[str] = set()
        for c in self.collections:
            if c.kind == "sessions":
                continue
            if registered.get(c.name) != (str(c.path), c.pattern):
                # QMD's index is another folder's (this agent's QMD home served another workspace):
                # what it lacks says nothing of QMD's rules; status says to run `memsift index`.
                return []
            try:
                res = await self._qmd("ls", c.name, timeout=timeout, doing=f"listing collection {c.name}",
                                      kill_grace_s=0)
            except QmdError:
                return []  # no list, no claim (and nothing kept: the next status asks again)
            indexed.update(os.path.normpath(c.path / spelled_on_disk(c.path, n)) for n in parse_ls(res.stdout, c.name))
        left_out = [
            {"path": f.rel_path, "reason": f"QMD did not index it ({_why_qmd_skips(f.rel_path)}): "
                                           "rename it to search it on QMD (the builtin backend searches it)"}
            for f in files
            if f.rel_path in seen and f.rel_path.lower().endswith(".md") and os.path.normpath(f.abs_path) not in indexed
        ]
        self._left_out = (key, left_out)
        return left_out

    def _memory_files(self) -> tuple[list[Any], list[Any]]:
        """The memory files on disk, as every backend finds them, and those skipped (status only)."""
        from memsift.engine.files.discovery import discover_memory_files  # noqa: PLC0415

        return discover_memory_files(self.settings.workspace, self.settings.memory_search.extra_paths)

    async def aclose(self) -> None:
        # Every qmd process is awaited (and killed on timeout) by the call that started it.
        self._close_own_changes()


def _why_qmd_skips(rel: str) -> str:
    if any(part.startswith(".") for part in rel.split("/")[:-1] if part != ".."):
        return "QMD skips hidden folders"
    if rel.rsplit("/", 1)[-1].startswith("."):
        return "QMD skips hidden files"
    if not rel.endswith(".md"):
        return "QMD's pattern **/*.md does not match a capital .MD"
    return "QMD skips some characters in names, such as `:` and `\\`"


def _collection_state(c: ManagedCollection, registered: dict[str, tuple[str, str]], qmd_error: str | None) -> str:
    if not c.path.is_dir():
        return "folder missing"
    fix = "qmd is failing" if qmd_error else "run `memsift -b qmd index`"
    if c.name not in registered:
        return f"not registered ({fix})"
    if registered[c.name] != (str(c.path), c.pattern):
        return f"registered for another folder or pattern ({fix})"
    return "registered, but qmd is failing" if qmd_error else "ok"


def _mtime(path: str) -> float | None:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


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
