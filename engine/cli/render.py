"""Human-readable output of answers, reads and status (the --json forms are the models themselves)."""

from __future__ import annotations

import re
import sys
import textwrap
from typing import TYPE_CHECKING, Any, Callable

from ..durations import vector_progress_words
from ..results import Fallback, ManagerStatus, ScopeDenial, SearchAnswer, SearchHit
from ..manager import SyncReport
from .streams import discard_output, name_shown, on_the_terminal, shown_through_rich, terminal_safe

if TYPE_CHECKING:
    from .parity import ParityReport

__all__ = [
    "render_answer",
    "render_denial",
    "render_indexes",
    "render_parity",
    "render_status",
    "render_sync",
    "WatchStatus",
]


def render_denial(d: ScopeDenial) -> str:
    """The one line that says a chat was denied by the scope rules (search, get and status alike)."""
    return (
        f"Denied by scope ({d.rule}): channel={d.channel or 'unknown'}, chatType={d.chat_type}, "
        f"session={d.session_key or '<none>'}"
    )


def _words(key: str) -> str:
    """A details key as words: rawScore → raw score."""
    return re.sub(r"(?<=[a-z])([A-Z])", lambda m: " " + m.group(1).lower(), key)


def render_answer(answer: SearchAnswer, *, explain: bool = False) -> str:
    """A search's answer as `memsift search` prints it: each hit (header, snippet, citation, explain),
    what an empty answer means, one summary line, then what the reader should know about it."""
    out: list[str] = []
    for hit in answer.results:
        out += _hit_lines(answer, hit, explain)
        out.append("")
    nothing = _nothing_line(answer)
    if nothing:
        out.append(nothing)
    out.append(_summary(answer, explain))
    out += _footnotes(answer, explain)
    return "\n".join(out)


def _hit_lines(answer: SearchAnswer, hit: SearchHit, explain: bool) -> list[str]:
    # minScore judged the backend's score; the evidence ranker may have raised the one shown.
    judged = f" (scored {hit.ranker.base_score:.3f} before the evidence ranker)" if hit.ranker else ""
    rescued = f"rescued: under minScore {answer.min_score:g}{judged}, kept for its keyword match"
    if hit.rescued and answer.ranker and not hit.ranker:
        rescued = f"rescued: under minScore {answer.min_score:g} before the evidence ranker, kept for its keyword match"
    below = f"below minScore {answer.min_score:g}: nothing reached it, this is one of the closest"
    marks = [m for m, on in ((rescued, hit.rescued), (below, hit.below_min_score),
                             ("stale: the file changed after it was indexed", hit.stale)) if on]
    out = [f"{hit.score:.3f} {name_shown(hit.path)}:{hit.start_line}-{hit.end_line}"
           + "".join(f"  [{m}]" for m in marks), textwrap.indent(hit.snippet.rstrip(), "    ")]
    if hit.citation:
        out.append(f"    Source: {name_shown(hit.citation)}")
    if explain:
        out += _explain_lines(answer, hit)
    return out


def _explain_lines(answer: SearchAnswer, hit: SearchHit) -> list[str]:
    """How the hit's score was made: the backend's own facts, the pipeline's, the ranker's, the reranker's."""
    out = []
    if hit.details:
        out.append(f"    explain: {answer.backend} " + " ".join(f"{_words(k)}={v}" for k, v in hit.details.items()))
    e = hit.explain
    if e and answer.time_only:  # scored by the time asked for, not by evidence
        out.append(f"    explain: a note of the time asked for: day={e.day} ({e.day_source}) final={e.final_score:.3f}")
    elif e:
        parts = [
            f"keyword={_f(e.keyword_score)}" + (f" (bm25 {e.bm25_rank:.3f})" if e.bm25_rank is not None else ""),
            f"vector={_f(e.vector_score)}",
            f"weights={e.vector_weight:.2f}/{e.text_weight:.2f}",
        ]
        if e.lexical_boost is not None:
            parts.append(f"boost={e.lexical_boost:.3f}")
        if e.brevity < 1:
            parts.append(f"near-empty={e.brevity:.2f}")
        if e.day:
            parts.append(f"day={e.day} ({e.day_source})")
        if e.time_factor != 1:
            parts.append(f"time={e.time_factor:.3f}")
        parts += [f"decay={e.decay:.3f}", f"mmr-penalty={e.mmr_penalty:.3f}", f"final={e.final_score:.3f}"]
        if e.rescued:
            parts.append("rescued")
        out.append("    explain: " + " ".join(parts))
    if hit.ranker:
        k = hit.ranker
        feats = " ".join(f"{name.replace('_', '-')}={value:.3f}" for name, value in k.features.items())
        out.append(f"    ranker: backend={k.base_score:.3f} (rank {k.base_rank}) {feats} final={k.final:.3f}")
    if hit.rerank:
        r = hit.rerank
        out.append(f"    rerank: hybrid={r.hybrid_score:.3f} (rank {r.hybrid_rank}) reranker={r.rerank_score:.3f} "
                   f"(raw {r.raw_score:.3f}) weight={r.weight:.2f} blend={r.blended:.3f}")
    return out


