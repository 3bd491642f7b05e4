"""`memsift`: index, search, get, status, note, watch, mcp, parity, openclaw install, config show.

Results go to stdout (human text, or one JSON document with --json); logs and progress go to
stderr. Exit codes: 0 success (also no hits, also a scope denial, which the answer states),
1 unexpected error, 2 usage, 3 config error, 4 index unusable, 5 embedding provider error, 6 path
not allowed, 7 backend unavailable with no fallback allowed, 8 the command's time budget ran out.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from pathlib import Path
from contextlib import contextmanager, nullcontext
from typing import Any, Awaitable, Callable, Iterator, Mapping

import anyio
import click

from ..errors import CommandTimeout, ConfigError, MemsiftError
from ..requests import InvalidRequest, ReadOptions, SearchOptions, StatusOptions, check_session_key
from ..secrets import redact, url_without_password
from ..mcp.stopping import STOP_GRACE_S, end_on_unraisable_stops, exit_within, stop_signals
from .options import (
    PARITY_SIDE,
    build_request,
    cli_search_request,
    group_params,
    model_options,
    scoped_request,
    search_params,
)
from .output import EXIT_CODES, exit_code, json_text, search_output
from .streams import name_shown

CLOSE_AFTER_TIMEOUT_S = 1.0  # a command out of time waits this long for its work to stop, then exits

__all__ = ["main", "cli", "EXIT_CODES", "exit_code", "search_output"]


@contextmanager
def _errors_to_exit() -> Iterator[None]:
    try:
        yield
    except MemsiftError as exc:
        click.echo(redact(f"memsift: {exc}"), err=True)
        sys.exit(exit_code(exc))


def _emit_json(data: Any) -> None:
    click.echo(json_text(data))


def _session_key(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """An empty key is not a key (an unset shell variable): refused as every door refuses it."""
    try:
        return check_session_key(value)
    except InvalidRequest as exc:
        raise click.BadParameter(exc.problem, param_hint="--session-key") from None


def _request(obj: Any, model: Any, params: dict[str, Any], **required: Any) -> Any:
    """The door's request from the CLI's values (options.scoped_request: scope first, then exit 2)."""
    key = params.get("session_key")
    if not (isinstance(key, str) and key.strip()):
        return build_request(model, params, **required)
    with _errors_to_exit():
        settings = obj.settings()
    return scoped_request(model, params, settings, **required)


class _Ctx:
    def __init__(self, workspace: str | None, agent: str | None, config: str | None, backend: str | None = None,
                 openclaw_config: str | None = None, timeout: str | None = None) -> None:
        self.workspace, self.agent, self.config, self.backend = workspace, agent, config, backend
        self.openclaw_config, self.timeout = openclaw_config, timeout
        self._settings: Any = None

    def settings(self):
        """The resolved config, read once per command (a search asks for it three times); what it
        has to tell the user (a key set aside, an unset ${VAR}) is said once, on stderr."""
        if self._settings is None:
            from ..config.snapshot import resolve_settings  # noqa: PLC0415  (as last time, unless a source changed)

            self._settings = resolve_settings(self.config, workspace=self.workspace, agent=self.agent,
                                              openclaw_config=self.openclaw_config)
            for note in self._settings.notes:
                click.echo(f"memsift: warning: {note}", err=True)
        return self._settings

    def settings_and_sources(self):
        """The settings and the config files they came from (a command that follows its config:
        config/follow.py), kept as this command's settings. Their warnings are the caller's to say."""
        from ..config.snapshot import settings_and_sources  # noqa: PLC0415

        self._settings, sources = settings_and_sources(self.config, workspace=self.workspace, agent=self.agent,
                                                       openclaw_config=self.openclaw_config)
        return self._settings, sources

    def warn_if_no_memory(self) -> None:
        """Say so on stderr when the workspace holds no memory files (every search finds nothing)."""
        from ..config.workspace import workspace_warning  # noqa: PLC0415

        warning = workspace_warning(self.settings())
        if warning:
            click.echo(f"memsift: warning: {warning}", err=True)

    def run(
        self, fn: Callable[..., Awaitable[Any]], *, progress: bool | None = False, command: str | None = None
    ) -> Any:
        """Open the manager, run `fn(manager)`, close it. `progress`: True shows the progress of
        long work on a terminal, None only once the manager says it builds the index first.
        `command`: the budget of `memory.limits.<command>` (or --timeout) applies, with a line on
        stderr while nothing moves (`engine/limits.py`)."""
        from ..compose.factory import open_manager  # noqa: PLC0415
        from ..limits import budget_s, progressed, run_within, stall_s  # noqa: PLC0415
        from .progress import progress_display  # noqa: PLC0415

        started = time.monotonic()  # the budget counts the config's loading too
        settings = self.settings()
        timed_out = False

        async def go() -> Any:
            nonlocal timed_out
            with progress_display(always=bool(progress), workspace=settings.workspace) if progress is not False \
                    else nullcontext() as cb:

                def moved(stage: str, done: int, total: int) -> None:
                    progressed()
                    if cb is not None:
                        cb(stage, done, total)

                manager = open_manager(settings, backend=self.backend, progress=moved if command else cb)
                try:
                    if command is None:
                        return await fn(manager)
                    try:
                        return await run_within(lambda: fn(manager), command=command,
                                                budget=budget_s(settings, command, self.timeout),
                                                stall=stall_s(settings) if command == "index" else None,
                                                say=lambda line: click.echo(line, err=True),
                                                budget_from="--timeout" if self.timeout else "memory.limits",
                                                started=started)
                    except CommandTimeout:
                        timed_out = True
                        raise
                finally:
                    with anyio.CancelScope(shield=True) as closing:
                        if timed_out:  # out of time: work still stuck (a hanging endpoint) is left, not waited for
                            closing.deadline = anyio.current_time() + CLOSE_AFTER_TIMEOUT_S
                        await manager.aclose()

        return anyio.run(go)


# Names people bring from other tools (`qmd query` and `vsearch`, `git help`, grep), and memsift's for them:
# said instead of click's nearest spelling ("find" → "index", "help" → "helpers").
OTHER_TOOLS_COMMANDS = {
    "query": "search", "vsearch": "search --mode vector", "find": "search", "grep": "search --mode keyword",
    "ask": "search", "lookup": "search", "recall": "search", "read": "get", "show": "get", "cat": "get",
    "open": "get", "reindex": "index --force", "update": "index", "embed": "index", "sync": "index",
    "build": "index", "version": "--version", "info": "status", "stats": "status", "doctor": "status",
    "add": "note", "remember": "note", "write": "note", "serve": "mcp", "server": "mcp",
}
# The same for options of `search`: QMD's `-n` is memsift's too, other tools say `--limit` or `--top`.
OTHER_TOOLS_OPTIONS = {"--limit": "--max-results", "--top": "--max-results", "--top-k": "--max-results",
                       "-k": "--max-results", "--format": "--json", "--vector": "--mode vector",
                       "--keyword": "--mode keyword", "--hybrid": "--mode hybrid", "--after": "--since",
                       "--before": "--until", "--from": "--since", "--to": "--until"}


# ... and of `config` (`openclaw config get`, `git config --list`, `npm config set`). memsift never
# writes a config file it did not create: the user edits it.
OTHER_TOOLS_CONFIG_COMMANDS = {"get": "config show KEY", "list": "config show", "print": "config show",
                               "dump": "config show", "view": "config show", "set": None, "unset": None,
                               "edit": None}


class _Commands(click.Group):
    """memsift's commands; a name another tool gives one of them gets memsift's name, not click's
    nearest spelling."""

    others: Mapping[str, str | None] = OTHER_TOOLS_COMMANDS

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None,
                                                                           list[str]]:
        name = args[0] if args else ""
        if name not in self.commands and name.lower() in self.others:
            ours = self.others[name.lower()]
            if ours is None:
                ctx.fail(f"No such command {name!r}: memsift reads its config file and never changes it; edit the "
                         "file (`memsift config show` names it, configPath), and `memsift config show KEY` shows "
                         "what a setting is and where it came from.")
            ctx.fail(f"No such command {name!r}. Did you mean 'memsift {ours}'?")
        return super().resolve_command(ctx, args)


class _ConfigCommands(_Commands):
    others = OTHER_TOOLS_CONFIG_COMMANDS


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]}, params=group_params())
@click.version_option(package_name="memsift")
@click.pass_context
def cli(
    ctx: click.Context,
    workspace: str | None,
    agent: str | None,
    config_path: str | None,
    openclaw_config: str | None,
    backend: str | None,
    verbose: int,
    timeout: str | None,
) -> None:
    """Memory search for AI agents over Markdown memory files."""
    from ..durations import check_duration  # noqa: PLC0415
    from ..logging import configure_logging, route_library_logs  # noqa: PLC0415  (structlog is not needed before this)

    if timeout:
        try:
            check_duration(timeout, bare_unit="s")
        except ValueError:
            raise click.BadParameter(f"{timeout!r} is not a duration: use seconds (90) or a number with a unit "
                                     "(90s, 5m, 1h), at most 100 years; 0 for no budget",
                                     param_hint="--timeout / $MEMSIFT_TIMEOUT") from None
    try:
        from ..search.clock import now  # noqa: PLC0415

        now()
    except ValueError as exc:  # $MEMSIFT_NOW is no moment: said before any work, as an environment's error
        click.echo(f"memsift: {exc}", err=True)  # (no usage banner: the command line is right)
        sys.exit(EXIT_CODES["usage"])
    configure_logging(verbose)
    route_library_logs()
    ctx.obj = _Ctx(workspace, agent, config_path, backend, openclaw_config, timeout)


@cli.command("help")
@click.argument("command", nargs=-1)
@click.pass_context
def help_(ctx: click.Context, command: tuple[str, ...]) -> None:
    """Show the help of memsift or of COMMAND (as --help does)."""
    shown = ctx.parent  # memsift's own context: `-h` as a help option, its name
    assert shown is not None
    for i, name in enumerate(command):
        group = shown.command
        sub = group.get_command(shown, name) if isinstance(group, click.Group) else None
        if sub is None:
            raise click.UsageError(f"No such command {' '.join(command[:i + 1])!r}: memsift help lists them.", ctx)
        shown = click.Context(sub, info_name=name, parent=shown)
    click.echo(shown.get_help())


@cli.command()
@click.option("--force", is_flag=True, help="Rebuild the whole index (atomically) even if nothing changed.")
@click.option("--list", "list_", is_flag=True, help="List the indexes in the state folder, with their workspaces.")
@click.option("--prune", is_flag=True, help="Remove the indexes whose workspace no longer exists.")
@click.option("--json", "as_json", is_flag=True, help="Print the sync report (or the list) as JSON.")
@click.pass_obj
def index(obj: _Ctx, force: bool, list_: bool, prune: bool, as_json: bool) -> None:
    """Index the memory files (incremental; a full rebuild when settings changed)."""
    from .render import render_sync  # noqa: PLC0415

    if list_ or prune:
        if force or (list_ and prune):
            raise click.UsageError("--list, --prune and --force go one at a time")
        with _errors_to_exit():
            _index_catalog(obj.settings().state_dir / "memory", prune=prune, as_json=as_json)
        return
    with _errors_to_exit():
        obj.warn_if_no_memory()
        report = obj.run(lambda m: m.sync(force=force, reason="cli"), progress=not as_json, command="index")
    if as_json:
        _emit_json(report.model_dump(by_alias=True, mode="json"))
    else:
        click.echo(render_sync(report))
    if report.vectors_error:  # the text is indexed, the vectors are not: a script must not read success
        ms = obj.settings().memory_search
        other = (f"check the fallback provider ({ms.fallback}), which failed too" if ms.fallback != "none"
                 else "set memorySearch.fallback to embed with another provider")
        click.echo("memsift: the notes are indexed for keyword search, but their vectors could not be made "
                   f"({report.vectors_error}). Run `memsift index` again once the provider answers, or {other}.",
                   err=True)
        sys.exit(EXIT_CODES["provider"])


def _index_catalog(folder: Any, *, prune: bool, as_json: bool) -> None:
    """`memsift index --list` / `--prune` over the state folder's indexes."""
    from memsift.backends.builtin.catalog import list_indexes, prune_indexes  # noqa: PLC0415

    from .render import render_indexes  # noqa: PLC0415

    if not prune:
        found = list_indexes(folder)
        if as_json:
            _emit_json({"folder": str(folder), "indexes": [i.to_json_dict() for i in found]})
        else:
            click.echo(render_indexes(folder, found))
        return
    removed, kept = prune_indexes(folder)
    if as_json:
        _emit_json({"folder": str(folder), "removed": [i.to_json_dict() for i in removed],
                    "kept": [{**i.to_json_dict(), "reason": why} for i, why in kept]})
        return
    for i in removed:
        click.echo(f"removed {i.path} (workspace {i.workspace} no longer exists; {i.bytes / 2**20:.1f} MB freed)")
    for i, why in kept:
        click.echo(f"kept {i.path}: {why}")
    if not removed and not kept:
        click.echo(f"Nothing to remove: every index in {folder} belongs to a workspace that exists "
                   "(or to one memsift did not record yet).")


