"""What a backend plugin's tests import from memsift: the backend contract every backend passes
(`BackendContract`, its notes and a group-chat session key), `PluginDoors` (the backend served
through every door: its settings, the cold CLI, the resident helper, `parity`, MCP) with the helpers
its tests share (`write_notes`, `example_workspace`, `backend_config`, `run_cli`, `cli_env`), the
factory that opens a manager the way every door does (config, scope rules, the stages above the
backend), and `backend_of`, which reaches the plugin's own manager below those stages."""

from __future__ import annotations

from ..compose.factory import open_manager, resolve_config
from ..compose.wrapped import backend_of
from ..testing import GROUP_CHAT, NOTES, BackendContract
from ..testing.doors import PluginDoors, backend_config, cli_env, example_workspace, run_cli, write_notes

__all__ = ["BackendContract", "NOTES", "GROUP_CHAT", "open_manager", "resolve_config", "backend_of", "PluginDoors",
           "write_notes", "example_workspace", "backend_config", "run_cli", "cli_env"]
