"""Hostile paths: nothing outside the allowed memory files is ever read or returned.

Every hostile path goes through each front door of memory_get (the engine function, the builtin
manager, the QMD manager, the CLI `get`) and through discovery/indexing (extraPaths, symlinks
created after indexing, fifos, devices, long and non-UTF-8 names). A path is either refused with
PathNotAllowedError (exit code 6 in the CLI) or read from an allowed file; the outside secret
never appears in any output, and nothing blocks.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from figures import FIGURES
from helpers import make_settings
from memsift.backends.builtin import BuiltinSearchManager
from memsift.backends.builtin.indexer import Indexer
from memsift.backends.qmd import QmdSearchManager
from memsift.engine.embeddings.fake import FakeEmbeddingProvider
from memsift.engine.errors import PathNotAllowedError
from memsift.engine.files.discovery import MemoryFile
from memsift.engine.files.rules import read_memory_file

SECRET = "TOPSECRET-6f1c"
PATH_MAX = os.pathconf("/", "PC_PATH_MAX")
NAME_MAX = os.pathconf("/", "PC_NAME_MAX")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    (w / "memory" / "sub").mkdir(parents=True)
    (w / "MEMORY.md").write_text("# Memory\n- coffee with oat milk\n")
    (w / "memory" / "ok.md").write_text("- allowed note about puffins\n")
    (w / "memory" / "sub" / "deep.md").write_text("- deep allowed note\n")
    (w / "README.md").write_text(f"not memory {SECRET}\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text(f"{SECRET}\n")
    (outside / "secret.txt").write_text(f"{SECRET}\n")
    # Hostile entries inside memory/: symlinks to a file, a directory and a device, a fifo, a
    # socket, a 255-byte name, a non-UTF-8 name, a directory named like a note.
    os.symlink(outside / "secret.md", w / "memory" / "link.md")
    os.symlink(outside, w / "memory" / "linkdir")
    os.symlink("/dev/zero", w / "memory" / "zero.md")
    os.symlink("/etc/passwd", w / "memory" / "passwd.md")
    os.mkfifo(w / "memory" / "fifo.md")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(w / "memory" / "sock.md"))
    sock.close()
    (w / "memory" / ("n" * (NAME_MAX - 3) + ".md")).write_text("- long name note\n")
    with open(os.fsencode(w / "memory") + b"/caf\xff.md", "w") as fh:
        fh.write("- undecodable name\n")
    (w / "memory" / "dir.md").mkdir()
    return w


def hostile_paths(tmp_path: Path, ws: Path) -> list[str]:
    out = str(tmp_path / "outside" / "secret.md")
    return [
        "../outside/secret.md", "memory/../../outside/secret.md", "memory/../README.md", "README.md",
        out, "/etc/passwd", "/etc/passwd.md", "/dev/zero", "/dev/null", "/proc/self/environ",
        "~/.bashrc.md", "..\\outside\\secret.md", "memory\\..\\..\\outside\\secret.md",
        "%2e%2e/outside/secret.md", "memory/%2e%2e/%2e%2e/outside/secret.md", "..%2foutside%2fsecret.md",
        "memory/ok.md\x00../../outside/secret.md", "\x00", "", "   ", "memory", "memory/", ".",
        "memory/link.md", "memory/linkdir/secret.md", "memory/linkdir/../ok.md", "memory/zero.md",
        "memory/passwd.md", "memory/fifo.md", "memory/sock.md", "memory/dir.md", "memory/sub",
        "memory/ok.md/../../outside/secret.md", "MEMORY.md/", "memory/" + "a/" * (PATH_MAX // 2) + "x.md",
        "memory/" + "n" * (NAME_MAX + 10) + ".md", "memory/" + "\udcff" * 10 + ".md", "memory/\u202egpj.md",
        "file://" + out, "qmd/notes/../../outside/secret.md", "qmd/../outside/secret.md",
        str(tmp_path / "ws" / ".." / "outside" / "secret.md"), "memory/./../../outside/secret.md",
        "memory/ok.txt", "memory/ok.MD/..", "//etc/passwd",
    ]


def _check(outcome, what: str) -> None:
    FIGURES["hostile paths tried"] += 1
    if isinstance(outcome, Exception):
        assert isinstance(outcome, PathNotAllowedError), (what, repr(outcome))
        assert SECRET not in str(outcome)
    else:
        rel, text = outcome
        assert SECRET not in text, (what, rel)
        assert not rel.startswith("..") and not os.path.isabs(rel), (what, rel)


def _try(fn):
    try:
        return fn()
    except Exception as exc:  # the assertion in _check decides whether this is acceptable
        return exc


def test_engine_read_refuses_everything_outside(ws, tmp_path):
    for p in hostile_paths(tmp_path, ws):
        res = _try(lambda: read_memory_file(ws, (), p))
        _check(res if isinstance(res, Exception) else (res[0], res[1]), p)
    # The allowed files still read, also by absolute path and with redundant parts.
    assert read_memory_file(ws, (), str(ws / "memory" / "ok.md"))[1].startswith("- allowed")
    assert read_memory_file(ws, (), "memory/sub/../ok.md")[1].startswith("- allowed")
    assert read_memory_file(ws, (), "memory/" + "n" * (NAME_MAX - 3) + ".md")[1].startswith("- long name")


def test_specific_refusals_say_why(ws, tmp_path):
    def reason(p: str) -> str:
        with pytest.raises(PathNotAllowedError) as err:
            read_memory_file(ws, (), p)
        return err.value.reason

    assert "symlink" in reason("memory/link.md")
    assert "symlink" in reason("memory/linkdir/secret.md")
    assert "symlink" in reason("memory/zero.md")
    assert "regular file" in reason("memory/fifo.md")  # and it did not block
    assert "regular file" in reason("memory/sock.md") or "cannot open" in reason("memory/sock.md")
    assert "NUL" in reason("memory/ok.md\x00x")
    assert "not a memory file" in reason("../outside/secret.md")
    assert "not a memory file" in reason(str(tmp_path / "outside" / "secret.md"))


def test_symlinks_created_after_indexing(ws, tmp_path):
    m = BuiltinSearchManager(make_settings(tmp_path, ws), provider=FakeEmbeddingProvider())

    async def go():
        await m.sync()
        assert (await m.read("memory/ok.md")).text.startswith("- allowed")
        # Now the allowed note and the sub-folder become symlinks to the outside.
        os.unlink(ws / "memory" / "ok.md")
        os.symlink(tmp_path / "outside" / "secret.md", ws / "memory" / "ok.md")
        (ws / "memory" / "sub" / "deep.md").unlink()
        (ws / "memory" / "sub").rmdir()
        os.symlink(tmp_path / "outside", ws / "memory" / "sub")
        for p in ("memory/ok.md", "memory/sub/secret.md", "memory/sub/deep.md"):
            with pytest.raises(PathNotAllowedError):
                await m.read(p)
        await m.sync()
        answer = await m.search(SECRET, min_score=0)
        assert all(SECRET not in h.snippet for h in answer.results)
        status = await m.status()
        skipped = {s["path"]: s["reason"] for s in status.skipped}
        assert skipped["memory/ok.md"].startswith("symlink") and skipped["memory/sub"].startswith("symlink")
        await m.aclose()

    anyio.run(go)
    FIGURES["hostile paths tried"] += 3


def test_indexing_with_hostile_entries_reads_only_memory_files(ws, tmp_path):
    extra = [
        str(tmp_path / "outside" / "secret.txt"),
        "/dev/zero",
        "/dev",
        str(ws / "memory" / "linkdir"),
        "../nowhere",
    ]
    m = BuiltinSearchManager(make_settings(tmp_path, ws, {"extraPaths": extra}), provider=FakeEmbeddingProvider())

    async def go():
        report = await m.sync()
        import apsw  # noqa: PLC0415

        conn = apsw.Connection(str(m.db_path), flags=apsw.SQLITE_OPEN_READONLY)
        paths = sorted(r[0] for r in conn.execute("SELECT path FROM files"))
        texts = " ".join(r[0] for r in conn.execute("SELECT text FROM chunks"))
        conn.close()
        assert paths == sorted(
            ["MEMORY.md", "memory/ok.md", "memory/sub/deep.md", "memory/" + "n" * (NAME_MAX - 3) + ".md"]
        )
        assert SECRET not in texts and "root:" not in texts
        st = await m.status(deep=True)
        reasons = {s["path"]: s["reason"] for s in st.skipped}
        assert reasons["memory/caf\ufffd.md"] == "file name is not valid UTF-8"
        assert reasons["memory/fifo.md"] == "not a regular file" and reasons["memory/link.md"].startswith("symlink")
        assert "../outside/secret.txt" in reasons and report.files_skipped >= 5
        json.dumps(st.to_json_dict(), ensure_ascii=False).encode("utf-8")  # printable
        await m.aclose()

    anyio.run(go)


def test_a_file_swapped_for_a_symlink_or_fifo_mid_index_is_not_read(ws, tmp_path):
    """Between discovery and reading, a note is replaced: the indexer must not follow or block."""
    settings = make_settings(tmp_path, ws)
    ix = Indexer(settings, BuiltinSearchManager(settings, provider=FakeEmbeddingProvider()).identity, None)
    target = ws / "memory" / "ok.md"
    for swap in ("symlink", "fifo", "directory"):
        if target.is_dir() and not target.is_symlink():
            target.rmdir()
        target.unlink(missing_ok=True)
        target.write_text("- allowed note about puffins\n")
        st = os.lstat(target)
        target.unlink()
        if swap == "symlink":
            os.symlink(tmp_path / "outside" / "secret.md", target)
        elif swap == "fifo":
            os.mkfifo(target)
        else:
            target.mkdir()
        ix.skipped = []
        assert ix._read(MemoryFile(target, "memory/ok.md"), st) is None, swap
        assert ix.skipped and ix.skipped[0].path == "memory/ok.md", swap
        FIGURES["faults injected: file swapped mid-index"] += 1


def test_managers_and_cli_get_refuse_hostile_paths(ws, tmp_path):
    settings = make_settings(tmp_path, ws)
    builtin = BuiltinSearchManager(settings, provider=FakeEmbeddingProvider())
    qmd_settings = make_settings(
        tmp_path, ws, memory={"backend": "qmd", "qmd": {"paths": [{"path": "memory", "name": "notes"}]}}
    )
    qmd = QmdSearchManager(qmd_settings, environ={"PATH": "/nonexistent"})
    paths = hostile_paths(tmp_path, ws)

    async def go():
        for m in (builtin, qmd):
            for p in paths:
                try:
                    r = await m.read(p)
                    res = (r.path, r.text)
                except Exception as exc:  # noqa: BLE001
                    res = exc
                _check(res, f"{m.backend}: {p!r}")

    anyio.run(go)
    cfg = tmp_path / "cfg.json5"
    cfg.write_text(json.dumps({"stateDir": str(tmp_path / "state")}))
    # The CLI: a sample of the paths (each call is a process), as bytes argv where needed.
    for p in paths[:12] + [
        "memory/link.md",
        "memory/fifo.md",
        "memory/zero.md",
        os.fsencode(ws / "memory") + b"/caf\xff.md",
    ]:
        if isinstance(p, str) and "\x00" in p:
            continue  # argv cannot carry NUL
        proc = subprocess.run(
            [sys.executable, "-m", "memsift.engine.cli.main", "-c", str(cfg), "-w", str(ws), "get", p],
            capture_output=True,
            timeout=60,
        )
        FIGURES["hostile paths tried"] += 1
        assert SECRET.encode() not in proc.stdout + proc.stderr, p
        assert b"Traceback" not in proc.stderr, proc.stderr[-2000:]
        assert proc.returncode in (0, 6), (p, proc.returncode, proc.stderr[-500:])
