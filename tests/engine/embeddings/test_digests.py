"""Model files' digests remembered across processes (a cold keyword search hashed 44 MB), and what
a keyword search leaves unloaded; the CPU kind `status` names."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest

from helpers import EXAMPLE_WORKSPACE
from memsift.engine.embeddings import cpu, digests
from memsift.engine.embeddings.digests import DIGESTS_FILE, sha256_of


def _true(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_digest_is_remembered_while_the_file_is_unchanged_and_computed_again_when_it_changes(tmp_path, monkeypatch):
    cache = tmp_path / "models"
    cache.mkdir()
    model = tmp_path / "model.onnx"
    model.write_bytes(b"weights " * 1000)
    assert sha256_of(model, cache) == _true(model)
    book = json.loads((cache / DIGESTS_FILE).read_text())
    assert book[str(model)][1] == _true(model)

    # Remembered: the next process reads the book instead of the file.
    digests._hash.cache_clear()
    calls = []
    monkeypatch.setattr(digests, "_hash", lambda *a: calls.append(a) or "never")
    assert sha256_of(model, cache) == _true(model) and calls == []
    monkeypatch.undo()

    # Edited in place, its size and mtime restored: the ctime moved, so it is hashed again.
    st = model.stat()
    model.write_bytes(b"WEIGHTS " * 1000)
    os.utime(model, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert model.stat().st_size == st.st_size
    assert sha256_of(model, cache) == _true(model) != book[str(model)][1]

    # Replaced by another file, a damaged book, no cache folder: right each time.
    other = tmp_path / "other.onnx"
    other.write_bytes(b"other weights")
    os.replace(other, model)
    assert sha256_of(model, cache) == _true(model)
    (cache / DIGESTS_FILE).write_text("{not json")
    assert sha256_of(model, cache) == _true(model)
    assert sha256_of(model, tmp_path / "absent") == _true(model) and not (tmp_path / "absent").exists()
    with pytest.raises(OSError):
        sha256_of(tmp_path / "gone.onnx", cache)


def test_a_keyword_search_loads_neither_numpy_nor_onnxruntime_nor_hashes_the_model_again(tmp_path):
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT")},
        "MEMSIFT_STATE_DIR": str(tmp_path / "state"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "MEMSIFT_NO_RESIDENT": "1",
    }
    index = subprocess.run([sys.executable, "-m", "memsift.engine.cli.main", "-w", str(EXAMPLE_WORKSPACE), "index"],
                           env=env, capture_output=True, text=True, timeout=300)
    assert index.returncode == 0, index.stderr
    probe = (
        "import sys, memsift.engine.embeddings.digests as d\n"
        "hashed = []\n"
        "real = d._hash\n"
        "d._hash = lambda *a: hashed.append(a[0]) or real(*a)\n"
        "from memsift.engine.cli.main import main\n"
        f"sys.argv = ['memsift', '-w', {str(EXAMPLE_WORKSPACE)!r}, 'search', 'ledger', '-m', 'keyword', '--json']\n"
        "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
        "print({'numpy': 'numpy' in sys.modules, 'onnxruntime': 'onnxruntime' in sys.modules, 'hashed': hashed},"
        " file=sys.stderr)\n"
    )
    run = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert json.loads(run.stdout)["results"], run.stderr
    facts = eval(run.stderr.strip().splitlines()[-1])  # noqa: S307  (our own dict's repr)
    assert facts == {"numpy": False, "onnxruntime": False, "hashed": []}


@pytest.mark.parametrize(("flags", "kind"), [
    ({"avx2", "avx512f", "avx512_vnni"}, "AVX-512 VNNI"),
    ({"avx2", "avx_vnni"}, "AVX-VNNI"),
    ({"avx2", "avx512f"}, "AVX-512, no VNNI"),
    ({"avx2", "fma"}, "AVX2, no VNNI"),
    ({"fp", "asimd", "asimddp"}, "arm64 with dot product"),
])
def test_the_cpu_kind_is_read_from_its_flags(monkeypatch, flags, kind):
    cpu.cpu_kind.cache_clear()
    monkeypatch.setattr(cpu, "_flags", lambda: flags)
    try:
        assert cpu.cpu_kind() == kind
    finally:
        cpu.cpu_kind.cache_clear()
