"""Backend parity (`memsift parity`): the same queries on builtin and QMD (or Postgres, or OpenClaw's own
memory search), compared.

Two hits are the same memory when they name the same file and their line ranges overlap (the
backends chunk differently, so exact ranges rarely match). Per query: overlap@k of hits and of
files, Kendall's tau over the ranks of the hits both sides found, each side's latency, and what
each side degraded to. The point is to know, before switching backends, how much the answers move.

A side that fell back to another backend (QMD down, so builtin answered) or failed outright makes
its query not comparable: builtin would be compared with itself. Such queries lead the report
(`comparable: false`, `warnings`), count as 0 in the gate's mean overlap, and fail the gate.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from ..config import ResolvedConfig
from ..errors import ConfigError, MemsiftError
from ..results import SearchAnswer

__all__ = ["read_queries", "match_hits", "overlap_at_k", "kendall_tau", "run_parity", "gate_failure", "ParityReport"]

Hit = tuple[str, int, int]  # path, start line, end line


class _Out(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class SideResult(_Out):
    backend: str
    answered_by: str | None = None  # the backend that really answered (another one when it fell back)
    mode: str | None = None
    hits: list[Hit] = Field(default_factory=list)
    ms: float = 0.0
    fallback: str | None = None  # why this side was served by another backend (or provider)
    degraded: str | None = None
    reranked: bool | None = None  # the rerank stage reordered this side's hits (query.rerank.enabled)
    error: str | None = None  # the search failed outright (unavailable, denied or raised)

    @property
    def not_comparable(self) -> str | None:
        """Why this side's hits say nothing about its backend: it fell back to another, or failed."""
        if self.error:
            return "failed"
        if self.answered_by and self.answered_by != self.backend:
            return f"fell back to {self.answered_by}"
        return None


class QueryParity(_Out):
    # The other side is kept under its backend's name (`"qmd": {…}`, `"lancedb": {…}`: `--against`).
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    query: str
    builtin: SideResult
    overlap: float  # hits in common / the longer top-k list (1.0 when both are empty)
    file_overlap: float  # the same over distinct files
    common: int
    rank_correlation: float | None  # Kendall's tau over the common hits; None with fewer than 2

    @property
    def other(self) -> SideResult:
        side = next(iter((self.model_extra or {}).values()))
        return side if isinstance(side, SideResult) else SideResult.model_validate(side)


class ParityReport(_Out):
    comparable: bool = True  # False when a side fell back or failed on some query (first, so it is read first)
    warnings: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)  # what is worth knowing about a side, comparable all the same
    against: str = "qmd"  # the backend compared with builtin
    k: int
    queries: list[QueryParity]
    summary: dict[str, float | int | None]


