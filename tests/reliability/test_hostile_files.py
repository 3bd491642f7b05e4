"""Hostile files: binary `.md`, invalid UTF-8, a 200 MB Markdown file, files deleted or rewritten
mid-index, 100,000 tiny files. Indexing goes on, skips what it must with the reason in
`status --deep`, memory stays bounded, and the next sync matches the files.

MEMSIFT_TINY_FILES sets the tiny-file count (default 20,000 in CI; 100000 for the full run).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import apsw

from figures import FIGURES
from helpers import make_settings
from memsift.backends.builtin import BuiltinSearchManager
from memsift.backends.builtin.indexer import MAX_MARKDOWN_BYTES
from memsift.engine.embeddings import ProviderSelection
from memsift.engine.embeddings.fake import FakeEmbeddingProvider

TESTS = Path(__file__).resolve().parents[1]
RSS_BOUND_MB = 400


def _ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n- the user drinks dark roast coffee\n")
    return ws


def _indexed(db: Path) -> dict[str, str]:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return dict(conn.execute("SELECT path, hash FROM files"))
    finally:
        conn.close()


def _on_disk(ws: Path) -> dict[str, str]:
    """What the index should hold: every readable, text, under-the-cap .md memory file."""
    import hashlib  # noqa: PLC0415

    out = {}
    for p in [ws / "MEMORY.md", *sorted((ws / "memory").rglob("*.md"))]:
        if p.is_symlink() or not p.is_file() or p.stat().st_size > MAX_MARKDOWN_BYTES:
            continue
        data = p.read_bytes()
        if b"\x00" not in data:
            out[p.relative_to(ws).as_posix()] = hashlib.sha256(data).hexdigest()
    return out


def test_binary_and_invalid_utf8_files(tmp_path):
    ws = _ws(tmp_path)
    (ws / "memory" / "photo.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + os.urandom(4096))
    (ws / "memory" / "latin1.md").write_bytes("- caf\xe9 cr\xe8me br\xfbl\xe9e and gannets\n".encode("latin-1"))
    (ws / "memory" / "broken.md").write_bytes(b"- truncated \xe2\x82 sequence \xff\xfe and puffins \xed\xa0\x80\n")
    (ws / "memory" / "empty.md").write_bytes(b"")
    m = BuiltinSearchManager(make_settings(tmp_path, ws), provider=FakeEmbeddingProvider())

    async def go():
        report = await m.sync()
        assert report.files_skipped == 1
        hit = (await m.search("gannets", min_score=0)).results[0]
        assert hit.path == "memory/latin1.md" and "\ufffd" in hit.snippet  # decoded with replacement
        assert (await m.search("puffins", min_score=0)).results[0].path == "memory/broken.md"
        assert (await m.read("memory/broken.md")).text.startswith("- truncated")
        await m.aclose()

    anyio.run(go)
    assert set(_indexed(m.db_path)) == set(_on_disk(ws)) | {"memory/empty.md"} - {"memory/photo.md"}
    # The reason is in `status --deep` (human and --json), in a fresh process.
    cfg = tmp_path / "cfg.json5"
    cfg.write_text(json.dumps({"stateDir": str(tmp_path / "state")}))
    cli = [sys.executable, "-m", "memsift.engine.cli.main", "-c", str(cfg), "-w", str(ws), "status", "--deep"]
    human = subprocess.run(cli, capture_output=True, text=True, timeout=120)
    assert "memory/photo.md: binary content (NUL bytes)" in human.stdout, human.stdout + human.stderr
    data = json.loads(subprocess.run([*cli, "--json"], capture_output=True, text=True, timeout=120).stdout)
    assert {"path": "memory/photo.md", "reason": "binary content (NUL bytes)"} in data["skipped"]
    assert data["index"]["pendingChanges"] == 0  # a skipped file is not a pending change forever


CHILD = textwrap.dedent(
    """
    import json, resource, sys, anyio
    sys.path.insert(0, {tests!r})
    from pathlib import Path
    from helpers import make_settings
    from memsift.backends.builtin import BuiltinSearchManager
    from memsift.engine.embeddings.fake import FakeEmbeddingProvider
    root, ws = Path(sys.argv[1]), Path(sys.argv[2])
    async def go():
        m = BuiltinSearchManager(make_settings(root, ws), provider=FakeEmbeddingProvider())
        report = await m.sync()
        hits = (await m.search("dark roast coffee", min_score=0)).results
        st = await m.status(deep=True)
        await m.aclose()
        return {{"skipped": st.skipped, "indexed": report.files_indexed, "top": hits[0].path if hits else None}}
    out = anyio.run(go)
    # VmHWM: this process's own peak (ru_maxrss would include the parent's, inherited over exec).
    hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")]
    out["maxrss_mb"] = int(hwm[0].split()[1]) / 1024 if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))
    """  # noqa: E501
).format(tests=str(TESTS))


def test_a_200_mb_markdown_file_is_skipped_with_bounded_memory(tmp_path):
    ws = _ws(tmp_path)
    line = "- a line of an enormous markdown export about gannets, puffins and dark roast coffee\n"
    with open(ws / "memory" / "huge.md", "w") as fh:
        block = line * (2**20 // len(line) + 1)
        for _ in range(200):
            fh.write(block)
    (ws / "memory" / "small.md").write_text("- a small note next to the huge one\n")
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path), str(ws)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.splitlines()[-1])
    FIGURES["peak RSS MB while indexing 200 MB file"] = round(out["maxrss_mb"])
    assert out["indexed"] == 2 and out["top"] == "MEMORY.md"  # indexing went on
    reasons = {s["path"]: s["reason"] for s in out["skipped"]}
    assert reasons["memory/huge.md"].startswith("larger than 16 MiB")
    assert out["maxrss_mb"] < RSS_BOUND_MB, out


class MidSyncMutator(FakeEmbeddingProvider):
    """On its first embedding call (mid-sync), deletes one note, rewrites another and adds one."""

    def __init__(self, ws: Path) -> None:
        super().__init__()
        self.ws, self.done = ws, False

    async def embed_documents(self, texts):
        if not self.done:
            self.done = True
            (self.ws / "memory" / "n3.md").unlink()
            (self.ws / "memory" / "n5.md").write_text("- rewritten mid-index: kittiwakes\n")
            (self.ws / "memory" / "late.md").write_text("- added mid-index: fulmars\n")
            FIGURES["faults injected: files deleted/rewritten/added mid-index"] += 3
        return await super().embed_documents(texts)


def test_files_deleted_and_rewritten_mid_index(tmp_path):
    ws = _ws(tmp_path)
    for i in range(10):
        body = "\n".join(f"- note {i} line {j} about shearwaters " + "pad " * 30 for j in range(60))
        (ws / "memory" / f"n{i}.md").write_text(body + "\n")
    provider = MidSyncMutator(ws)
    m = BuiltinSearchManager(make_settings(tmp_path, ws, {"sync": {"onSearch": False}}), provider=provider)

    async def go():
        await m.sync()  # goes on despite the changes under it
        assert provider.done
        await m.sync()  # the next sync catches up
        assert _indexed(m.db_path) == _on_disk(ws)
        assert (await m.search("kittiwakes", min_score=0)).results[0].path == "memory/n5.md"
        assert (await m.search("fulmars", min_score=0)).results[0].path == "memory/late.md"
        assert all(h.path != "memory/n3.md" for h in (await m.search("note 3 shearwaters", min_score=0)).results)
        await m.aclose()

    anyio.run(go)


def test_many_tiny_files(tmp_path):
    n = int(os.environ.get("MEMSIFT_TINY_FILES", "20000"))
    ws = _ws(tmp_path)
    for i in range(n):
        d = ws / "memory" / f"d{i // 1000:03d}"
        if i % 1000 == 0:
            d.mkdir()
        (d / f"n{i}.md").write_text(f"- tiny note {i} about item{i}\n")
    settings = make_settings(tmp_path, ws, {"sync": {"onSearch": False}})
    m = BuiltinSearchManager(settings, selection=ProviderSelection(None, "auto", unavailable_reason="none in tests"))

    async def go():
        import time  # noqa: PLC0415

        t0 = time.perf_counter()
        report = await m.sync()
        FIGURES[f"seconds to index {n} tiny files (FTS-only)"] = round(time.perf_counter() - t0, 1)
        assert report.files_indexed == n + 1 and report.files_skipped == 0
        (ws / "memory" / "d000" / "n7.md").write_text("- tiny note 7 now about albatrosses\n")
        again = await m.sync()
        assert (again.files_indexed, again.files_unchanged) == (1, n)
        hit = (await m.search(f"item{n - 1}", min_score=0)).results[0]
        assert hit.path == f"memory/d{(n - 1) // 1000:03d}/n{n - 1}.md"
        assert (await m.search("albatrosses", min_score=0)).results[0].path == "memory/d000/n7.md"
        await m.aclose()

    anyio.run(go)
    assert len(_indexed(m.db_path)) == n + 1
