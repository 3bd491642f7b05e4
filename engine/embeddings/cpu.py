"""What this CPU offers onnxruntime's integer kernels, for `status` and the benchmarks.

The int8 graph's MatMuls gain most where the CPU multiplies int8 in one instruction (VNNI:
AVX-512 VNNI, or AVX-VNNI on newer cores); on AVX2 alone each product takes three instructions,
and on this project's AVX2 machines the int8 graph ran a 256-token window about as fast as the
fp32 one (docs/performance.md, "The local model on each kind of CPU"). The graph is the same on
every CPU all the same: vectors must not depend on the machine that made them (a fleet shares one
PostgreSQL index, and an index copied to another machine stays current).
"""

from __future__ import annotations

import platform
from functools import cache

__all__ = ["cpu_kind"]


def _flags() -> set[str]:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith(("flags", "Features")):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


@cache
def cpu_kind() -> str:
    """"AVX-512 VNNI", "AVX-VNNI", "AVX-512, no VNNI", "AVX2, no VNNI", "arm64 with dot product",
    or the machine's name where its features cannot be read."""
    flags = _flags()
    machine = platform.machine() or "unknown CPU"
    if "avx512_vnni" in flags or "avx512vnni" in flags:
        return "AVX-512 VNNI"
    if "avx_vnni" in flags:
        return "AVX-VNNI"
    if "avx512f" in flags:
        return "AVX-512, no VNNI"
    if "avx2" in flags:
        return "AVX2, no VNNI"
    if "asimddp" in flags:
        return "arm64 with dot product"
    return f"{machine} (features unknown)" if not flags else f"{machine}, no AVX2"
