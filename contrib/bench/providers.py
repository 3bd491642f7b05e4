"""Remote-provider batching and retry figures, against the loopback provider server of the tests.

Run:  python contrib/bench/providers.py
Prints requests per 1,000 chunks for typical chunk sizes, and what injected 429s cost.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from provider_server import ProviderServer  # noqa: E402

from memsift.engine.config import MemorySearchConfig  # noqa: E402
from memsift.engine.embeddings import create_provider  # noqa: E402
from memsift.engine.errors import ProviderError  # noqa: E402


async def _no_wait(_seconds: float) -> None:
    return None


def _provider(server: ProviderServer, flavour: str):
    ms = MemorySearchConfig.model_validate(
        {"provider": flavour, "remote": {"baseUrl": server.base_url, "apiKey": "test-key-123456789"}}
    )
    return create_provider(flavour, ms, environ={}, sleep=_no_wait)


def main() -> None:
    rng = random.Random(7)
    sizes = {"daily-log chunks (~300 B)": (200, 400), "400-token chunks (~1,600 B)": (1400, 1800)}
    print(f"{'provider':10} {'chunks':28} {'requests/1000':>13}")
    for flavour in ("openai", "gemini", "voyage", "mistral", "ollama"):
        for label, (lo, hi) in sizes.items():
            texts = [("ledger migration notes and hotel plans " * 60)[: rng.randint(lo, hi)] for _ in range(1000)]
            with ProviderServer(flavour) as server:
                anyio.run(_provider(server, flavour).embed_documents, texts)
                print(f"{flavour:10} {label:28} {len(server.embedding_requests()):>13}")

    texts = [("ledger migration notes " * 80)[: rng.randint(1400, 1800)] for _ in range(1000)]
    print()
    for rate in (0.05, 0.1, 0.2, 0.3):
        with ProviderServer("openai") as server:
            server.rate_limit_rate = rate
            p = _provider(server, "openai")
            try:
                anyio.run(p.embed_documents, texts)
                outcome = "all 1000 embedded"
            except ProviderError as exc:
                outcome = f"failed: {exc}"
            print(f"429 on {rate:.0%} of requests: {p.stats.requests} requests, {p.stats.retries} retries, {outcome}")

if __name__ == "__main__":
    main()