def _nothing_line(answer: SearchAnswer) -> str | None:
    """What a denied, empty or below-minScore answer means, and what to do."""
    if answer.denied:
        return render_denial(answer.denied)
    if not answer.query.strip():
        return 'Empty query: nothing to search. Pass the words to look for, e.g. memsift search "ledger database".'
    if answer.results and all(h.below_min_score for h in answer.results) and answer.below_min_score:
        return (f"Nothing reached minScore {answer.min_score:g}; shown below it, marked: the {len(answer.results)} "
                f"closest of {answer.below_min_score.candidates} candidate(s).")
    if not answer.results and answer.below_min_score:
        b = answer.below_min_score
        return (f"No results at or above minScore {answer.min_score:g}: {b.candidates} candidate(s) scored lower "
                f"(best {b.best_score:.3f}); --min-score {max(0.0, int(b.best_score * 100) / 100):g} shows the best.")
    if not answer.results:
        return "No results."
    return None


def _summary(answer: SearchAnswer, explain: bool) -> str:
    """One line: how many, served how, by which ranker and reranker, how long."""
    parts = [f"{len(answer.results)} result(s)"]
    if answer.denied:
        parts.append("denied")
    elif answer.mode != "none" or answer.provider:
        parts.append(_served_by(answer))
    if explain and answer.ranker:
        parts.append(f"evidence ranker {answer.ranker.version} ({answer.ranker.candidates} candidates)")
    if answer.rerank and answer.rerank.applied:
        who = f"{answer.rerank.provider}/{answer.rerank.model}" if answer.rerank.model else \
            f"{answer.rerank.provider} (the server's own model)"  # no model set: the endpoint chooses
        parts.append(f"reranked by {who} ({answer.rerank.candidates} candidates, "
                     f"{answer.rerank.took_ms:.0f} ms)")
    if answer.took_ms:
        parts.append(f"{answer.took_ms:.0f} ms")
    summary = " · ".join(parts)
    if answer.relaxed:
        summary += " · threshold relaxed (nothing passed minScore)"
    return summary


def _footnotes(answer: SearchAnswer, explain: bool) -> list[str]:
    """What the reader should know about the answer: degraded sides, a fallback, time, notes, syncing."""
    out = []
    if answer.degraded.vector:
        out.append(f"vector search unavailable: {answer.degraded.vector}")
    if answer.degraded.fts:
        out.append(f"keyword search unavailable: {answer.degraded.fts}")
    if answer.degraded.rerank:
        out.append(f"not reranked: {answer.degraded.rerank}")
    if answer.fallback and _is_backend(answer.fallback):
        out.append(f"{answer.fallback.reason}; answered from the {answer.backend} index")
        out += [f"not covered by the {answer.backend} index: {gap}" for gap in answer.fallback.not_covered or []]
    elif answer.fallback:
        out.append(f"the embedding provider {answer.fallback.from_} failed ({answer.fallback.reason}); "
                   f"the fallback provider {answer.provider} embedded")
    if explain and answer.time_windows:
        out.append("time named in the question: " + "; ".join(answer.time_windows))
    if explain and answer.time_only and answer.results and answer.time_window_days != 0:
        days = sorted({h.explain.day for h in answer.results if h.explain and h.explain.day})
        span = days[0] if len(days) == 1 else f"{days[0]}..{days[-1]}" if days else "the window"
        out.append(f"the question names only a time: notes of {span}, in order (not cut by minScore)")
    if answer.time_note:
        out.append(answer.time_note)
    if answer.time_filter:
        out.append(f"filtered to {answer.time_filter}")
    out += answer.notes or []
    if answer.sync_pending:
        out.append(_catching_up(answer.pending_files))
    if answer.sync_error:
        out.append(f"index not updated: {answer.sync_error}")
    return out