class _TextCommand(click.Command):
    """A command whose argument is free text (a query, a note): text that starts with "-" ("-5
    degrees outside") is read as an unknown option; the error says how to pass it."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        given = list(args)  # the parser consumes `args`
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as exc:
            meant = OTHER_TOOLS_OPTIONS.get(exc.option_name.split("=", 1)[0])
            if meant and meant.split()[0] in {n for p in self.params for n in p.opts}:
                raise click.UsageError(f"No such option {exc.option_name!r}. Did you mean {meant!r}?", ctx) from None
            token = next((a for a in given if a.startswith(exc.option_name)), exc.option_name)
            if " " not in token.strip() and not token[1:2].isdigit() and token.strip("-"):
                raise  # a mistyped option (--jsn): click names the ones meant; not a rule ("---")
            raise click.UsageError(f"{exc.format_message().rstrip('.')}. Text that starts with '-' goes after "
                                   f"'--': memsift {ctx.info_name} -- {shlex.quote(token)}", ctx) from None


@cli.command(cls=_TextCommand, params=search_params())
@click.pass_obj
def search(obj: _Ctx, query: str, backend: str | None, as_json: bool, **params: Any) -> None:
    """Search memory for QUERY."""
    with _errors_to_exit():
        settings = obj.settings()
    request = cli_search_request(params, settings, query)  # a bad option: exit 2, before any index opens
    if backend:
        obj.backend = backend
    with _errors_to_exit():
        answer = obj.run(
            lambda m: m.answer(request), progress=None, command="search"
        )  # a first build is said, on a terminal or not
        if answer.denied is None:  # a denial shows nothing of the workspace, not even its path
            obj.warn_if_no_memory()
    out, err, code = search_output(answer, as_json=as_json, explain=request.explain)
    click.echo(out, nl=False)
    if err:
        click.echo(err, err=True, nl=False)
    sys.stdout.flush()
    from .helper import start_helper  # noqa: PLC0415

    start_helper(sys.argv[1:], backend, obj.settings())  # later searches are answered by it
    if code:
        sys.exit(code)


CLI_READ_CHARS = 1_000_000  # what `get` prints at most by default: a bounded read, streamed


@cli.command(
    params=[
        click.Argument(["target"], metavar="PATH[:FROM-TO | #LFROM-LTO | :FROM[:COUNT]]"),
        *model_options(ReadOptions),
        click.Option(["--json", "as_json"], is_flag=True, help="Print one JSON document."),
    ]
)
@click.pass_obj
def get(obj: _Ctx, target: str, as_json: bool, **params: Any) -> None:
    """Read a memory file, or a line range of it (memory_get). Takes what search prints: the hit
    header (memory/2026-11-05.md:5-8) or the citation (memory/2026-11-05.md#L5-L8). Prints at most
    --max-chars (1,000,000) characters and says where the rest starts."""
    from ..requests import run_read  # noqa: PLC0415

    request = _request(obj, ReadOptions, params, path=target)
    _path, from_line, _lines = request.target()
    with _errors_to_exit():
        result = obj.run(lambda m: run_read(m, request, max_chars=CLI_READ_CHARS), command="get")
    text = result.text
    past_end = bool(from_line and from_line > result.total_lines and not result.denied)
    if as_json:
        _emit_json(result.to_json_dict())
    elif result.denied:
        from .render import render_denial  # noqa: PLC0415

        click.echo(render_denial(result.denied))
    elif not (result.missing or past_end):
        click.echo(text, nl=not text.endswith("\n"))
    if result.truncated and not as_json:
        more = f" --offset {result.next_offset}" if result.next_offset else ""
        cut_at = request.max_chars or CLI_READ_CHARS
        click.echo(f"memsift: {name_shown(result.path)}: cut at {cut_at:,} characters (--max-chars); the rest: "
                   f"memsift get {shlex.quote(name_shown(result.path))} --from {result.next_from}{more}", err=True)
    if result.missing:
        click.echo(f"memsift: {name_shown(result.path)} does not exist (search first, or check the path)", err=True)
        sys.exit(EXIT_CODES["error"])
    if past_end:
        click.echo(f"memsift: {name_shown(result.path)} has {result.total_lines} lines; nothing from line {from_line}",
                   err=True)
        sys.exit(EXIT_CODES["error"])


@cli.command(
    params=[
        *model_options(StatusOptions),
        click.Option(["--json", "as_json"], is_flag=True, help="Print one JSON document."),
    ]
)
@click.pass_obj
def status(obj: _Ctx, as_json: bool, **params: Any) -> None:
    """Show what is indexed, with which provider, and what is degraded."""
    from ..requests import run_status  # noqa: PLC0415
    from .render import render_status  # noqa: PLC0415

    request = _request(obj, StatusOptions, params)
    with _errors_to_exit():
        st = obj.run(lambda m: run_status(m, request), command="status")
        if st.denied is None:
            obj.warn_if_no_memory()
            st.helper = _helper_status(obj)
            st.plugins = [f.as_dict() for f in _plugins() if not f.builtin]
    if as_json:
        _emit_json(st.to_json_dict())
    else:
        click.echo(redact(render_status(st)))
    if st.unavailable:  # the backend cannot be reached and nothing answers for it: as a search exits
        sys.exit(EXIT_CODES["backend"])


def _plugins() -> list[Any]:
    from ..plugins import GROUPS  # noqa: PLC0415
    from ..plugins.registry import installed  # noqa: PLC0415

    return [f for kind in GROUPS for f in installed(kind)]


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def plugins(as_json: bool) -> None:
    """List the backends, embedding providers and rerankers memsift can use: its own and those of
    installed plugin packages, with versions, and why one could not be loaded."""
    from .render import render_plugins  # noqa: PLC0415

    found = _plugins()
    if as_json:
        _emit_json({"plugins": [f.as_dict() for f in found]})
    else:
        click.echo(redact(render_plugins(found)))


def _helper_status(obj: _Ctx) -> dict[str, Any]:
    """The resident helper serving these settings, for `status`: running (pid, age, idle timeout,
    memory), or why none runs."""
    from .helper import helper_for  # noqa: PLC0415

    settings = obj.settings()
    if os.environ.get("MEMSIFT_NO_RESIDENT"):
        return {"running": False, "why": "off (MEMSIFT_NO_RESIDENT=1)"}
    if not settings.memory.resident_helper.enabled:
        return {"running": False, "why": "off (memory.residentHelper.enabled: false)"}
    info = helper_for(settings, obj.backend)
    if info is None:
        from .helper import helpers_at_cap  # noqa: PLC0415
        from .resident import rendezvous_dir  # noqa: PLC0415

        others = helpers_at_cap(settings, rendezvous_dir(os.environ, create=False))
        if others is not None:  # start_helper's own rule: no new helper past the cap
            cap = settings.memory.resident_helper.max_helpers
            return {
                "running": False,
                "why": f"none for these settings: {others} of this user's helpers run, the most "
                f"memory.residentHelper.maxHelpers ({cap}) allows, so searches here run cold "
                "(`memsift helpers stop` ends them, or raise maxHelpers)",
            }
        return {"running": False, "why": "none running (the next search starts one)"}
    return {"running": True, **{k: info.get(k) for k in ("pid", "ageS", "idleTimeout", "rssMB", "kind")}}


@cli.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.pass_context
def helpers(ctx: click.Context, as_json: bool) -> None:
    """List the resident helpers of this user (pid, age, idle timeout, memory, workspace)."""
    if ctx.invoked_subcommand is None:
        _list_helpers(as_json)


@helpers.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def helpers_list(as_json: bool) -> None:
    """List the resident helpers of this user (as `memsift helpers`)."""
    _list_helpers(as_json)


def _list_helpers(as_json: bool) -> None:
    from .helper import helpers as running  # noqa: PLC0415
    from .resident import rendezvous_dir  # noqa: PLC0415

    found = running(rendezvous_dir(os.environ, create=False))
    if as_json:
        _emit_json({"helpers": [{k: v for k, v in h.items() if k != "lock"} for h in found]})
        return
    if not found:
        click.echo("No resident helper is running.")
    for h in found:
        age = f"up {h['ageS'] / 60:.0f} min" if h.get("ageS") is not None else "up ?"
        rss = f"{h['rssMB']:.0f} MB" if h.get("rssMB") is not None else "? MB"
        life = (
            f"`memsift {h['kind']}`"
            if h.get("kind") in ("watch", "mcp")
            else f"exits after {h.get('idleTimeout', '?')} idle"
        )
        click.echo(f"pid {h['pid']} · {age} · {life} · {rss} · {h.get('workspace', '?')}")


@helpers.command("stop")
@click.option("--all", "all_", is_flag=True, help="Stop every resident helper of this user, not only this workspace's.")
@click.pass_obj
def helpers_stop(obj: _Ctx, all_: bool) -> None:
    """Stop the resident helper serving this workspace and settings (or all of them)."""
    from .helper import helper_for, helpers as running, stop_helper  # noqa: PLC0415
    from .resident import rendezvous_dir  # noqa: PLC0415

    with _errors_to_exit():
        every = running(rendezvous_dir(os.environ, create=False))
        found = every if all_ else [h for h in [helper_for(obj.settings(), obj.backend)] if h is not None]
    if not found:
        if all_ or not every:
            click.echo("No resident helper is running.")
            return
        workspace = str(obj.settings().workspace)
        here = sum(h.get("workspace") == workspace for h in every)
        click.echo("No resident helper is running for this workspace and settings; "
                   + (f"{here} for this workspace with other settings (another config, agent, backend, time zone "
                      "or environment)" if here else f"{len(every)} for other workspaces")
                   + ": `memsift helpers` lists them, `memsift helpers stop --all` stops every one.")
        return
    failed = 0
    for h in found:
        if h.get("kind") in ("watch", "mcp"):  # the user's own long-running command: not ours to end
            click.echo(
                f"left `memsift {h['kind']}` pid {h['pid']} running ({h.get('workspace', '?')}): stop it where it runs"
            )
            continue
        why = stop_helper(h)
        failed += why is not None
        what = f"the helper pid {h['pid']} ({h.get('workspace', '?')})"
        click.echo(f"stopped {what}" if why is None else f"could not stop {what}: {why}")
    if failed:
        sys.exit(EXIT_CODES["error"])


NOTE_FROM_STDIN_MAX_BYTES = 1 << 20  # a longer text belongs in a file of its own under memory/


def _note_text(text: str | None) -> str:
    """TEXT, or with `-` the text piped in (`pbpaste | memsift note -`). Only `-` reads stdin: a
    bare `memsift note` run by a tool whose stdin stays open would wait forever."""
    if text != "-":
        return text or ""
    data = sys.stdin.buffer.read(NOTE_FROM_STDIN_MAX_BYTES + 1)
    if len(data) > NOTE_FROM_STDIN_MAX_BYTES:
        raise click.UsageError(f"a note read from stdin holds at most {NOTE_FROM_STDIN_MAX_BYTES >> 20} MiB; "
                               "save a longer text as a file of its own under memory/")
    return data.decode("utf-8", errors="replace")


@cli.command(cls=_TextCommand)
@click.argument("text", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.pass_obj
def note(obj: _Ctx, text: str | None, as_json: bool) -> None:
    """Append TEXT as a timestamped line to today's memory/YYYY-MM-DD.md (created if needed);
    `memsift note -` reads the note from stdin."""
    from ..files.notes import append_note  # noqa: PLC0415
    from ..config.workspace import is_workspace  # noqa: PLC0415
    from ..config.zones import wall_clock  # noqa: PLC0415
    from ..search.clock import now as clock_now  # noqa: PLC0415

    text = _note_text(text)
    if not text.strip():
        raise click.UsageError('a note needs some text, e.g. memsift note "Call the dentist on Monday" '
                               "(or pipe it in: … | memsift note -)")
    with _errors_to_exit():
        settings = obj.settings()
        new = not is_workspace(settings.workspace)
        if new and settings.workspace_given_by is None:
            raise ConfigError(
                f"the current folder {settings.workspace} is not a memory workspace (no MEMORY.md, memory.md or "
                "memory/ folder here or above it); run memsift from your agent's workspace, or pass -w DIR "
                "(a new workspace is created there)"
            )
        # The user's day and time (query.time.timezone), counted from $MEMSIFT_NOW as a search counts.
        zone = settings.memory_search.query.time.timezone
        path, line = append_note(settings.workspace, text, now=wall_clock(clock_now(zone=zone), zone))
        if new:
            click.echo(f"memsift: created {settings.workspace / 'memory'} (a new workspace)", err=True)
    if as_json:
        _emit_json({"path": path, "line": line})
    else:
        click.echo(f"{path}:{line}")


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON line per event on stdout.")
@click.pass_obj
def watch(obj: _Ctx, as_json: bool) -> None:
    """Keep the index fresh: watch the memory files and sync on every change (Ctrl-C stops)."""
    from ..compose.factory import open_manager  # noqa: PLC0415
    from ..config.follow import ConfigFollower  # noqa: PLC0415
    from .render import WatchStatus  # noqa: PLC0415

    said: list[str] = []  # an edit that broke the config, said by the status line
    follower = ConfigFollower(obj.settings_and_sources, on_broken=said.append)
    with _errors_to_exit():
        settings = follower.load()
        for note in settings.notes:
            click.echo(f"memsift: warning: {note}", err=True)
    _say_if_watched_already(settings, obj.backend)

    async def go() -> None:
        status = WatchStatus(settings, as_json=as_json)
        served = [open_manager(settings, backend=obj.backend)]
        try:
            with status, anyio.open_signal_receiver(*stop_signals()) as signals:
                async with anyio.create_task_group() as tg:
                    status.on_gone = tg.cancel_scope.cancel  # what read its lines is gone: nothing to tell
                    tg.start_soon(_cancel_on_signal, signals, tg.cancel_scope)  # also during the first sync
                    await _watch_following(obj, served, settings, follower, status, said)
        finally:
            with anyio.CancelScope(shield=True):
                await served[0].aclose()
        status.stopped()
        if status.write_error is not None:
            from .crash import write_refused  # noqa: PLC0415

            sys.exit(write_refused(status.write_error, output=True))

    with _errors_to_exit():
        anyio.run(go)


def _say_if_watched_already(settings: Any, backend: str | None) -> None:
    """A second `memsift watch` of the same settings runs (a terminal left open elsewhere, a
    service beside it), but every change is then synced twice: said, with how to stop one."""
    from .helper import helper_for  # noqa: PLC0415

    holder = None if os.environ.get("MEMSIFT_NO_RESIDENT") else helper_for(settings, backend)
    if holder is not None and holder.get("kind") == "watch":  # this one takes the lock only later
        click.echo(f"memsift: warning: another `memsift watch` (pid {holder['pid']}) already watches "
                   f"{settings.workspace} with these settings: this one does its work again. Stop one of them "
                   f"(Ctrl-C in its terminal, or `kill {holder['pid']}`).", err=True)


async def _watch_following(obj: _Ctx, served: list[Any], settings: Any, follower: Any, status: Any,
                           said: list[str]) -> None:
    """Keep `served[0]` fresh and answer the CLI's searches from it; when the config changes into
    other settings, go on with a manager for them (`served[0]`, the old one closed)."""
    from ..compose.factory import open_manager  # noqa: PLC0415
    from ..compose.host import serve_freshness  # noqa: PLC0415
    from .resident_server import serve_resident  # noqa: PLC0415

    while True:
        manager = served[0]
        try:
            with _serving_as_helper(obj, settings, "watch"), anyio.CancelScope() as serving:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_say_broken, said, status)
                    await tg.start(lambda task_status: serve_freshness(
                        manager, settings, on_event=status.event, task_status=task_status))
                    # While watching, `memsift search` in another terminal is answered from here.
                    sock = await tg.start(lambda task_status: serve_resident(
                        manager, settings, backend=obj.backend, on_answer=lambda info: status.event("answered", info),
                        task_status=task_status))
                    status.event("resident", {"socket": str(sock) if sock else None})
                    settings, served[0] = await follower.next_opened(
                        settings, lambda new: open_manager(new, backend=obj.backend))
                    serving.cancel()
        finally:
            if served[0] is not manager:  # replaced (the caller closes the one served when it ends)
                with anyio.CancelScope(shield=True):
                    await manager.aclose()
        status.settings = settings
        status.event("config", {"workspace": str(settings.workspace), "warnings": list(settings.notes)})


async def _say_broken(said: list[str], status: Any) -> None:
    while True:
        while said:
            status.event("config", {"error": said.pop(0)})
        await anyio.sleep(0.5)


@contextmanager
def _serving_as_helper(obj: _Ctx, settings: Any, kind: str) -> Iterator[None]:
    """A long-running command that answers the CLI's searches holds these settings' helper lock
    while it runs: `status` shows it, and no helper is started beside it (`-v search` included).
    When a helper holds it already, that one goes on answering too."""
    from .helper import helper_lock_path, take_helper_lock, write_helper_info  # noqa: PLC0415
    from .resident import rendezvous_dir  # noqa: PLC0415

    folder = rendezvous_dir(os.environ, create=True) if not os.environ.get("MEMSIFT_NO_RESIDENT") else None
    lock = take_helper_lock(helper_lock_path(folder, settings, obj.backend, os.environ)) if folder else None
    if lock is not None:
        write_helper_info(lock, settings, "never", kind=kind)
    try:
        yield
    finally:
        if lock is not None:
            lock.truncate(0)
            lock.close()


async def _cancel_on_signal(signals: Any, scope: anyio.CancelScope) -> None:
    """SIGINT, SIGTERM or SIGHUP (not ignored) ends a long-running command: its task group is
    cancelled, children and all, and the process is gone within STOP_GRACE_S whatever holds it
    (a worker thread in a long call)."""
    async for sig in signals:
        exit_within(int(sig), STOP_GRACE_S)
        scope.cancel()
        return


@cli.command("resident-helper", hidden=True)
@click.pass_obj
def resident_helper(obj: _Ctx) -> None:
    """Answer this workspace's CLI searches until idle (started by a cold `memsift search`)."""
    from ..durations import check_duration  # noqa: PLC0415
    from ..compose.host import serve_freshness  # noqa: PLC0415
    from .helper import helper_lock_path, take_helper_lock, write_helper_info  # noqa: PLC0415
    from .resident import rendezvous_dir  # noqa: PLC0415
    from .resident_server import serve_resident  # noqa: PLC0415

    with _errors_to_exit():
        settings = obj.settings()
    folder = rendezvous_dir(os.environ, create=True)
    lock = take_helper_lock(helper_lock_path(folder, settings, obj.backend, os.environ)) if folder else None
    if lock is None:
        return  # another helper serves these settings
    write_helper_info(lock, settings, settings.memory.resident_helper.idle_timeout)

    async def go(manager: Any) -> None:
        settings = obj.settings()
        idle_s = check_duration(settings.memory.resident_helper.idle_timeout) / 1000
        last = [time.monotonic()]

        async def exit_when_idle(scope: anyio.CancelScope) -> None:
            while (left := idle_s - (time.monotonic() - last[0])) > 0:
                await anyio.sleep(min(left, 5.0))
            scope.cancel()

        with anyio.open_signal_receiver(*stop_signals()) as signals:
            async with anyio.create_task_group() as tg:
                # Stopped at once, also during its first sync (a QMD boot update can run for a minute).
                tg.start_soon(_cancel_on_signal, signals, tg.cancel_scope)
                await tg.start(lambda task_status: serve_freshness(manager, settings, task_status=task_status))
                sock = await tg.start(
                    lambda task_status: serve_resident(
                        manager,
                        settings,
                        backend=obj.backend,
                        on_answer=lambda _info: last.__setitem__(0, time.monotonic()),
                        task_status=task_status,
                    )
                )
                if sock is None:  # no socket (no private folder for it): no search can reach it
                    tg.cancel_scope.cancel()
                tg.start_soon(exit_when_idle, tg.cancel_scope)

    try:
        with _errors_to_exit():
            obj.run(go)
    finally:
        lock.truncate(0)  # nothing left behind for `status` and `helpers` to show
        lock.close()


@cli.command()
@click.option("--http", "use_http", is_flag=True, help="Serve streamable HTTP instead of stdio.")
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="HTTP bind address (no authentication: keep it local)."
)
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="HTTP port.")
@click.option(
    "--session-key",
    callback=_session_key,
    help="Session key for every call (scope rules, citations); wins over a per-call key.",
)
@click.option(
    "--max-chars",
    type=click.IntRange(min=200),
    help="Bound on each answer (default memory.qmd.limits.maxInjectedChars).",
)
@click.option("--no-watch", is_flag=True, help="Do not keep the index fresh in the background.")
@click.option("--allow-host", "allow_hosts", multiple=True, metavar="NAME",
              help="With --http: a host name clients may send in Host/Origin besides loopback ones and the bound "
                   "address (repeatable; '*' turns the DNS-rebinding check off, for a proxy that makes its own).")
