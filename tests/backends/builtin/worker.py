"""A separate process for concurrency tests: `python worker.py ROLE STATE WORKSPACE [N]`.

Roles: reindex (N forced full rebuilds), append (N new notes, each synced), search (N searches,
each must find MEMORY.md), slow-reindex / slow-sync (embedding sleeps, to be killed midway).
Prints one JSON line with its counts; any exception is an error in that line and exit code 1.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from helpers import make_settings  # noqa: E402

from memsift.backends.builtin import BuiltinSearchManager  # noqa: E402
from memsift.engine.embeddings.fake import FakeEmbeddingProvider  # noqa: E402


class SlowFake(FakeEmbeddingProvider):
    """Another model (nothing cached for it) that takes 10 ms per text."""

    def __init__(self) -> None:
        super().__init__(model="slow-bow")

    async def embed_documents(self, texts):
        await anyio.sleep(0.01 * len(texts))
        return await super().embed_documents(texts)


async def main(role: str, state: Path, ws: Path, n: int) -> dict:
    provider = SlowFake() if role.startswith("slow") else FakeEmbeddingProvider()
    m = BuiltinSearchManager(make_settings(state, ws, {"sync": {"onSearch": False}}), provider=provider)
    out = {"role": role, "ok": 0, "errors": []}
    started = time.perf_counter()
    for i in range(n):
        try:
            if role == "reindex":
                await m.sync(force=True)
            elif role == "append":
                (ws / "memory" / f"appended-{i}.md").write_text(f"- appended note number {i} about gannets\n")
                await m.sync()
            elif role == "search":
                answer = await m.search("dark roast coffee oat milk", min_score=0)
                assert answer.results and answer.results[0].path == "MEMORY.md", [h.path for h in answer.results]
            elif role in ("slow-reindex", "slow-sync"):
                print(json.dumps({"role": role, "started": True}), flush=True)
                await m.sync(force=role == "slow-reindex")
            out["ok"] += 1
        except Exception as exc:  # counted, not raised: the test asserts there are none
            out["errors"].append(f"{type(exc).__name__}: {exc}")
    out["seconds"] = time.perf_counter() - started
    await m.aclose()
    return out


if __name__ == "__main__":
    role, state, ws = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    result = anyio.run(main, role, state, ws, n)
    print(json.dumps(result), flush=True)
    sys.exit(1 if result["errors"] else 0)