def _is_backend(fallback: Fallback) -> bool:
    """A fallback from a backend (else it is an embedding provider's), as the answer says, or by the
    name (an answer of a memsift that did not say)."""
    if fallback.kind is not None:
        return fallback.kind == "backend"
    from ..plugins.registry import names  # noqa: PLC0415

    return fallback.from_ in names("backend")


def _served_by(answer: SearchAnswer) -> str:
    """'hybrid · local/all-MiniLM-L6-v2' (no 'none', no 'None', no 'qmd/qmd'); QMD: 'qmd search (BM25)',
    with its embedding model when it used one."""
    if answer.backend == "qmd" and answer.mode != "none":
        kind = {"search": "BM25", "vsearch": "vector", "query": "hybrid"}.get(answer.mode)
        return f"qmd {answer.mode}" + (f" ({kind})" if kind else "") + (f" · {answer.model}" if answer.model else "")
    parts = [answer.mode] if answer.mode != "none" else []
    if answer.provider:
        parts.append(answer.provider + (f"/{answer.model}" if answer.model and answer.model != answer.provider else ""))
    return " · ".join(parts)


def _catching_up(pending: int | None) -> str:
    what = f"{pending} changed file(s) were" if pending else "changed files were"
    return (f"The index is still catching up: {what} not indexed yet when this answer was made, so it may miss "
            "them. Run `memsift index` to finish (it shows progress), then search again.")


