"""contrib/bench/as_avx2.py: a command run with AVX-512 and VNNI masked sees an AVX2-only CPU (the
kernels numpy picks say so), its children too, and where the mask cannot run the script says why.
Runs only on a Linux x86-64 CPU with AVX-512 or VNNI, CPUID faulting and a C compiler."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "contrib" / "bench"
sys.path.insert(0, str(BENCH))

import as_avx2  # noqa: E402

FEATURES = ("from numpy._core._multiarray_umath import __cpu_features__ as f; "
            "print(f['AVX512F'], f['AVX512_SKX'], f['AVX2'])")


def _features(*prefix: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([*prefix, sys.executable, "-c", FEATURES], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_masked_command_and_its_children_see_avx2_only(tmp_path, monkeypatch):
    reason = as_avx2.why_not()
    if reason:
        pytest.skip(reason)
    pytest.importorskip("numpy")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert _features().startswith("True True")  # this CPU has AVX-512 (why_not said so)
    masked = _features(sys.executable, str(BENCH / "as_avx2.py"))
    assert masked == "False False True"
    # a child of the masked process is masked too (the library is preloaded again at each exec)
    nested = subprocess.run([sys.executable, str(BENCH / "as_avx2.py"), sys.executable, "-c",
                             f"import subprocess, sys; subprocess.run([sys.executable, '-c', {FEATURES!r}])"],
                            capture_output=True, text=True, timeout=120)
    assert nested.stdout.strip() == "False False True", nested.stderr
    assert list(tmp_path.glob("memsift-bench/cpuid_mask-*.so"))  # built once, kept


def test_without_cpuid_faulting_it_says_why_and_runs_nothing(monkeypatch, capsys):
    monkeypatch.setattr(as_avx2, "cpu_flags", lambda: {"avx2", "avx512f"})
    monkeypatch.setattr(sys, "argv", ["as_avx2.py", "true"])
    if sys.platform != "linux" or os.uname().machine != "x86_64":
        pytest.skip("the reason given first is the platform's")
    with pytest.raises(SystemExit, match="no CPUID faulting"):
        as_avx2.main()