def read_queries(path: str | Path) -> list[str]:
    """One query per line (blank lines and `#` comments skipped), or JSON lines with a `query` field."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")  # a byte-order mark (Notepad's) is no query's
    except UnicodeDecodeError as exc:
        byte = exc.object[exc.start]
        raise ConfigError(f"cannot read queries file {str(path)!r}: it is not UTF-8 text (byte {byte:#04x} at "
                          f"{exc.start:,}): save it as UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"cannot read queries file {str(path)!r}: {exc.strerror or exc}") from None
    queries = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("{"):
            try:
                line = str(json.loads(line)["query"]).strip()
            except (ValueError, KeyError, TypeError) as exc:
                raise ConfigError(f"{path}:{number}: a JSON line needs a \"query\" string ({exc})") from exc
        if line:
            queries.append(line)
    if not queries:
        raise ConfigError(f"no queries in {str(path)!r}")
    return queries


def match_hits(a: Sequence[Hit], b: Sequence[Hit]) -> list[tuple[int, int]]:
    """One-to-one pairs (rank in a, rank in b) of hits on the same file with overlapping lines."""
    pairs, taken = [], set()
    for i, (path, start, end) in enumerate(a):
        for j, (p2, s2, e2) in enumerate(b):
            if j not in taken and p2 == path and s2 <= end and start <= e2:
                pairs.append((i, j))
                taken.add(j)
                break
    return pairs


def overlap_at_k(a: Sequence[object], b: Sequence[object], common: int) -> float:
    longest = max(len(a), len(b))
    return 1.0 if longest == 0 else common / longest


def kendall_tau(pairs: Sequence[tuple[int, int]]) -> float | None:
    n = len(pairs)
    if n < 2:
        return None
    score = 0
    for x in range(n):
        for y in range(x + 1, n):
            da, db = pairs[x][0] - pairs[y][0], pairs[x][1] - pairs[y][1]
            score += 1 if da * db > 0 else -1
    return score / (n * (n - 1) / 2)


def compare(query: str, builtin: SideResult, qmd: SideResult, k: int) -> QueryParity:
    """`qmd`: the other side (QMD or Postgres, as its `backend` says)."""
    a, b = builtin.hits[:k], qmd.hits[:k]
    pairs = match_hits(a, b)
    files_a, files_b = list(dict.fromkeys(h[0] for h in a)), list(dict.fromkeys(h[0] for h in b))
    common_files = len(set(files_a) & set(files_b))
    return QueryParity(
        query=query, builtin=builtin, **{qmd.backend: qmd}, common=len(pairs),
        overlap=round(overlap_at_k(a, b, len(pairs)), 4),
        file_overlap=round(overlap_at_k(files_a, files_b, common_files), 4),
        rank_correlation=None if (tau := kendall_tau(pairs)) is None else round(tau, 4),
    )


def _side(backend: str, answer: SearchAnswer | None, ms: float, error: str | None = None) -> SideResult:
    if answer is None:
        return SideResult(backend=backend, ms=round(ms, 2), error=error)
    degraded = "; ".join(f"{k}: {v}" for k, v in (("vector", answer.degraded.vector), ("fts", answer.degraded.fts),
                                                   ("rerank", answer.degraded.rerank)) if v)
    denied = f"denied by scope ({answer.denied.rule})" if answer.denied else None
    return SideResult(
        backend=backend, answered_by=answer.backend, mode=answer.mode, ms=round(ms, 2),
        hits=[(h.path, h.start_line, h.end_line) for h in answer.results],
        fallback=f"{answer.fallback.from_} → {answer.backend}: {answer.fallback.reason}" if answer.fallback else None,
        degraded=degraded or None, error=answer.unavailable or denied,
        reranked=answer.rerank.applied if answer.rerank else None,
    )


async def run_parity(settings: ResolvedConfig, queries: Sequence[str], *, k: int = 5, session_key: str | None = None,
                     sync: bool = True, mode: str | None = None, against: str = "qmd",
                     say: Callable[[str], None] | None = None, openclaw_command: str = "openclaw") -> ParityReport:
    """Sync both backends, warm each up with one untimed query, then time every query on each.
    `say` hears each step before it starts (what it waits for, and for how long at most). Each
    query is a request like any door's (an invalid mode or key: InvalidRequest).
    `against="openclaw"`: OpenClaw's own memory search through its CLI (parity_openclaw.py)."""
    say = say or (lambda _step: None)
    from ..compose.factory import open_manager  # noqa: PLC0415
    from ..compose.scoped import search_request  # noqa: PLC0415

    def ask(query: str) -> Any:
        return search_request(settings, "cli", query=query, max_results=k, session_key=session_key, mode=mode)

    ask("")  # a bad mode or key: before any backend opens
    from .parity_openclaw import OPENCLAW_SIDE, OpenClawSide  # noqa: PLC0415

    if against == "builtin":
        raise ConfigError(
            "parity compares builtin with another backend (--against qmd, postgres, openclaw or an installed plugin's)"
        )
    openclaw = OpenClawSide(settings, openclaw_command, say) if against == OPENCLAW_SIDE else None
    managers = {name: open_manager(settings, backend=name) for name in ("builtin", against) if name != OPENCLAW_SIDE}
    try:
        if sync:
            for name, manager in managers.items():
                say(f"syncing {name}{_sync_bound(settings, name)}")
                await manager.sync(reason="parity")
            if openclaw:
                await openclaw.sync()
        elif openclaw:
            await openclaw.check_workspace()
        say(
            f"warming up {'memsift' if openclaw else 'both backends'}, then {len(queries)} "
            f"quer{'y' if len(queries) == 1 else 'ies'} "
            f"on each{' (an OpenClaw CLI call per query: seconds each)' if openclaw else ''}"
        )
        for manager in managers.values():
            await manager.answer(ask(queries[0]))  # model load, first spawn
        rows = []
        for n, query in enumerate(queries, 1):
            sides = {}
            for name, manager in managers.items():
                started = time.perf_counter()
                try:
                    answer, error = await manager.answer(ask(query)), None
                except MemsiftError as exc:
                    answer, error = None, str(exc)
                sides[name] = _side(name, answer, (time.perf_counter() - started) * 1000, error)
            if openclaw:
                say(f"query {n} of {len(queries)} on OpenClaw")
                hits, ms, error = await openclaw.search(query, k)
                sides[OPENCLAW_SIDE] = SideResult(
                    backend=OPENCLAW_SIDE, answered_by=OPENCLAW_SIDE, hits=hits, ms=round(ms, 2), error=error
                )
            rows.append(compare(query, sides["builtin"], sides[against], k))
    finally:
        for manager in managers.values():
            await manager.aclose()
    warnings = _warnings(rows) + (openclaw.warnings if openclaw else [])
    return ParityReport(
        comparable=not warnings,
        against=against,
        warnings=warnings,
        notes=openclaw.notes if openclaw else [],
        k=k,
        queries=rows,
        summary=_summary(rows, against),
    )