def _when(ts: float | None) -> str:
    if not ts:
        return "never"
    import time  # noqa: PLC0415

    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def _f(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def render_parity(report: ParityReport) -> str:
    """One line per query, notes for fallbacks and errors, then the summary."""
    k, o = report.k, report.against
    out = [f"NOT COMPARABLE: {w}" for w in report.warnings]  # first: the figures below cannot be trusted
    out += [f"note: {n}" for n in report.notes]
    out += [""] if out else []
    out += [f"{'overlap@' + str(k):>10} {'files@' + str(k):>8} {'tau':>6} {'builtin ms':>10} {o + ' ms':>8}  query"]
    for r in report.queries:
        tau = "-" if r.rank_correlation is None else f"{r.rank_correlation:+.2f}"
        out.append(
            f"{r.overlap:>10.2f} {r.file_overlap:>8.2f} {tau:>6} {r.builtin.ms:>10.1f} {r.other.ms:>8.1f}  "
            f"{_short(r.query)}"
        )
        for side in (r.builtin, r.other):
            for label, note in (("fell back", side.fallback), ("degraded", side.degraded), ("failed", side.error)):
                if note:
                    out.append(f"{'':>39}{side.backend} {label}: {note}")
    s = report.summary
    tau = (
        "n/a"
        if s["meanRankCorrelation"] is None
        else f"{s['meanRankCorrelation']:+.2f} over {s['rankCorrelationQueries']} queries"
    )
    out += [
        "",
        f"{s['queries']} queries, top {k}: mean overlap {s['meanOverlap']:.2f} (hits), {s['meanFileOverlap']:.2f} "
        f"(files); "
        f"rank correlation {tau}",
        f"latency p50/p95: builtin {s['builtinP50Ms']:.1f}/{s['builtinP95Ms']:.1f} ms, {o} "
        f"{s[o + 'P50Ms']:.1f}/{s[o + 'P95Ms']:.1f} ms",
        f"fallbacks: builtin {s['builtinFallbacks']}, {o} {s[o + 'Fallbacks']}; errors: builtin {s['builtinErrors']}, "
        f"{o} {s[o + 'Errors']}",
    ]
    if s.get("fellBackQueries"):
        out.append(
            f"not comparable: {s['fellBackQueries']} of {s['queries']} queries; mean overlap counting them as 0: "
            f"{s['gateMeanOverlap']:.2f} (what --fail-under checks)"
        )
    return "\n".join(out)


def _short(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def render_indexes(folder: object, indexes: list) -> str:
    """`memsift index --list`: one line per index, with its workspace and whether that still exists."""
    if not indexes:
        return f"No memsift indexes in {folder}."
    out = []
    for i in indexes:
        where = (i.workspace or "workspace not recorded (indexed by an older memsift)") + (
            "  [workspace missing: memsift index --prune removes it]" if i.workspace_exists is False else "")
        out.append(f"{i.path}\n    {where}\n    {i.files} files · {i.chunks} chunks · {i.provider}/{i.model} · "
                   f"{i.bytes / 2**20:.1f} MB · last written {_when(i.modified)}")
    return "\n".join(out)


def render_sync(report: SyncReport) -> str:
    if report.backend == "qmd":  # what QMD did, in its own terms (it has no chunks or embeddings of ours)
        return "\n".join(
            [
                f"qmd: {report.files_indexed} file(s) indexed, {report.files_unchanged} unchanged, "
                f"{report.files_removed} removed "
                f"· {report.took_ms / 1000:.2f} s",
                *(f"  {note}" for note in report.notes),
            ]
        )
    kind = f"full reindex ({report.reindex_cause})" if report.full_reindex else "incremental sync"
    lines = [
        f"{kind}: {report.files_indexed} file(s) indexed, {report.files_unchanged} unchanged, "
        f"{report.files_removed} removed, {report.files_skipped} skipped",
        f"chunks: {report.chunks_written} written, {report.chunks_embedded} embedded, "
        f"{report.chunks_from_cache} from cache · {report.took_ms / 1000:.2f} s",
    ]
    if report.reindex_cause and not report.full_reindex:
        lines.append(f"rebuild needed: {report.reindex_cause}")
    if report.fallback:
        lines.append(f"embedded by memorySearch.fallback, as {report.fallback.from_} failed ({report.fallback.reason})")
    lines += report.notes  # e.g. an index kept across an upgrade
    if "(builtin fallback: " in report.reason:  # the backend failed: what was indexed instead, and why
        lines.insert(
            0, f"{report.reason.split('(builtin fallback: ', 1)[1][:-1]}; the builtin index was synced instead"
        )
    return "\n".join(lines)


def _changes(s: ManagerStatus) -> str:
    pending = s.index.get("pendingChanges", 0)
    if not s.index.get("exists", True):
        return "no index yet"
    if pending:
        return f"{pending} file(s) changed since the last sync"
    return "none" + (" (settings changed: see Rebuild needed)" if s.index.get("rebuildNeeded") else "")


def _built_by(s: ManagerStatus) -> list[tuple[str, str]]:
    """Which memsift built the index, where it is not this one (an upgrade kept it, or will rebuild it)."""
    from ..files.fingerprint import made_by, memsift_version  # noqa: PLC0415

    meta = s.index.get("meta")
    if not isinstance(meta, dict) or meta.get("builtBy") == memsift_version():
        return []
    return [("Index built by", f"{made_by(meta)}; this is memsift {memsift_version()}")]


def _by_source(counts: dict[str, dict[str, int]]) -> str:
    """" (memory 3 · 9, sessions 1 · 2)": files and chunks of each source, when there are several."""
    if len(counts) < 2:
        return ""
    return " (" + ", ".join(f"{src} {c.get('files', 0)} · {c.get('chunks', 0)}" for src, c in counts.items()) + ")"


def render_status(s: ManagerStatus) -> str:
    if s.denied:
        return render_denial(s.denied)
    built = s.index.get("exists", True)
    rows = [("Searches", s.search_now)] if s.search_now else []
    rows += [
        ("Backend", s.backend),
        ("Agent", s.agent_id),
        ("Provider", f"{s.provider} (requested {s.requested_provider})"),
        (
            "Model",
            f"{s.model}"
            + (f" · {s.dimensions} dims" if s.dimensions else "")
            + (f" · {s.model_runtime}" if s.model_runtime else ""),
        ),
        ("Search mode", s.search_mode),
        *([("Time zone", s.time_zone)] if s.time_zone else []),
        ("Sources", ", ".join(s.sources) + (f" (transcripts: {s.transcripts})" if s.transcripts else "")),
        ("Extra paths", ", ".join(s.extra_paths) or "-"),
        (
            "Indexed",
            f"{s.files} files · {s.chunks} chunks{_by_source(s.source_counts)}"
            if s.files is not None
            else "unknown: the index cannot be read now",
        ),
        ("Changes", _changes(s)),
        *_built_by(s),
        ("Store", s.db_path or "-"),
        ("Workspace", s.workspace_dir),
        (
            "FTS",
            f"{'available' if s.fts.get('available') else 'unavailable'} · {s.fts.get('tokenizer')}"
            if built
            else f"not built yet · {s.fts.get('tokenizer')}",
        ),
        (
            "Vector",
            (
                f"{'available' if s.vector.get('available') else 'unavailable'} · {s.vector.get('search')}"
                + (f" · {s.vector.get('loadError')}" if s.vector.get("loadError") else "")
                + (f" · being made: {vector_progress_words(s.vector['pending'])}" if s.vector.get("pending") else "")
            )
            if built
            else "not built yet",
        ),
        ("Embedding cache", f"{'on' if s.cache.get('enabled') else 'off'} · {s.cache.get('entries')} entries"),
    ]
    if s.unavailable:  # nothing could be read from the backend: its counts are unknown, not zero
        rows = [r for r in rows if r[0] not in ("Indexed", "Changes", "FTS", "Vector", "Embedding cache")]
        rows.append(("Unreachable", s.unavailable))
    if s.details and s.backend == "qmd":  # the QMD backend has no FTS table, vector table or embedding cache of ours
        hidden: tuple[str, ...] = ("FTS", "Vector", "Embedding cache", "Extra paths", "Provider", "Model")
        if "pendingChanges" not in s.index:  # no update recorded by memsift yet: the changes are unknown
            hidden += ("Changes",)
        rows = [r for r in rows if r[0] not in hidden]
    if s.requests:
        r = s.requests
        rows.append(
            (
                "Requests",
                f"{r['requests']} sent · {r['retries']} retries · {r['failures']} failed"
                + (f" · last error: {r['lastError']}" if r.get("lastError") else ""),
            )
        )
    if s.rerank:
        rr, circuit = s.rerank, s.rerank.get("circuit") or {}
        state = (
            f"unavailable: {rr['error']}"
            if rr.get("error")
            else f"circuit open for {circuit.get('pausedForS')} s more (last error: {circuit.get('lastError')})"
            if circuit.get("open")
            else "on"
        )
        who = f"{rr['provider']}/{rr['model']}" if rr.get("model") else f"{rr['provider']} (the server's own model)"
        rows.append(("Rerank", f"{who} · {rr['candidates']} candidates · weight {rr['weight']:g} · budget "
                               f"{rr['timeoutMs']:g} ms · {state}"))
    if s.ranker:
        rows.append(
            (
                "Ranker",
                f"evidence ranker {s.ranker['version']} · top {s.ranker['candidates']} hybrid hits of daily logs "
                "and sessions (query.ranker)",
            )
        )
    if s.batch.get("enabled"):
        b = s.batch
        rows.append(
            (
                "Batch API",
                f"{'usable' if b['usable'] else 'disabled'} · {b['jobs']} job(s) · {b['failures']}/{b['limit']} "
                f"failures",
            )
        )
    if s.provider_unavailable_reason and not s.search_now:  # otherwise it is in the first row
        rows.append(("No provider", s.provider_unavailable_reason))
    if s.fallback:
        rows.append(("Fallback", f"from {s.fallback.from_}: {s.fallback.reason}"))
        rows += [("  not covered", gap) for gap in s.fallback.not_covered or []]
    if s.details and "qmd" in (s.backend, s.fallback.from_ if s.fallback else None):  # QMD's, answering or failed
        q = s.details
        rows.append(("QMD", f"{q.get('version') or '?'} · {q.get('command')} · home {q.get('home')}"))
        said = {s.fallback.reason} if s.fallback else set()  # each reason once
        if q.get("error") and q["error"] not in said:
            # Said only when it is so: with `fallback: "none"` (status carries `unavailable`) searches exit 7.
            falls_back = not s.fallback and not s.unavailable
            rows.append(
                ("QMD failing", q["error"] + (" (searches fall back to the builtin index)" if falls_back else ""))
            )
            said.add(q["error"])
        for c in q.get("collections", []):
            rows.append(("  collection", f"{c['name']} · {c['path']} ({c['pattern']}) · {c.get('state')}"))
        if q.get("updating"):
            rows.append(("Updating", q["updating"]))
        rows.append(("Last update", _when(q.get("lastUpdateAt"))))
        rows.append(
            ("Last embed", _when(q.get("lastEmbedAt")) + (f" · {q['embedSkipped']}" if q.get("embedSkipped") else ""))
        )
        if q.get("lastError") and q["lastError"] not in said:
            rows.append(("Last error", q["lastError"]))
    if s.index.get("rebuildNeeded"):
        rows.append(("Rebuild needed", f"{s.index['rebuildNeeded']} — run `memsift index`"))
    if s.index.get("lastEmbedError"):
        rows.append(("Last embed error", s.index["lastEmbedError"]))
    if s.skipped:
        rows.append(("Skipped", "; ".join(f"{name_shown(x['path'])}: {x['reason']}" for x in s.skipped[:10])))
    if s.deep:
        emb = s.deep.get("embedding", {})
        if emb.get("ok"):
            rows.append(("Embeddings", f"ok · {emb['model']} · {emb['dimensions']} dims · {emb['latencyMs']} ms"))
        else:
            rows.append(("Embeddings", f"unavailable · {emb.get('error')}"))
        if "integrity" in s.deep:
            rows.append(("Integrity", s.deep["integrity"]))
    if s.plugins is not None:
        rows.append(
            (
                "Plugins",
                "; ".join(_plugin_line(p) for p in s.plugins)
                or "none installed (`memsift plugins` lists what memsift can use)",
            )
        )
    if s.helper:
        rows.append(("Helper", _helper_line(s.helper)))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)


def _helper_line(h: dict) -> str:
    if not h.get("running"):
        return h.get("why", "none")
    rss = f" · {h['rssMB']:.0f} MB" if h.get("rssMB") is not None else ""
    if h.get("kind") in ("watch", "mcp"):  # a long-running command answers the CLI's searches
        return f"`memsift {h['kind']}` answers searches · pid {h['pid']} · up {_minutes(h.get('ageS'))}{rss}"
    return (f"pid {h['pid']} · up {_minutes(h.get('ageS'))} · exits after {h.get('idleTimeout')} idle{rss}"
            + (" · `memsift helpers stop` ends it" if rss else ""))


def _minutes(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    return f"{seconds:.0f} s" if seconds < 60 else f"{seconds / 60:.0f} min"


class WatchStatus:
    """`memsift watch` output: a live status line on a terminal, plain lines otherwise, or JSON
    lines on stdout with --json. When what reads them is gone (`watch --json | head -1`, a log
    shipper that exited), `on_gone` is called (the watch stops, exit 0) and nothing more is written;
    the same for output the machine refuses (`write_error`: a full disk), which the watch then says."""

    def __init__(self, settings, *, as_json: bool = False) -> None:
        self.settings = settings
        self.as_json = as_json
        self.live = not as_json and sys.stderr.isatty()
        self.syncs = 0
        self.answered = 0  # CLI searches answered from this process
        self.last = "starting"
        self._status: Any = None
        self.on_gone: Callable[[], None] | None = None
        self.reader_gone = False
        self.write_error: OSError | None = None

    def _print(self, line: str, *, err: bool) -> None:
        if self.reader_gone:
            return
        stream = sys.stderr if err else sys.stdout
        try:
            print(line, file=stream, flush=True)
        except OSError as exc:  # a reader gone (EPIPE); or `> /dev/full`, a full disk: said when it stops
            self.reader_gone = True
            if not isinstance(exc, (BrokenPipeError, ConnectionResetError)):
                self.write_error = exc
            discard_output(stream)
            if self.on_gone is not None:
                self.on_gone()

    def __enter__(self) -> WatchStatus:
        if self.live:
            from rich.console import Console  # noqa: PLC0415

            self._console = Console(file=on_the_terminal(sys.stderr))
            self._status = self._console.status(self._live_line())
            self._status.__enter__()
            shown_through_rich()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._status is not None:
            self._status.__exit__(None, None, None)

    def _line(self) -> str:
        return (f"watching {self.settings.workspace} · {self.syncs} sync(s) · {self.answered} search(es) answered · "
                f"{self.last} · Ctrl-C to stop")

    def _live_line(self) -> Any:
        from rich.text import Text  # noqa: PLC0415

        return Text(terminal_safe(self._line()))  # as written, never markup: a path may hold "[red]" or "[/x]"

    def _say(self, text: str) -> None:
        if self.live:
            self._console.print(terminal_safe(text), markup=False)  # an error may hold "[/var/lib/…]" or ESC
            self._status.update(self._live_line())
        else:
            self._print(f"memsift watch: {text}", err=True)

    def event(self, kind: str, payload: dict) -> None:
        import json  # noqa: PLC0415
        import time  # noqa: PLC0415

        now = time.strftime("%H:%M:%S")
        if self.as_json:
            data: dict[str, Any] = {"event": kind, "time": now}
            if kind == "synced":
                data.update(
                    reason=payload["reason"],
                    seconds=round(payload["seconds"], 3),
                    report=payload["report"].model_dump(by_alias=True),
                )
                if payload.get("alreadyIndexed"):
                    data["alreadyIndexed"] = True
            else:
                data.update({k: v for k, v in payload.items()})
            self._print(json.dumps(data), err=False)
            return
        if kind == "synced":
            r = payload["report"]
            self.syncs += 1
            self.last = f"last sync {now} ({payload['reason']})"
            if payload.get("alreadyIndexed"):
                self._say(f"{now} already indexed: a search synced the change first")
                return
            self._say(f"{now} synced ({payload['reason']}): {r.files_indexed} indexed, {r.files_removed} removed, "
                      f"{r.chunks_embedded} chunk(s) embedded in {payload['seconds']:.2f} s"
                      + (f"; by the fallback provider ({r.fallback.from_} failed)" if r.fallback and r.chunks_embedded
                         else "")
                      + (f"; vectors not made ({r.vectors_error}): searchable by keyword, the next sync tries again"
                         if r.vectors_error else ""))
        elif kind == "changed":
            self._say(f"{now} {payload['files']} file(s) changed")
        elif kind == "error":
            self.last = f"last sync failed {now}"
            self._say(f"{now} sync failed ({payload['reason']}): {payload['error']}")
        elif kind == "ready":
            self._say(f"{now} watching {self.settings.workspace} (Ctrl-C to stop)")
        elif kind == "config":
            self._say(f"{now} {payload['error']}" if payload.get("error") else
                      f"{now} the config changed: watching with its new settings")
            for note in payload.get("warnings") or ():
                self._say(f"{now} warning: {note}")
        elif kind == "resident" and payload.get("socket"):
            self._say(f"{now} answering `memsift search` for this workspace from here")
        elif kind == "answered":
            self.answered += 1
            if self._status is not None:
                self._status.update(self._live_line())

    def stopped(self) -> None:
        if not self.as_json:
            self._say("stopped")


def _plugin_line(p: dict[str, Any]) -> str:
    state = (
        f"failed to load: {p['error']}"
        if p.get("error")
        else f"shadowed by {p['shadowedBy']}"
        if p.get("shadowedBy")
        else ""
    )
    return f"{p['name']} ({p['kind']}) · {p['package']} {p['version']}" + (f" · {state}" if state else "")


def render_plugins(found: list[Any]) -> str:
    """`memsift plugins`: one table per kind; memsift's own marked as built in."""
    out = []
    for kind in ("backend", "provider", "reranker"):
        rows = [f for f in found if f.kind == kind]
        out.append(f"{kind.capitalize()}s:")
        width = max((len(f.name) for f in rows), default=0)
        for f in rows:
            origin = "built in" if f.builtin else f"{f.package} {f.version}"
            if f.error:
                what = f"FAILED to load: {f.error}"
            elif f.shadowed_by:
                what = f"not used: {f.shadowed_by} registers the same name"
            else:
                what = getattr(f.plugin, "description", "") or ""
            out.append(f"  {f.name:<{width}}  {origin:<24} {what}".rstrip())
        out.append("")
    broken = sum(1 for f in found if f.error)
    if broken:
        out.append(f"{broken} plugin(s) could not be loaded; the others work. Reinstall or remove the package named.")
    else:
        out.append("Use one with memory.backend, memorySearch.provider or memorySearch.query.rerank.provider.")
    return "\n".join(out)
