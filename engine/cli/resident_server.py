"""The server side of resident searches (see `resident.py`): a long-running memsift answers the
CLI's `memsift search` with the manager it already has open.

A request is answered only when it resolves to this server's own settings: the same relevant
environment, and the same resolved config (workspace, agent, state and store paths, every
memorySearch and memory key, config file) and backend. Anything else is declined and the CLI
searches by itself, so a resident answer is always the answer the cold CLI would have given.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

import anyio
import click

from ..errors import MemsiftError
from ..logging import get_logger
from ..workspace import workspace_warning
from .resident import PROTOCOL, command_index, relevant_env, rendezvous_dir, state_tag

__all__ = ["serve_resident", "MAX_REQUEST_BYTES"]

log = get_logger("memsift.resident")

MAX_REQUEST_BYTES = 4 * 2**20  # a query is cut at 4,096 characters anyway; argv and env are small
MAX_SOCKET_PATH = 100  # sun_path holds 107 bytes
_PATH_VARS = ("MEMSIFT_CONFIG", "MEMSIFT_WORKSPACE", "MEMSIFT_STATE_DIR", "XDG_CONFIG_HOME", "XDG_STATE_HOME")


def _identity(settings: Any, backend: str | None) -> str:
    data = settings.model_dump(mode="json")
    data["backend"] = backend or settings.memory.backend
    return json.dumps(data, sort_keys=True, default=str)


class _Decline(Exception):
    """This server does not answer the request; the CLI searches by itself."""


class ResidentServer:
    def __init__(self, manager: Any, settings: Any, *, backend: str | None, on_answer: Callable[[dict], None] | None = None) -> None:
        self.manager = manager
        self.settings = settings
        self.backend = backend
        self.on_answer = on_answer or (lambda _info: None)
        self.identity = _identity(settings, backend)
        self.env = relevant_env(os.environ)
        self.answered = 0

    # --- one request ------------------------------------------------------------------------

    def _parse(self, argv: list[str], cwd: str) -> tuple[Any, dict[str, Any], str | None]:
        from ..factory import resolve_config  # noqa: PLC0415
        from .main import cli  # noqa: PLC0415

        cut = command_index(argv)
        if cut is None or argv[cut] != "search":
            raise _Decline("not a search")
        search_cmd = cli.commands["search"]
        try:
            group = click.Command("memsift", params=cli.params).make_context("memsift", argv[:cut])
            sub = search_cmd.make_context("search", argv[cut + 1 :])
        except (click.ClickException, click.exceptions.Exit) as exc:
            raise _Decline(f"arguments: {exc}") from None  # the CLI prints click's own message
        g, p = group.params, sub.params
        if g.get("verbose"):
            raise _Decline("logs were asked for (-v)")
        settings = resolve_config(g.get("config_path"), workspace=g.get("workspace"), agent=g.get("agent"), cwd=cwd)
        return settings, p, p.get("backend") or g.get("backend")

    async def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        from .main import exit_code, search_output  # noqa: PLC0415

        try:
            if request.get("protocol") != PROTOCOL:
                raise _Decline("protocol")
            env, cwd = request.get("env") or {}, str(request.get("cwd") or "")
            if env != self.env:
                raise _Decline("the environment differs")
            if cwd != os.getcwd() and any(v in env and not os.path.isabs(env[v]) for v in _PATH_VARS):
                raise _Decline("relative paths in the environment")
            try:
                settings, opts, backend = self._parse([str(a) for a in request.get("argv") or []], cwd)
            except MemsiftError as exc:
                raise _Decline(f"config: {exc}") from None  # the CLI reports it with its exit code
            if _identity(settings, backend) != self.identity:
                raise _Decline("other settings")
        except _Decline as exc:
            log.debug("resident request declined", reason=str(exc))
            return {"status": "decline", "reason": str(exc)}
        try:
            answer = await self.manager.search(
                opts["query"], max_results=opts.get("max_results"), min_score=opts.get("min_score"),
                session_key=opts.get("session_key"), explain=bool(opts.get("explain")), mode=opts.get("mode"),
            )
            out, err, code = search_output(answer, as_json=bool(opts.get("as_json")), explain=bool(opts.get("explain")))
        except MemsiftError as exc:
            out, err, code = "", f"memsift: {exc}\n", exit_code(exc)
        warning = workspace_warning(settings)  # what the cold CLI prints first
        if warning:
            err = f"memsift: warning: {warning}\n" + err
        self.answered += 1
        log.info("answered a CLI search", exit=code)
        self.on_answer({"command": "search", "exit": code})
        return {"status": "ok", "stdout": out, "stderr": err, "exit": code}

    # --- the socket -------------------------------------------------------------------------

    async def _handle(self, stream: Any) -> None:
        try:
            await self._exchange(stream)
        except Exception as exc:  # one bad connection must never stop the server
            log.warning("resident connection failed", error=f"{type(exc).__name__}: {exc}")

    async def _exchange(self, stream: Any) -> None:
        async with stream:
            data = bytearray()
            try:
                while len(data) <= MAX_REQUEST_BYTES:
                    data += await stream.receive()
            except anyio.EndOfStream:
                pass
            except (anyio.BrokenResourceError, OSError):
                return
            if len(data) > MAX_REQUEST_BYTES:
                reply = {"status": "decline", "reason": "request too large"}
            else:
                try:
                    request = json.loads(bytes(data).decode("ascii"))
                    reply = await self.answer(request if isinstance(request, dict) else {})
                except ValueError:
                    reply = {"status": "decline", "reason": "not a request"}
                except Exception as exc:  # a bug must not stop the server; the CLI falls back
                    log.warning("resident request failed", error=f"{type(exc).__name__}: {exc}")
                    reply = {"status": "decline", "reason": "server error"}
            try:
                await stream.send(json.dumps(reply).encode("ascii"))  # ASCII JSON: lone surrogates survive
            except (anyio.BrokenResourceError, OSError):
                pass

    async def serve(self, *, task_status: anyio.abc.TaskStatus[Path | None] = anyio.TASK_STATUS_IGNORED) -> None:
        folder = rendezvous_dir(os.environ, create=True)
        sock = folder / f"{state_tag(os.environ)}-{os.getpid()}.sock" if folder else None
        if sock is None or len(str(sock)) > MAX_SOCKET_PATH:
            log.info("resident searches off: no private folder for the socket", folder=str(folder))
            task_status.started(None)
            return
        sock.unlink(missing_ok=True)
        listener = await anyio.create_unix_listener(sock, mode=0o600)
        try:
            async with listener:
                task_status.started(sock)
                await listener.serve(self._handle)
        finally:
            sock.unlink(missing_ok=True)


async def serve_resident(
    manager: Any, settings: Any, *, backend: str | None = None, on_answer: Callable[[dict], None] | None = None,
    task_status: anyio.abc.TaskStatus[Path | None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Answer resident searches until cancelled (the socket is removed on the way out)."""
    await ResidentServer(manager, settings, backend=backend, on_answer=on_answer).serve(task_status=task_status)