def _sync_bound(settings: ResolvedConfig, backend: str) -> str:
    """How long a backend's sync may take at most, in words (QMD's update and embed timeouts)."""
    if backend != "qmd":
        return ""
    u = settings.memory.qmd.update
    return (f" (qmd update and embed: up to {u.update_timeout_ms / 1000:g} s and {u.embed_timeout_ms / 1000:g} s, "
            "memory.qmd.update.updateTimeoutMs / embedTimeoutMs)")


def _warnings(rows: list[QueryParity]) -> list[str]:
    """One line per side whose answers were not its own: how often, and the first reason."""
    out = []
    for name in ("builtin", "other"):
        sides = [getattr(r, name) for r in rows]
        name = sides[0].backend if sides else name
        for kind in sorted({s.not_comparable for s in sides if s.not_comparable}):
            hit = [s for s in sides if s.not_comparable == kind]
            reason = hit[0].error or hit[0].fallback or ""
            reason = reason.split(": ", 1)[-1] if hit[0].fallback else reason
            if kind.startswith("fell back"):
                out.append(f"{name} {kind} on {len(hit)} of {len(rows)} queries ({reason}): "
                           f"{hit[0].answered_by} was compared with itself there")
            else:
                out.append(f"{name} failed on {len(hit)} of {len(rows)} queries ({reason}): nothing to compare there")
    return out


def gate_failure(report: ParityReport, fail_under: float) -> str | None:
    """Why `--fail-under` fails, or None: a side fell back or failed on any query (those count as
    overlap 0), or the mean overlap is below the threshold."""
    s = report.summary
    gate = float(s["gateMeanOverlap"] or 0.0)
    if not report.comparable:
        return (f"parity gate failed: {'; '.join(report.warnings)}; mean overlap counting them as 0 is {gate:.2f} "
                f"(threshold {fail_under:.2f})")
    if gate < fail_under:
        return f"mean overlap {gate:.2f} is below {fail_under:.2f}"
    return None


def _summary(rows: list[QueryParity], against: str = "qmd") -> dict[str, float | int | None]:
    taus = [r.rank_correlation for r in rows if r.rank_correlation is not None]

    def pct(values: list[float], q: float) -> float:
        ordered = sorted(values)
        return round(ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))], 2)

    out: dict[str, float | int | None] = {
        "queries": len(rows),
        "meanOverlap": round(statistics.fmean(r.overlap for r in rows), 4),
        # The gate's figure: a query where a side fell back or failed counts as 0.
        "gateMeanOverlap": round(statistics.fmean(0.0 if _not_comparable(r) else r.overlap for r in rows), 4),
        "fellBackQueries": sum(1 for r in rows if _not_comparable(r)),
        "meanFileOverlap": round(statistics.fmean(r.file_overlap for r in rows), 4),
        "meanRankCorrelation": round(statistics.fmean(taus), 4) if taus else None,
        "rankCorrelationQueries": len(taus),
    }
    for side, attr in (("builtin", "builtin"), (against, "other")):
        ms = [getattr(r, attr).ms for r in rows]
        out[f"{side}P50Ms"], out[f"{side}P95Ms"] = pct(ms, 0.5), pct(ms, 0.95)
        out[f"{side}Fallbacks"] = sum(1 for r in rows if getattr(r, attr).fallback)
        out[f"{side}Errors"] = sum(1 for r in rows if getattr(r, attr).error)
    return out


def _not_comparable(row: QueryParity) -> bool:
    return bool(row.builtin.not_comparable or row.other.not_comparable)
