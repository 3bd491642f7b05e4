"""Build memsift's release files, check them, and list them with their sizes.

    python contrib/release/build.py [--out dist] [--no-plugins]

Makes, in --out (emptied first):
- memsift's sdist and wheel (`python -m build`), the wheel carrying the OpenClaw plugin;
- the OpenClaw plugin's npm tarball (`npm pack contrib/openclaw-plugin`), for
  `openclaw plugins install <tgz>`;
- the wheels of the backend plugin packages in contrib/plugins (LanceDB, Qdrant, example).

and checks that: memsift's version and the OpenClaw plugin's are one (pyproject.toml's); `twine
check --strict` passes; the wheel holds every module and data file of the tree and every
`memsift.*` module the tree imports; its OpenClaw plugin is the tarball's, byte for byte; the sdist
builds a wheel equal to the wheel. Needs `build` and `twine` (pip install build twine) and npm.
Exit 1, saying what is wrong, when a check fails.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from checks import plugin_mismatch, wheel_problems, wheels_differ  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
OPENCLAW_PLUGIN = REPO / "contrib" / "openclaw-plugin"
BACKEND_PLUGINS = sorted(p for p in (REPO / "contrib" / "plugins").iterdir() if (p / "pyproject.toml").is_file())


def memsift_version() -> str:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]


def version_problems() -> list[str]:
    """The OpenClaw plugin's version is memsift's: package.json must say pyproject.toml's."""
    mine = memsift_version()
    plugin = json.loads((OPENCLAW_PLUGIN / "package.json").read_text(encoding="utf-8"))["version"]
    return (
        []
        if plugin == mine
        else [
            f"contrib/openclaw-plugin/package.json says {plugin}, pyproject.toml says {mine}: "
            "the plugin's version is memsift's"
        ]
    )


def _run(argv: list[str], cwd: Path = REPO) -> str:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"release: `{' '.join(argv)}` failed (exit {done.returncode}):\n{(done.stdout + done.stderr)[-4000:]}")
    return done.stdout


def build(out: Path, *, plugins: bool = True, say=print) -> dict[str, Path]:
    """Build every release file into `out`; returns them by role."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    say(f"memsift {memsift_version()}: sdist and wheel")
    _run([sys.executable, "-m", "build", "--outdir", str(out), str(REPO)])
    say("the OpenClaw plugin's npm tarball")
    packed = json.loads(_run(["npm", "pack", "--json", "--pack-destination", str(out), str(OPENCLAW_PLUGIN)]))
    files = {"wheel": next(out.glob("memsift-*.whl")), "sdist": next(out.glob("memsift-*.tar.gz")),
             "openclaw-plugin": out / packed[0]["filename"]}
    if plugins:
        for folder in BACKEND_PLUGINS:
            say(f"{folder.name}: wheel")
            before = set(out.glob("*.whl"))
            _run([sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(folder)])
            files[folder.name] = next(iter(set(out.glob("*.whl")) - before))
    return files


def check(files: dict[str, Path], say=print) -> list[str]:
    problems = version_problems()
    say("twine check --strict")
    twine = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(files["wheel"]), str(files["sdist"])],
        capture_output=True,
        text=True,
    )
    if twine.returncode != 0:
        problems.append(f"twine check failed: {(twine.stdout + twine.stderr)[-2000:]}")
    say("the wheel against the tree's modules, imports and data")
    problems += wheel_problems(files["wheel"], REPO)
    problems += plugin_mismatch(files["wheel"], files["openclaw-plugin"])
    package = json.loads(tarfile.open(files["openclaw-plugin"]).extractfile("package/package.json").read())  # type: ignore[union-attr]
    if package["version"] != memsift_version():
        problems.append(f"the tarball's plugin is {package['version']}, memsift is {memsift_version()}")
    say("the sdist rebuilt into a wheel, compared with the wheel")
    with tempfile.TemporaryDirectory() as scratch:
        with tarfile.open(files["sdist"]) as sdist:
            sdist.extractall(scratch, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))  # 3.11.4+
        source = next(Path(scratch).iterdir())
        _run([sys.executable, "-m", "build", "--wheel", "--outdir", str(Path(scratch) / "out"), str(source)])
        rebuilt = next((Path(scratch) / "out").glob("*.whl"))
        problems += [f"sdist's wheel: {d}" for d in wheels_differ(files["wheel"], rebuilt)]
    return problems


def _size(path: Path) -> str:
    size = path.stat().st_size
    return f"{size / 1e6:.2f} MB" if size >= 1e6 else f"{size / 1e3:.1f} kB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "dist", help="where the release files go (emptied first)")
    parser.add_argument("--no-plugins", action="store_true", help="leave out the backend plugin packages' wheels")
    args = parser.parse_args()
    early = version_problems()
    if early:
        sys.exit("release: " + "\n".join(early))
    say = lambda line: print(f"release: {line}", file=sys.stderr)  # noqa: E731
    files = build(args.out.resolve(), plugins=not args.no_plugins, say=say)
    problems = check(files, say=say)
    for role, path in files.items():
        print(f"{_size(path):>9}  {path.name}  ({role})")
    if problems:
        sys.exit("release: the release files are not right:\n  " + "\n  ".join(problems))
    print(f"release: memsift {memsift_version()}: {len(files)} files in {args.out}, checked")


if __name__ == "__main__":
    main()
