"""Run a command as if on a CPU without AVX-512 or VNNI (AVX2 only), on a machine that has them.

    python contrib/bench/as_avx2.py python contrib/bench/embed_speed.py --baseline fp32
    python contrib/bench/as_avx2.py python contrib/bench/cpu_kinds.py --save avx2.npy

Compiles `cpuid_mask.c` once (the C compiler `cc`; the library cached under
`$XDG_CACHE_HOME/memsift-bench/`) and runs the command with it preloaded: each CPUID instruction
traps (Linux's CPUID faulting, on CPUs that list `cpuid_fault`) and answers without the AVX-512,
VNNI and AMX bits, so onnxruntime, numpy and OpenBLAS pick their AVX2 kernels. What it shows is
which kernels run and what they compute; their speed is this core's running AVX2 code, which is
not an AVX2-only CPU's (docs/performance.md measured a Zen 4 core's AVX2 int8 kernels at 2.0× its
fp32 ones, where the project's AVX2-only EPYC machines run them at 1.0×).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

SOURCE = Path(__file__).resolve().parent / "cpuid_mask.c"


def cpu_flags() -> set[str]:
    """The CPU's flags as `status` reads them (/proc/cpuinfo)."""
    from memsift.engine.embeddings.cpu import _flags  # noqa: PLC0415

    return _flags()


def why_not() -> str | None:
    """Why the mask cannot run here, or None."""
    if sys.platform != "linux" or os.uname().machine != "x86_64":
        return "CPUID faulting is a Linux x86-64 feature"
    flags = cpu_flags()
    if "cpuid_fault" not in flags:
        return "this CPU or its hypervisor has no CPUID faulting (no cpuid_fault in /proc/cpuinfo)"
    if not flags & {"avx512f", "avx512_vnni", "avx_vnni"}:
        return "this CPU has neither AVX-512 nor VNNI: it is already AVX2-only, nothing to mask"
    if not shutil.which("cc"):
        return "no C compiler (cc) to build the mask"
    return None


def library() -> Path:
    """The compiled mask, built once per source version."""
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "memsift-bench"
    built = cache / f"cpuid_mask-{digest}.so"
    if not built.exists():
        cache.mkdir(parents=True, exist_ok=True)
        partial = built.with_suffix(f".{os.getpid()}.tmp")
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(partial), str(SOURCE)], check=True)
        partial.replace(built)
    return built


def masked_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """`env` (default: this process's) with the mask preloaded; it refuses to run unmasked."""
    out = dict(os.environ if env is None else env)
    out["LD_PRELOAD"] = " ".join(filter(None, [str(library()), out.get("LD_PRELOAD", "")]))
    out["CPUID_MASK_STRICT"] = "1"
    return out


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        raise SystemExit(0 if len(sys.argv) > 1 else 2)
    reason = why_not()
    if reason:
        raise SystemExit(f"as_avx2: cannot run here: {reason}")
    os.execvpe(sys.argv[1], sys.argv[1:], masked_env())


if __name__ == "__main__":
    main()
