"""`RerankingSearchManager`: the rerank stage, once, above every backend (builtin, QMD and its
fallback, Postgres), composed by the factory like the scope wrapper.

The backend is asked for `candidates` hits (its own merge, decay, repeated-line drop, minScore and
keyword rescue decide which hits are eligible); the reranker scores each hit's snippet against the
query; the final score blends both:

    final = (1 - weight) * hybrid + weight * rerank        (rerank = relevance in 0..1)

then hits are sorted by it, MMR (when `query.hybrid.mmr` is on) diversifies that order again, and
the top `maxResults` are kept. minScore is not judged again on the blend: each backend's scores
have their own scale and the keyword rescue keeps exact-identifier hits under it on purpose.

A reranker that fails, runs past `timeoutMs`, or cannot be set up leaves the backend's order,
with `degraded.rerank` saying why; failures in a row open a circuit (shared with cold CLI
processes through a file beside the index) so a dead reranker costs nothing for a while.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

import anyio

from ..config.models import MmrConfig, RerankConfig
from ..embeddings.circuit import QueryCircuit
from ..errors import ProviderError
from ..logging import get_logger
from ..manager import SearchManager
from ..search.ranking import Candidate, mmr_rerank
from ..search.request import SearchRequest, renote_window
from ..results import ManagerStatus, RerankExplain, RerankSummary, SearchAnswer, SearchHit
from ..secrets import redact
from ..text import shorten
from .wrapped import WrappedManager
from ..rerank.base import Reranker, RerankBudgetExceeded, to_relevance

__all__ = ["RerankingSearchManager", "blend", "diversify", "ERROR_CHARS"]

log = get_logger("memsift.rerank")

ERROR_CHARS = 300  # a reranker's error is cut to this in degraded.rerank


def blend(hybrid: float, relevance: float, weight: float) -> float:
    """The documented blend: (1 - weight) * hybrid + weight * rerank."""
    return (1.0 - weight) * hybrid + weight * relevance


def diversify(hits: list[SearchHit], scores: list[float], order: list[int], lambda_: float) -> list[int]:
    """MMR over new scores (on the snippets), so a stage that reorders keeps the diversity MMR gave."""
    items = [Candidate(chunk_id=str(i), path=hits[i].path, source=hits[i].source, start_line=hits[i].start_line,
                       end_line=hits[i].end_line, text=hits[i].snippet, score=scores[i]) for i in order]
    return [int(c.chunk_id) for c in mmr_rerank(items, lambda_)]


class RerankingSearchManager(WrappedManager):
    """A `SearchManager` whose answers are reranked; every other call is the wrapped manager's."""


    def __init__(self, inner: SearchManager, config: RerankConfig, *, mmr: MmrConfig | None = None,
                 default_max_results: int = 6, circuit_path: Path | None = None,
                 reranker: Reranker | Callable[[], Reranker] | None = None) -> None:
        super().__init__(inner)
        self.config = config
        self.mmr = mmr or MmrConfig()
        self.default_max_results = default_max_results
        self.circuit_path = circuit_path
        # Built when first needed: a missing key or model folder is a degraded search, not a failed start.
        self._factory = reranker if callable(reranker) and not isinstance(reranker, Reranker) else None
        self._reranker = reranker if isinstance(reranker, Reranker) else None
        self._setup_error: str | None = None
        self._circuit: QueryCircuit | None = None

    # --- the reranker and its circuit -----------------------------------------------------------

    def reranker(self) -> Reranker | None:
        """The reranker, or None with `_setup_error` saying why it cannot be built."""
        if self._reranker is None and self._setup_error is None and self._factory is not None:
            try:
                self._reranker = self._factory()
            except ProviderError as exc:
                self._setup_error = redact(str(exc))
                log.warning("reranker unavailable; answers keep the backend's order", reason=self._setup_error)
        return self._reranker

    def circuit(self, reranker: Reranker) -> QueryCircuit:
        if self._circuit is None or self._circuit.fingerprint != reranker.fingerprint:
            self._circuit = QueryCircuit(reranker.fingerprint, self.circuit_path)
        return self._circuit

    # --- SearchManager --------------------------------------------------------------------------

    async def answer(self, request: SearchRequest) -> SearchAnswer:
        wanted = max(1, int(request.max_results if request.max_results is not None else self.default_max_results))
        pool = max(wanted, self.config.candidates)
        answer = await self._inner.answer(request.but(max_results=pool))
        if answer.denied is not None or answer.unavailable is not None or not answer.results:
            answer.max_results = min(answer.max_results, wanted)
            answer.results = answer.results[:wanted]
            renote_window(answer)
            return answer
        started = time.perf_counter()
        reranker = self.reranker()
        hits = answer.results
        raw, reason = await self._scores(reranker, answer.query, hits)  # the query as the backend cut it
        if raw is None or reranker is None:
            answer.degraded.rerank = reason
            answer.results = hits[:wanted]
        else:
            answer.results = self._reorder(hits, raw, reranker.logits, request.explain)[:wanted]
        took = (time.perf_counter() - started) * 1000
        answer.max_results = min(answer.max_results, wanted)
        answer.took_ms = round(answer.took_ms + took, 3)
        answer.rerank = RerankSummary(
            provider=self.config.provider, model=reranker.model if reranker else (self.config.model or ""),
            candidates=len(hits), weight=self.config.weight, took_ms=round(took, 3), applied=raw is not None,
        )
        renote_window(answer)  # a time-only answer cut here says so
        return answer

    async def _scores(
        self, reranker: Reranker | None, query: str, hits: list[SearchHit]
    ) -> tuple[list[float] | None, str | None]:
        """The reranker's raw scores for the hits, or None and why it was skipped."""
        if reranker is None:
            return None, f"reranker unavailable: {self._setup_error}; the backend's order is kept"
        circuit = self.circuit(reranker)
        paused = circuit.paused_for()
        if paused is not None:
            return None, (
                f"reranker {reranker.id} failed {circuit.failures} searches in a row (last: {circuit.last_error}); "
                f"rerank paused for {paused:.0f} s more (circuit open), the backend's order is kept"
            )
        budget_s = self.config.timeout_ms / 1000
        try:
            with anyio.fail_after(budget_s):
                raw = await reranker.score(query, [h.snippet for h in hits], deadline=time.monotonic() + budget_s)
        except TimeoutError:
            circuit.record_failure(f"budget of {budget_s:g} s exceeded")
            return None, (f"rerank budget exceeded: {reranker.id} did not score {len(hits)} hits within "
                          f"{self.config.timeout_ms:g} ms (query.rerank.timeoutMs); the backend's order is kept")
        except RerankBudgetExceeded as exc:  # stopped early: between batches, or no time for a retry
            message = shorten(redact(str(exc)), ERROR_CHARS)
            circuit.record_failure(message)
            if exc.failure:  # a request failed (an HTTP 500…): that is the news, not the budget
                failure = shorten(redact(exc.failure), ERROR_CHARS)
                log.warning("rerank failed; keeping the backend's order", reranker=reranker.id, reason=failure)
                return None, (f"rerank failed: {failure} (not retried: no time left in query.rerank.timeoutMs, "
                              f"{self.config.timeout_ms:g} ms); the backend's order is kept")
            return None, (f"rerank budget exceeded ({self.config.timeout_ms:g} ms, query.rerank.timeoutMs): {message}; "
                          "the backend's order is kept")
        except Exception as exc:  # any reranker failure degrades to the backend's order, visibly
            message = shorten(redact(str(exc) or type(exc).__name__), ERROR_CHARS)
            circuit.record_failure(message)
            log.warning("rerank failed; keeping the backend's order", reranker=reranker.id, reason=message)
            return None, f"rerank failed: {message}; the backend's order is kept"
        if len(raw) != len(hits):
            circuit.record_failure(f"{len(raw)} scores for {len(hits)} hits")
            return (
                None,
                f"rerank failed: {reranker.id} returned {len(raw)} scores for {len(hits)} hits; the backend's order "
                f"is kept",
            )
        circuit.record_success()
        return raw, None

    def _reorder(self, hits: list[SearchHit], raw: list[float], logits: bool | None, explain: bool) -> list[SearchHit]:
        relevance = to_relevance(raw, logits)
        w = self.config.weight
        blended = [blend(h.score, r, w) for h, r in zip(hits, relevance)]
        order = sorted(range(len(hits)), key=lambda i: (-blended[i], i))  # ties keep the backend's order
        if self.mmr.enabled:
            order = diversify(hits, blended, order, self.mmr.lambda_)
        out = []
        for i in order:
            h = hits[i]
            if explain:
                h.rerank = RerankExplain(hybrid_score=h.score, rerank_score=round(relevance[i], 6), raw_score=raw[i],
                                         weight=w, blended=round(blended[i], 6), hybrid_rank=i + 1)
            h.score = round(blended[i], 6)
            out.append(h)
        return out

    async def status(self, *, deep: bool = False, **kw: Any) -> ManagerStatus:
        st = await self._inner.status(deep=deep, **kw)
        reranker = self.reranker()
        info: dict[str, Any] = {
            "provider": self.config.provider,
            "model": reranker.model if reranker else self.config.model,
            "candidates": self.config.candidates,
            "weight": self.config.weight,
            "timeoutMs": self.config.timeout_ms,
        }
        if reranker is None:
            info["error"] = self._setup_error
        else:
            info.update(reranker.status())
            circuit = self.circuit(reranker)
            paused = circuit.paused_for()
            info["circuit"] = {"open": paused is not None, "pausedForS": round(paused, 1) if paused else None,
                               "failures": circuit.failures, "lastError": circuit.last_error}
        st.rerank = info
        return st

    async def aclose(self) -> None:
        try:
            if self._reranker is not None:
                await self._reranker.aclose()
        finally:
            await self._inner.aclose()
