"""The real QMD command-line tool, run as a user runs it, in a private XDG home.

Every call goes through the `qmd` launcher on PATH (what a user types), with `--index bench`, its
own XDG_CONFIG_HOME / XDG_CACHE_HOME, a fixed working directory, and `PWD` and `CI` removed
(spec/qmd.md pitfalls P4, P5, P9). Wall time and the peak RSS of the whole process tree (the
launcher waits for its Node child, so wait4() reports the larger of the two) are measured, for
memsift's commands too (`run_measured`).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["QmdHome", "Run", "run_measured", "start_spawner", "qmd_available"]


@dataclass
class Run:
    seconds: float
    peak_rss_mb: float
    rc: int
    stdout: str
    stderr: str


# Peak RSS comes from wait4(), and a forked child starts with a copy of its parent's page counts:
# forked from a benchmark process holding 500 MB, every command would "peak" at 500 MB. So the
# commands are started by a small helper process, launched while this one is still small.
_SPAWNER_CODE = r"""
import json, os, signal, subprocess, sys, tempfile, threading, time
for line in sys.stdin:
    job = json.loads(line)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        try:
            proc = subprocess.Popen(job["argv"], env=job["env"], cwd=job["cwd"], stdout=out, stderr=err, start_new_session=True)
        except OSError as exc:
            print(json.dumps({"error": str(exc)}), flush=True)
            continue
        timer = threading.Timer(job["timeout"], os.killpg, (proc.pid, signal.SIGKILL))
        timer.start()
        _pid, status, usage = os.wait4(proc.pid, 0)
        timer.cancel()
        seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0); err.seek(0)
        print(json.dumps({"rc": proc.returncode, "seconds": seconds, "maxrss_kb": usage.ru_maxrss,
                          "stdout": out.read().decode(errors="replace"), "stderr": err.read().decode(errors="replace")}), flush=True)
"""  # noqa: E501
_spawner: subprocess.Popen | None = None


def start_spawner() -> None:
    """Start the helper now (call it early, while this process is small)."""
    global _spawner
    if _spawner is None or _spawner.poll() is not None:
        _spawner = subprocess.Popen(
            [sys.executable, "-c", _SPAWNER_CODE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )


def run_measured(
    argv: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 3600
) -> Run:
    """Run argv to completion: wall time, and peak RSS (MB) of it and its waited-for children."""
    start_spawner()
    job = {
        "argv": argv,
        "env": dict(os.environ if env is None else env),
        "cwd": str(cwd) if cwd else None,
        "timeout": timeout,
    }
    _spawner.stdin.write(json.dumps(job) + "\n")
    _spawner.stdin.flush()
    reply = json.loads(_spawner.stdout.readline())
    if "error" in reply:
        raise OSError(f"cannot run {argv[0]}: {reply['error']}")
    run = Run(reply["seconds"], reply["maxrss_kb"] / 1024, reply["rc"], reply["stdout"], reply["stderr"])
    if run.rc == -signal.SIGKILL and run.seconds >= timeout:
        raise RuntimeError(f"{' '.join(argv[:4])} timed out after {timeout:.0f} s")
    return run


def qmd_available() -> str | None:
    return shutil.which("qmd")


class QmdHome:
    """One private QMD home (config, cache, index) for a benchmark workspace."""

    def __init__(self, root: Path, index: str = "bench") -> None:
        self.root = root
        self.index = index
        self.root.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k not in ("PWD", "CI", "INDEX_PATH", "QMD_CONFIG_DIR")}
        env.update(XDG_CONFIG_HOME=str(root / "config"), XDG_CACHE_HOME=str(root / "cache"), NO_COLOR="1")
        self.env = env

    @property
    def db(self) -> Path:
        return self.root / "cache" / "qmd" / f"{self.index}.sqlite"

    def reset(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        self.root.mkdir(parents=True)

    def run(self, *args: str, timeout: float = 3600, check: bool = True) -> Run:
        r = run_measured(["qmd", "--index", self.index, *args], env=self.env, cwd=self.root, timeout=timeout)
        if check and r.rc != 0:
            raise RuntimeError(f"qmd {' '.join(args[:2])} exited {r.rc}: {r.stderr.strip()[:400]}")
        return r

    def size_mb(self) -> float:
        return sum(p.stat().st_size for p in self.db.parent.glob(f"{self.index}.sqlite*")) / 2**20
