"""`memsift openclaw install|uninstall`: the OpenClaw plugin that ships inside memsift's wheel, put
into a Gateway (or taken out) by OpenClaw's own installer, saying what changed in its config.

The plugin is `memsift.openclaw_plugin` (setup.py maps `contrib/openclaw-plugin` onto it): in a
wheel, a folder of the installed package; in an editable install, the checkout's folder. Only the
files its package.json gives npm are copied, so the Gateway gets the same plugin as from the npm
tarball, into the Gateway's own state folder (`~/.openclaw/memsift-plugin`): nothing depends on
where memsift's files are later. OpenClaw is then told to load that copy by its path
(`plugins install --link` of the copy), not from its extensions folder: in OpenClaw 2026.9 a plugin
in extensions/ loads after the bundled memory-core, whose own memory_search and memory_get (it
stays loaded for dreaming) then shadow the slot plugin's (an open OpenClaw bug); a plugin named by
path loads first, and memory-core keeps its dreaming.

The plugin's `command` is set to the memsift that ran this (its absolute path): a Gateway that runs
as a service rarely has the venv's bin folder on its PATH. `--keep-command` leaves it as it is.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import json5

from ..errors import ConfigError
from ..files.fingerprint import memsift_version

__all__ = [
    "PLUGIN_ID",
    "plugin_folder",
    "plugin_version",
    "stage_plugin",
    "this_memsift",
    "install",
    "uninstall",
    "Change",
]

PLUGIN_ID = "memsift"
COPY_FOLDER = "memsift-plugin"  # beside the Gateway's openclaw.json
OPENCLAW_TIMEOUT_S = 300.0  # an install copies the plugin and links OpenClaw itself as its peer: seconds, not minutes


def plugin_folder() -> Path:
    """The OpenClaw plugin of this memsift (a folder holding its package.json)."""
    spec = importlib.util.find_spec("memsift.openclaw_plugin")
    for place in (spec.submodule_search_locations or []) if spec else []:
        if (Path(place) / "package.json").is_file():
            return Path(place)
    raise ConfigError("this memsift has no OpenClaw plugin (memsift.openclaw_plugin is missing from the install): "
                      "reinstall memsift from its wheel or from git")


def _package_json(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "package.json").read_text(encoding="utf-8"))


def plugin_version(folder: Path | None = None) -> str:
    return str(_package_json(folder or plugin_folder())["version"])


def stage_plugin(into: Path, folder: Path | None = None) -> Path:
    """A copy of the plugin's shipped files (package.json and its `files`) in `into`/memsift."""
    folder = folder or plugin_folder()
    target = into / PLUGIN_ID
    target.mkdir(parents=True)
    shutil.copy2(folder / "package.json", target / "package.json")
    for entry in _package_json(folder)["files"]:
        source = folder / entry
        if source.is_dir():
            shutil.copytree(source, target / entry, ignore=shutil.ignore_patterns("__pycache__", "node_modules"))
        elif source.is_file():
            shutil.copy2(source, target / entry)
        else:
            raise ConfigError(
                f"the OpenClaw plugin at {folder} lacks {entry}, which its package.json lists: reinstall memsift"
            )
    return target


def this_memsift() -> list[str]:
    """The command that runs this memsift from anywhere: its console script beside the interpreter, or
    the interpreter and the module."""
    script = Path(sys.executable).parent / "memsift"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "memsift.engine.cli.main"]


@dataclass
class Change:
    key: str
    before: Any
    after: Any

    def line(self) -> str:
        shown = lambda v: "(unset)" if v is _UNSET else json.dumps(v, ensure_ascii=False)  # noqa: E731
        return f"{self.key}: {shown(self.before)} → {shown(self.after)}"

    def as_dict(self) -> dict[str, Any]:
        """For --json: `before` or `after` is left out where the key was not set."""
        return {"key": self.key, **{name: value for name, value in (("before", self.before), ("after", self.after))
                                    if value is not _UNSET}}


_UNSET: Any = object()


