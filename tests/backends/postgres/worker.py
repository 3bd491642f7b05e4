"""A separate memsift process for the Postgres concurrency tests: `python worker.py ROLE DSN STATE WORKSPACE`.

Roles: sync (one sync), slow-rebuild (a forced rebuild whose embeddings take 20 ms per text, to be
killed midway; prints a line when it starts). Prints one JSON line with the report or the error.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from helpers import make_settings  # noqa: E402

from memsift.backends.postgres import PostgresSearchManager  # noqa: E402
from memsift.engine.embeddings.fake import FakeEmbeddingProvider  # noqa: E402


class SlowFake(FakeEmbeddingProvider):
    def __init__(self) -> None:
        super().__init__(model="slow-bow")

    async def embed_documents(self, texts):
        await anyio.sleep(0.02 * len(texts))
        return await super().embed_documents(texts)


async def main(role: str, dsn: str, state: Path, ws: Path) -> dict:
    settings = make_settings(
        state, ws, {"sync": {"onSearch": False}}, memory={"backend": "postgres", "postgres": {"dsn": dsn}}
    )
    provider = SlowFake() if role == "slow-rebuild" else FakeEmbeddingProvider()
    async with PostgresSearchManager(settings, provider=provider) as m:
        try:
            if role == "slow-rebuild":
                print(json.dumps({"started": True}), flush=True)
            report = await m.sync(force=role == "slow-rebuild")
            return {"role": role, "ok": True, "indexed": report.files_indexed, "full": report.full_reindex}
        except Exception as exc:
            return {"role": role, "ok": False, "error": f"{type(exc).__name__}: {exc}"}


if __name__ == "__main__":
    role, dsn, state, ws = sys.argv[1], sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])
    print(json.dumps(anyio.run(main, role, dsn, state, ws)), flush=True)