@click.pass_obj
def mcp(obj: _Ctx, use_http: bool, host: str, port: int, session_key: str | None, max_chars: int | None, no_watch: bool,
        allow_hosts: tuple[str, ...]) -> None:
    """Serve memory_search, memory_get and memory_status over MCP (stdio, or streamable HTTP with --http)."""
    from importlib.util import find_spec  # noqa: PLC0415

    if find_spec("mcp") is None:  # not imported here: the SDK takes over a second to load (after the handshake)
        click.echo(
            "memsift: the MCP server needs the MCP SDK, which this install lacks: pip install 'mcp>=2'", err=True
        )
        sys.exit(EXIT_CODES["usage"])
    from ..mcp.http import is_loopback  # noqa: PLC0415

    if use_http and not is_loopback(host):
        click.echo(f"memsift: warning: serving memory without authentication on {host}:{port}; requests must name "
                   "a loopback host, the bound address or an --allow-host name", err=True)
    from ..mcp.serving import serve  # noqa: PLC0415
    from .resident_server import serve_resident  # noqa: PLC0415

    async def terminal(manager, settings) -> None:  # `memsift search` answered by this process
        await serve_resident(manager, settings, backend=obj.backend)

    with _errors_to_exit():
        anyio.run(lambda: serve(obj.settings, backend=obj.backend, transport="http" if use_http else "stdio",
                                host=host, port=port, session_key=session_key, max_chars=max_chars,
                                fresh=not no_watch, also_serve=terminal, allow_hosts=allow_hosts,
                                settings_and_sources=obj.settings_and_sources))