def _leaves(value: Any, prefix: str) -> dict[str, Any]:
    if value is _UNSET:
        return {}
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, inner in value.items():
            out.update(_leaves(inner, f"{prefix}.{key}"))
        return out
    return {prefix: value}


def config_changes(before: dict[str, Any], after: dict[str, Any]) -> list[Change]:
    """What changed under `plugins` (OpenClaw stamps `meta` on every write: not a change of the user's)."""
    old, new = _leaves(before.get("plugins", _UNSET), "plugins"), _leaves(after.get("plugins", _UNSET), "plugins")
    return [Change(k, old.get(k, _UNSET), new.get(k, _UNSET)) for k in sorted(old.keys() | new.keys())
            if old.get(k, _UNSET) != new.get(k, _UNSET)]


@dataclass
class Gateway:
    """An OpenClaw installation, reached through its own CLI."""

    command: list[str]
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))

    @classmethod
    def from_command(cls, command: str) -> "Gateway":
        return cls(shlex.split(command) or ["openclaw"])

    def run(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        try:
            done = subprocess.run([*self.command, *args], capture_output=True, text=True, env=self.env, input=stdin,
                                  stdin=None if stdin is not None else subprocess.DEVNULL, timeout=OPENCLAW_TIMEOUT_S)
        except FileNotFoundError:
            raise ConfigError(f"OpenClaw was not found ({self.command[0]}): install it, or pass --openclaw") from None
        except subprocess.TimeoutExpired:
            raise ConfigError(
                f"`openclaw {' '.join(args[:2])}` did not finish within {OPENCLAW_TIMEOUT_S:.0f} s"
            ) from None
        if done.returncode != 0:
            said = "\n".join((done.stderr.strip() or done.stdout.strip()).splitlines()[-6:])
            raise ConfigError(f"`openclaw {' '.join(args[:3])}` failed (exit {done.returncode}): {said}")
        return done

    def version(self) -> str:
        try:
            said = self.run("--version").stdout
        except ConfigError as exc:  # another program (`--openclaw false`): whose version was asked, in one line
            last = str(exc).strip().splitlines()[-1][:200]
            raise ConfigError(f"`{' '.join(self.command)} --version` failed (its last line: {last!r}): is it OpenClaw? "
                              "Pass --openclaw the OpenClaw command") from None
        found = re.search(r"(\d{4}\.\d+\.\d+)", said)
        if not found:
            raise ConfigError(f"`{' '.join(self.command)} --version` did not say an OpenClaw version")
        return found.group(1)

    def config_file(self) -> Path:
        lines = [line.strip() for line in self.run("config", "file").stdout.splitlines() if line.strip()]
        if not lines:
            raise ConfigError("`openclaw config file` did not name the Gateway's config file")
        return Path(lines[-1]).expanduser()

    def read_config(self, path: Path) -> dict[str, Any]:
        try:
            data = json5.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read the Gateway's config {path}: {exc}") from None
        return data if isinstance(data, dict) else {}


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def _check_versions(gateway: Gateway, folder: Path) -> tuple[str, str]:
    plugin, mine = plugin_version(folder), memsift_version()
    if plugin != mine:
        raise ConfigError(f"the OpenClaw plugin here is {plugin} but this memsift is {mine}: reinstall memsift "
                          "(its wheel carries the plugin of its own version)")
    needed = str(_package_json(folder).get("openclaw", {}).get("compat", {}).get("minGatewayVersion", "0"))
    found = gateway.version()
    if _version_tuple(found) < _version_tuple(needed):
        raise ConfigError(f"OpenClaw {found} is older than the plugin needs ({needed}): upgrade OpenClaw")
    return plugin, found


def _plugin_id_at(folder: Path) -> str | None:
    try:
        return json.loads((folder / "openclaw.plugin.json").read_text(encoding="utf-8")).get("id")
    except (OSError, ValueError, AttributeError):
        return None


def _earlier_plugins(config: Path, data: dict[str, Any]) -> list[Path]:
    """Folders a memsift plugin is loaded from now: linked ones (a clone, as 0.1 installed it, or an
    earlier `memsift openclaw install`'s copy) and OpenClaw's own copy (a tarball's install)."""
    paths = (data.get("plugins") or {}).get("load", {}).get("paths") or []
    found = [
        Path(p).expanduser() for p in paths if isinstance(p, str) and _plugin_id_at(Path(p).expanduser()) == PLUGIN_ID
    ]
    extensions = config.parent / "extensions" / PLUGIN_ID
    return found + ([extensions] if extensions.is_dir() else [])


def _settings(data: dict[str, Any]) -> dict[str, Any]:
    entry = ((data.get("plugins") or {}).get("entries") or {}).get(PLUGIN_ID) or {}
    return dict(entry.get("config") or {}) if isinstance(entry.get("config"), dict) else {}


def install(gateway: Gateway, *, command: list[str] | None, say: Callable[[str], None]) -> list[Change]:
    """Install this memsift's plugin into the Gateway (a copy), enable it in the memory slot, and point its
    `command` at `command` (None: leave it). An earlier install (linked, copied or from the tarball) is
    replaced, its settings kept, a linked folder left where it is. Returns what changed in the config."""
    folder = plugin_folder()
    version, openclaw = _check_versions(gateway, folder)
    config = gateway.config_file()
    before = gateway.read_config(config)
    home = config.parent / COPY_FOLDER
    earlier = _earlier_plugins(config, before)
    if earlier:
        for place in earlier:
            found = _package_json(place).get("version", "?") if (place / "package.json").is_file() else "?"
            say(f"replacing the memsift plugin {found} at {place} (its settings are kept)")
        # OpenClaw's uninstall also drops the settings (put back below); --keep-files: a linked folder is
        # the user's (a clone), never deleted; OpenClaw's own copy in extensions/ is removed here.
        gateway.run("plugins", "uninstall", PLUGIN_ID, "--force", "--keep-files")
        shutil.rmtree(config.parent / "extensions" / PLUGIN_ID, ignore_errors=True)
    say(f"copying the memsift plugin {version} to {home} for OpenClaw {openclaw} ({config})")
    _replace_copy(home, folder)
    # --force: a source outside ClawHub; --accept-capabilities: its tools and CLI namespace.
    gateway.run("plugins", "install", "--link", "--force", "--accept-capabilities", str(home))
    settings = _settings(before)
    if command is not None:
        settings["command"] = command[0] if len(command) == 1 else command  # the schema takes a path, or a list
    # Enabled and in the slot (an uninstall above leaves it disabled, which the install respects), with
    # its settings: one validated write.
    wanted = {
        "entries": {PLUGIN_ID: {"enabled": True, **({"config": settings} if settings else {})}},
        "slots": {"memory": PLUGIN_ID},
    }
    now = gateway.read_config(config).get("plugins") or {}
    entry = (now.get("entries") or {}).get(PLUGIN_ID) or {}
    if entry.get("enabled") is not True or (now.get("slots") or {}).get("memory") != PLUGIN_ID or \
            (settings and entry.get("config") != settings):
        gateway.run("config", "patch", "--stdin", stdin=json.dumps({"plugins": wanted}))
    return config_changes(before, gateway.read_config(config))


def _replace_copy(home: Path, folder: Path) -> None:
    """The plugin's files at `home`, swapped in whole (a Gateway starting meanwhile reads the old or the new)."""
    home.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".memsift-plugin-", dir=home.parent))
    try:
        staged = stage_plugin(scratch, folder)
        old = scratch / "old"
        if home.exists():
            home.rename(old)
        staged.rename(home)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def uninstall(gateway: Gateway, *, say: Callable[[str], None]) -> list[Change]:
    """Take the plugin out of the Gateway (its copy, settings and install record; the memory slot goes
    back to OpenClaw's memory-core)."""
    config = gateway.config_file()
    before = gateway.read_config(config)
    say(f"uninstalling the memsift plugin from OpenClaw ({config})")
    gateway.run("plugins", "uninstall", PLUGIN_ID, "--force")
    shutil.rmtree(config.parent / COPY_FOLDER, ignore_errors=True)
    return config_changes(before, gateway.read_config(config))
