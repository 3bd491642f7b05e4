"""One search's query vector, computed once within a time budget; shared by the indexed backends."""

from __future__ import annotations

from typing import Any, Callable

import anyio
from ..lazy import np  # numpy on first use: a keyword search never needs it

from .base import EmbeddingProvider
from .circuit import QueryCircuit

__all__ = ["QueryEmbedding", "QUERY_BUDGET_S", "REMOTE_QUERY_BUDGET_S", "beside"]

# A search's query embedding has a short budget of its own (the local model may first have to
# load); past it the search answers by keyword and says so.
QUERY_BUDGET_S = {"local": 60.0}
REMOTE_QUERY_BUDGET_S = 5.0


async def beside(side: Callable[[], Any] | None, main: Callable[[], Any]) -> Any:
    """`main()`'s result, with `side()` running meanwhile; `main`'s exception propagates as it is
    (not wrapped in an exception group), and cancels `side`."""
    failure: BaseException | None = None
    async with anyio.create_task_group() as tg:
        if side is not None:
            tg.start_soon(side)
        try:
            result = await main()
        except Exception as exc:
            failure = exc
            tg.cancel_scope.cancel()
    if failure is not None:
        raise failure
    return result


class QueryEmbedding:
    """One query's vector, computed once within its budget; a provider failure (or an open
    circuit) becomes the reason vectors are missing."""

    def __init__(self, provider: EmbeddingProvider, text: str, circuit: QueryCircuit | None = None) -> None:
        self.provider, self.text, self.circuit = provider, text, circuit
        self.vector: np.ndarray | None = None
        self.error: str | None = None
        self.done = anyio.Event()

    async def run(self) -> None:
        budget = QUERY_BUDGET_S.get(self.provider.id, REMOTE_QUERY_BUDGET_S)
        try:
            paused = self.circuit.open_reason(self.provider.id) if self.circuit else None
            if paused:
                self.error = paused
                return
            with anyio.fail_after(budget):
                self.vector = await self.provider.embed_query(self.text)
            if self.circuit:
                self.circuit.record_success()
        except TimeoutError:
            self.error = (
                f"query embedding timed out after {budget:g} s (the provider did not answer): keyword results only"
            )
            if self.circuit:
                self.circuit.record_failure(f"timed out after {budget:g} s")
        except Exception as exc:  # a provider failure degrades to keyword search, visibly
            self.error = f"query embedding failed: {exc}"
            if self.circuit:
                self.circuit.record_failure(str(exc)[:200])
        finally:
            self.done.set()