@cli.command()
@click.argument("queries_file", type=click.Path(dir_okay=False))
@click.option("-k", "k", default=5, show_default=True, type=click.IntRange(1, 50), help="Compare the top K hits.")
@click.option("--session-key", callback=_session_key, help="Session key for both sides (scope rules, citations).")
@click.option("--no-sync", is_flag=True, help="Search the indexes as they are (no sync first).")
@click.option("--fail-under", type=click.FloatRange(0, 1),
              help="Exit 1 when the mean hit overlap is below this, or when a side fell back or failed on any query.")
@click.option("--mode", "-m", help="Retrieval on both sides: auto, hybrid, keyword (builtin BM25 vs qmd search), "
                                   "vector (vsearch); hybrid is qmd's query.")
@click.option("--against", type=PARITY_SIDE, default="qmd", show_default=True,
              help="What builtin is compared with: qmd, postgres, an installed plugin's backend, or openclaw "
                   "(OpenClaw's own memory search, through `openclaw memory search`).")
@click.option("--openclaw-command", default="openclaw", show_default=True,
              help="With --against openclaw: the OpenClaw command (a name on PATH, a path, or a command line).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.pass_obj
def parity(obj: _Ctx, queries_file: str, k: int, session_key: str | None, no_sync: bool, fail_under: float | None,
           mode: str | None, against: str, openclaw_command: str, as_json: bool) -> None:
    """Run the queries in QUERIES_FILE on builtin and QMD (or another backend, or OpenClaw's own memory
    search) and compare the answers."""
    from .parity import gate_failure, read_queries, run_parity  # noqa: PLC0415
    from .render import render_parity  # noqa: PLC0415

    build_request(SearchOptions, {"mode": mode, "session_key": session_key}, query="")  # a bad mode: exit 2 first
    with _errors_to_exit():
        queries = read_queries(queries_file)
        settings = obj.settings()
        report = anyio.run(
            lambda: run_parity(
                settings,
                queries,
                k=k,
                session_key=session_key,
                sync=not no_sync,
                mode=mode,
                against=against,
                say=lambda step: click.echo(f"memsift: parity: {step}", err=True),
                openclaw_command=openclaw_command,
            )
        )
    if as_json:
        _emit_json(report.model_dump(by_alias=True, mode="json"))
    else:
        click.echo(render_parity(report))
    failure = gate_failure(report, fail_under) if fail_under is not None else None
    if failure:
        click.echo(f"memsift: {failure}", err=True)
        sys.exit(EXIT_CODES["error"])


@cli.group()
def openclaw() -> None:
    """Put the OpenClaw plugin that came with this memsift into a Gateway, or take it out."""


def _openclaw_gateway(command: str) -> Any:
    from .openclaw import Gateway  # noqa: PLC0415

    try:
        return Gateway.from_command(command)
    except ValueError as exc:  # shlex: an unclosed quote or a trailing backslash
        raise click.BadParameter(f"{command!r} is no command line: {exc}", param_hint="--openclaw") from None


def _said_changes(changes: list[Any], config: str, as_json: bool, extra: dict[str, Any]) -> None:
    if as_json:
        _emit_json({**extra, "changes": [c.as_dict() for c in changes]})
        return
    click.echo(f"changed in {config}:" if changes else f"nothing changed in {config}")
    for change in changes:
        click.echo(f"  {change.line()}")


OPENCLAW_OPTION = click.option(
    "--openclaw",
    "openclaw_command",
    default="openclaw",
    show_default=True,
    metavar="COMMAND",
    help="The OpenClaw command (a name on PATH, a path, or a command line); its HOME and "
    "OPENCLAW_* variables choose the Gateway.",
)


@openclaw.command("install")
@OPENCLAW_OPTION
@click.option("--keep-command", is_flag=True,
              help="Leave plugins.entries.memsift.config.command as it is (default: this memsift's own path).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def openclaw_install(openclaw_command: str, keep_command: bool, as_json: bool) -> None:
    """Copy this memsift's OpenClaw plugin into the Gateway (OpenClaw's own installer, no link to this
    folder), select it for the memory slot, point it at this memsift, and say what changed."""
    from .openclaw import install, plugin_version, this_memsift  # noqa: PLC0415

    gateway = _openclaw_gateway(openclaw_command)
    command = None if keep_command else this_memsift()
    with _errors_to_exit():
        changes = install(gateway, command=command, say=lambda line: click.echo(f"memsift: {line}", err=True))
        config = str(gateway.config_file())
    _said_changes(changes, config, as_json, {"installed": plugin_version(), "config": config, "command": command})
    if not as_json:
        click.echo("Restart the Gateway to load it (openclaw gateway restart, or its service); then "
                   "`openclaw plugins inspect memsift` shows it in the memory slot.")


@openclaw.command("uninstall")
@OPENCLAW_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def openclaw_uninstall(openclaw_command: str, as_json: bool) -> None:
    """Remove the memsift plugin from the Gateway (files, settings, install record); the memory slot goes
    back to OpenClaw's own memory-core. memsift's index and the notes stay."""
    from .openclaw import uninstall  # noqa: PLC0415

    gateway = _openclaw_gateway(openclaw_command)
    with _errors_to_exit():
        changes = uninstall(gateway, say=lambda line: click.echo(f"memsift: {line}", err=True))
        config = str(gateway.config_file())
    _said_changes(changes, config, as_json, {"uninstalled": "memsift", "config": config})


@cli.group(cls=_ConfigCommands)
def config() -> None:
    """Write a starter configuration, or inspect the resolved one."""


STARTER_CONFIG = """// memsift's configuration (JSON5). Every key, its default and allowed values:
// `memsift config show` (this file merged with the defaults) and the configuration reference.
{
  memory: {
    backend: "builtin",          // "builtin" (SQLite), "qmd" (the QMD tool), "postgres", or a plugin's
    // limits: { search: "2m", index: "30m", stall: "3m" },   // every command's time budget
  },
  agents: {
    defaults: {
      workspace: __WORKSPACE__,  // the folder holding MEMORY.md and memory/YYYY-MM-DD.md
      memorySearch: {
        provider: "auto",        // the bundled model (offline, no key) unless a provider has a key; or "local", "openai", "gemini", "voyage", "mistral", "ollama", "none"
        // remote: { apiKey: "OPENAI_API_KEY" },   // a key, or the name of the variable holding it
        query: { maxResults: 6, minScore: 0.35 },
      },
    },
  },
}
"""  # noqa: E501


@config.command("init")
@click.option("--force", is_flag=True, help="Replace an existing file.")
@click.option(
    "-c", "--config", "target", metavar="FILE", help="The file to write (as the global --config before the command)."
)
@click.pass_obj
def config_init(obj: _Ctx, force: bool, target: str | None) -> None:
    """Write a starter config (to -c FILE / --config / $MEMSIFT_CONFIG, else ~/.config/memsift/config.json5),
    readable by you alone; the workspace is the current one when it is a memory workspace."""
    from ..config.sources import default_config_path  # noqa: PLC0415
    from ..config.load import current_folder  # noqa: PLC0415
    from ..config.workspace import find_workspace, is_workspace  # noqa: PLC0415
    from ..private_dirs import make_private_dir  # noqa: PLC0415

    chosen = target or obj.config
    path = Path(chosen).expanduser() if chosen else default_config_path(os.environ)
    if path is None:
        from ..private_dirs import no_home  # noqa: PLC0415

        with _errors_to_exit():
            raise no_home("give the config's path: memsift config init -c /path/to/config.json5")
    markdown = (".md", ".markdown")
    if os.path.realpath(path).lower().endswith(markdown):  # MEMORY.md, itself or through a link
        click.echo(f"memsift: {path} is a Markdown file{'' if path.suffix.lower() in markdown else ' (through a link)'}"
                   ", maybe a memory file: memsift never writes one. A config is a JSON5 file, e.g. memsift.json5",
                   err=True)
        sys.exit(EXIT_CODES["usage"])
    if path.exists() and not force:
        click.echo(f"memsift: {path} exists; `memsift config show` shows what it sets (--force replaces it)", err=True)
        sys.exit(EXIT_CODES["usage"])
    with _errors_to_exit():
        start = Path(obj.workspace).expanduser().resolve() if obj.workspace else current_folder()
    candidate = find_workspace(start, given_by=None)
    found = candidate if is_workspace(candidate) else None
    workspace = json.dumps(str(found)) if found else '"~/agent-workspace"'
    try:
        make_private_dir(path.parent)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # it may hold an API key later
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(STARTER_CONFIG.replace("__WORKSPACE__", workspace))
    except OSError as exc:
        click.echo(f"memsift: cannot write {path}: {exc.strerror or exc}", err=True)
        sys.exit(EXIT_CODES["config"])
    click.echo(f"wrote {path}" + ("" if found else " (set agents.defaults.workspace: no memory workspace is here)"))


@config.command("show")
@click.argument("key", required=False)
@click.pass_obj
def config_show(obj: _Ctx, key: str | None) -> None:
    """Print the resolved config for the agent (defaults, files, environment merged; secrets
    masked), and under `sources` which file and key each setting came from. With KEY
    (`memorySearch.query.maxResults`, `memory.backend`; as in the file, `agents.defaults.…`, too)
    only that setting's value, and on stderr where it came from."""
    with _errors_to_exit():
        s = obj.settings()
    ms = s.memory_search.model_dump(by_alias=True, mode="json")  # the API key prints as **********
    for remote in (ms["remote"], ms["query"]["rerank"]["remote"]):  # header values are secrets too
        remote["headers"] = {name: "**********" for name in remote["headers"]}
        if remote.get("baseUrl"):
            remote["baseUrl"] = url_without_password(remote["baseUrl"])  # http://user:***@host/v1
    data = {
        "configPath": str(s.config_path) if s.config_path else None,
        "openclawConfigPath": str(s.openclaw_config) if s.openclaw_config else None,
        "agentId": s.agent_id,
        "workspace": str(s.workspace),
        "stateDir": str(s.state_dir),
        "storePath": str(s.store_path),
        "memorySearch": ms,
        "memory": s.memory.model_dump(by_alias=True, mode="json", exclude={"search"}),
        # Every setting not listed here is memsift's default.
        "sources": dict(sorted(s.sources.items())),
        "warnings": list(s.notes),
    }
    data = _whole_numbers(data)
    if key is None:
        _emit_json(data)
        return
    path, value = _setting(data, key)
    click.echo(value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False))
    sources = data["sources"]
    source = sources.get(path) or next((where for k, where in sources.items() if path.startswith(k + ".")), None)
    inside = {k: where for k, where in sources.items() if k.startswith(path + ".")}  # a section's settings
    if source:
        click.echo(f"memsift: {path} from {source}", err=True)
    for k, where in inside.items():
        click.echo(f"memsift: {k} from {where}", err=True)
    if not source:
        click.echo(f"memsift: {path}{' (the rest)' if inside else ''} is memsift's default", err=True)


def _setting(data: dict[str, Any], key: str) -> tuple[str, Any]:
    """The path and value of KEY in `config show`'s document: segments compared without case, `_`
    or `-` (`max_results` is `maxResults`), a leading `agents.defaults.` (the file's spelling) dropped.
    An unknown segment is a usage error naming the keys there."""
    import difflib  # noqa: PLC0415

    def plain(name: str) -> str:
        return name.replace("_", "").replace("-", "").lower()

    parts = [part for part in key.strip().split(".") if part]
    if [plain(x) for x in parts[:2]] == ["agents", "defaults"]:
        parts = parts[2:]
    node: Any = {k: v for k, v in data.items() if k not in ("sources", "warnings")}
    path: list[str] = []
    for part in parts:
        names = {plain(k): k for k in node} if isinstance(node, dict) else {}
        if plain(part) not in names:
            here = ".".join(path) or "the top level"
            if not names:
                raise click.UsageError(f"{here} is a value ({json.dumps(node)}), with no {part!r} under it")
            near = difflib.get_close_matches(part, list(names.values()), n=1)
            hint = f" Did you mean {'.'.join([*path, near[0]])!r}?" if near else ""
            raise click.UsageError(f"no setting {part!r} under {here}.{hint} Keys there: {', '.join(names.values())}")
        path.append(names[plain(part)])
        node = node[names[plain(part)]]
    if not path:
        raise click.UsageError("KEY names a setting, e.g. memorySearch.query.maxResults")
    return ".".join(path), node


def _whole_numbers(value: Any) -> Any:
    """Keys typed as numbers hold floats (`maxResults: 6.0`); show whole numbers as the user wrote them."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _whole_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole_numbers(v) for v in value]
    return value


def _terminated(signum: int, _frame: Any) -> None:
    """SIGTERM (or SIGHUP) unwinds like Ctrl-C: running work is cancelled and every child process group is
    ended on the way out (a QMD wrapper script's children too), instead of the process vanishing;
    and it is gone within about 1 s whatever holds it (engine/mcp/stopping.py)."""
    exit_within(signum)
    raise SystemExit(128 + signum)


def main() -> None:
    import signal  # noqa: PLC0415

    for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", signal.SIGTERM)):  # SIGHUP: its terminal closed
        if signal.getsignal(sig) in (signal.SIG_DFL, None):  # not one `nohup` ignores, nor the early handler
            signal.signal(sig, _terminated)
    end_on_unraisable_stops()  # a stop that lands inside a finaliser ends the process, without a traceback
    try:
        cli(prog_name="memsift")
    except BaseExceptionGroup as group:  # the signal arrived inside a task group (uvicorn re-raises it after shutdown)
        ended = group.subgroup(lambda e: isinstance(e, (SystemExit, KeyboardInterrupt)))
        if ended is None:
            from .crash import report_crash  # noqa: PLC0415

            sys.exit(report_crash(group))
        while isinstance(ended, BaseExceptionGroup):
            ended = ended.exceptions[0]
        sys.exit(ended.code if isinstance(ended, SystemExit) else 130)
    except Exception as exc:  # a bug: one line and where its traceback was kept (cli/crash.py)
        from .crash import report_crash  # noqa: PLC0415

        sys.exit(report_crash(exc))
    finally:
        stopping = sys.modules.get("memsift.engine.mcp.stopping")
        if stopping is not None and stopping.signalled():  # told to stop: a worker thread's child (the
            stopping.end_children()  # int8 graph's build) would outlive this process, unseen, for seconds


if __name__ == "__main__":  # `python -m memsift.engine.cli.main`: as the console script, a resident answer first
    from .resident import try_resident  # noqa: PLC0415
    from .streams import prepare_standard_streams  # noqa: PLC0415

    prepare_standard_streams()
    resident_exit = try_resident(sys.argv[1:])
    if resident_exit is not None:
        sys.exit(resident_exit)
    main()
