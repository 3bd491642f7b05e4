"""What a backend plugin's tests import from memsift: the backend contract every backend passes
(`BackendContract`, its notes and a group-chat session key), and the factory that opens a manager
the way every door does (config, scope rules, the stages above the backend), and `backend_of`,
which reaches the plugin's own manager below those stages."""

from __future__ import annotations

from ..compose.factory import open_manager, resolve_config
from ..compose.wrapped import backend_of
from ..testing import GROUP_CHAT, NOTES, BackendContract

__all__ = ["BackendContract", "NOTES", "GROUP_CHAT", "open_manager", "resolve_config", "backend_of"]
