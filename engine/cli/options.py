"""The CLI's options, made from the request models (`engine/requests.py`): each field with a
`cli` spelling becomes a click option, so a search option added to `SearchOptions` reaches the
CLI (and the resident server, which parses a client's argv with the same parameters) at once.

Click only splits the command line; every value is judged by the model (`build_request`), so the
CLI refuses exactly what MCP and the Python API refuse, with exit code 2 and the flag named.
"""

from __future__ import annotations

from typing import Any

import click

from ..records import Record
from ..requests import InvalidRequest, door_name, spellings

__all__ = [
    "model_options",
    "group_params",
    "search_params",
    "build_request",
    "scoped_request",
    "cli_search_request",
    "BACKEND_NAME",
    "PARITY_SIDE",
]


class BackendName(click.ParamType):
    """A backend registered with memsift (its own or an installed plugin's, engine/plugins)."""

    name = "backend"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from ..plugins.registry import check_name  # noqa: PLC0415

        try:
            check_name("backend", str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)
        return str(value)


BACKEND_NAME = BackendName()


class ParitySide(BackendName):
    """What `memsift parity --against` takes: a backend, or `openclaw` (OpenClaw's own memory search)."""

    name = "backend or openclaw"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        return "openclaw" if str(value) == "openclaw" else super().convert(value, param, ctx)


PARITY_SIDE = ParitySide()


_CLICK_TYPES = {"int": click.INT, "float": click.FLOAT}


def model_options(model: type[Record]) -> list[click.Option]:
    """A click option for every field of `model` that has a CLI spelling (a flag for a yes/no
    field, a number where the field takes one, else text the model reads). Values are not
    defaulted here (None: not given), so the model's and the config's defaults apply."""
    out = []
    for name, field in model.model_fields.items():
        flags = spellings(model, name).get("cli")
        if not flags:
            continue
        kind = str(field.extra.get("kind"))
        if kind == "bool":
            out.append(click.Option([*flags, name], is_flag=True, default=False, help=field.description))
        else:
            out.append(click.Option([*flags, name], type=_CLICK_TYPES.get(kind, click.STRING), default=None,
                                    help=field.description))
    return out


def group_params() -> list[click.Parameter]:
    """The `memsift` group's options (also parsed by the resident server)."""
    return [
        click.Option(
            ["--workspace", "-w"],
            envvar="MEMSIFT_WORKSPACE",
            show_envvar=True,
            help="Workspace folder holding MEMORY.md and memory/ (default: current folder).",
        ),
        click.Option(
            ["--agent", "-a"],
            envvar="MEMSIFT_AGENT",
            show_envvar=True,
            help="Agent id, case-insensitive; one no entry has runs on the defaults (default: "
            "agents.defaults.systemAgent.agentId, else the entry marked default, else the only or first "
            "one, else 'main').",
        ),
        click.Option(
            ["--config", "-c", "config_path"],
            envvar="MEMSIFT_CONFIG",
            show_envvar=True,
            help="Config file (JSON5): memsift's own, or a whole OpenClaw config. Default: "
                 "~/.config/memsift/config.json5.",
        ),
        click.Option(
            ["--openclaw-config", "openclaw_config"],
            envvar="MEMSIFT_OPENCLAW_CONFIG",
            show_envvar=True,
            help="An OpenClaw config (openclaw.json) read under the config file: its memory keys apply, "
            "memsift's own file wins where both set a key.",
        ),
        click.Option(
            ["--backend", "-b"],
            type=BACKEND_NAME,
            help="Override memory.backend for this call (builtin, qmd, postgres or a plugin's).",
        ),
        click.Option(["--verbose", "-v"], count=True, help="More logs on stderr (-v info, -vv debug)."),
        click.Option(
            ["--timeout"],
            envvar="MEMSIFT_TIMEOUT",
            show_envvar=True,
            metavar="DURATION",
            help="This command's time budget (90, 90s, 5m; a bare number is seconds) instead of "
            "memory.limits.<command>; past it the command stops and says what it waited on.",
        ),
    ]


def search_params() -> list[click.Parameter]:
    """`memsift search`'s parameters: the query, the SearchOptions fields, and the CLI's own
    (which backend, which output form)."""
    from ..requests import SearchOptions  # noqa: PLC0415

    return [
        click.Argument(["query"]),
        *model_options(SearchOptions),
        click.Option(
            ["--backend", "-b", "backend"], type=BACKEND_NAME, help="Override memory.backend for this search."
        ),
        click.Option(["--json", "as_json"], is_flag=True, help="Print one JSON document."),
    ]


def build_request(model: Any, params: dict[str, Any], **extra: Any) -> Any:
    """The request from parsed CLI values; a value the model refuses is a usage error (exit 2)
    naming the flag."""
    values = {
        k: v for k, v in params.items() if k in model.model_fields and v is not None
    }  # not given: the model's default
    values.update(extra)
    try:
        return model.build("cli", **values)
    except InvalidRequest as exc:
        raise click.BadParameter(exc.problem, param_hint=door_name(model, exc.field, "cli")
                                 if exc.field in model.model_fields else exc.field) from None


def scoped_request(model: Any, params: dict[str, Any], settings: Any, **required: Any) -> Any:
    """`build_request`, judged as every door judges it: an empty session key is refused first; a
    chat the scope rules deny gets its denial whatever its other values (as over MCP and the
    Python API: a request with only the key, which the scoped manager answers with the denial);
    any other bad value is a usage error (exit 2)."""
    try:
        return build_request(model, params, **required)
    except click.BadParameter:
        key = params.get("session_key")
        if isinstance(key, str) and key.strip():
            from ..config.scope import decide_scope  # noqa: PLC0415

            if not decide_scope(settings.memory.qmd.scope, key).allowed:
                return model.build("cli", session_key=key, **required)
        raise


def cli_search_request(params: dict[str, Any], settings: Any, query: str) -> Any:
    """The search's one `SearchRequest` (compose/scoped.build_search: key, scope rules, options,
    times read with the configured hemisphere) from parsed CLI values; a bad value is a usage error
    (exit 2) naming the flag."""
    from ..compose.scoped import search_request  # noqa: PLC0415
    from ..requests import SearchOptions  # noqa: PLC0415

    values = {k: v for k, v in params.items() if k in SearchOptions.model_fields and v is not None}
    try:
        return search_request(settings, "cli", **{**values, "query": query})
    except InvalidRequest as exc:
        raise click.BadParameter(exc.problem, param_hint=door_name(SearchOptions, exc.field, "cli")
                                 if exc.field in SearchOptions.model_fields else exc.field) from None
