"""The standard streams as the CLI finds them, made safe to use before anything else runs.

Imports only what the interpreter has loaded at start (`os`, `sys`, `codecs`): it runs before the
resident client, whose cost is interpreter start-up.
"""

from __future__ import annotations

import codecs
import os
import sys

TYPE_CHECKING = False  # `typing` itself is not loaded at start-up (see resident.py)
if TYPE_CHECKING:
    from typing import TextIO

_UNICODE = {"utf-8", "utf-16", "utf-32", "utf-8-sig"}


def writes_unicode(stream: TextIO | None = None) -> bool:
    """Whether `stream` (stdout by default) can write every character: a note's emoji or CJK text."""
    stream = sys.stdout if stream is None else stream
    encoding = getattr(stream, "encoding", None)
    if encoding is None:  # a stream of text, not bytes (io.StringIO): it holds any character
        return True
    try:
        return codecs.lookup(encoding).name in _UNICODE
    except LookupError:
        return False


# A note's control characters in caret notation (ESC as ^[, a C1 CSI as ^[[), so that a terminal shows
# them instead of running them: a note saved from a chat or a web page could otherwise retitle the
# window, clear the screen, hide a line or draw over what memsift printed. Tab and newline pass.
_SHOWN = {c: f"^{chr(c + 0x40)}" for c in range(0x20) if c not in (0x09, 0x0A)}
_SHOWN |= {0x7F: "^?", **{c: f"^[{chr(c - 0x40)}" for c in range(0x80, 0xA0)}}


_SHOWN_IN_NAMES = _SHOWN | {0x09: "^I", 0x0A: "^J"}


def name_shown(name: str) -> str:
    """A file's name or path as plain output prints it, on a terminal or not: every control character
    in caret notation, a newline too, so that a name cannot start a line of its own (a file named
    "a⏎0.999 MEMORY.md:1-1⏎    - …" printed a forged hit). `--json` gives the name as it is."""
    return name.translate(_SHOWN_IN_NAMES)


def terminal_safe(text: str) -> str:
    """`text` with its control characters shown, not sent (a CRLF line end is a line end)."""
    return text.replace("\r\n", "\n").translate(_SHOWN)


class _TerminalText:
    """A standard stream on a terminal: everything written to it passes `terminal_safe`. rich's
    consoles (progress bars, `watch`'s live line: `on_the_terminal`; the MCP SDK's log:
    `rich_proxied_file`) write their own colours and cursor moves to the stream beneath, so what
    memsift gives them passes `terminal_safe` first (rich keeps ESC)."""

    shows_control_characters = True  # logging.py and the HTTP server log without colours through it

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    @property
    def rich_proxied_file(self) -> TextIO:
        return self._stream

    def write(self, text: str) -> int:
        return self._stream.write(terminal_safe(text))

    def __getattr__(self, name: str):  # noqa: ANN204  (flush, fileno, isatty, encoding, buffer: the stream's)
        return getattr(self._stream, name)


def on_the_terminal(stream: TextIO) -> TextIO:
    """The stream beneath a `_TerminalText`, for a rich console of memsift's own (while its live
    display runs, `sys.stderr` is rich's proxy of this wrapper, which rich unwraps only once)."""
    return stream._stream if isinstance(stream, _TerminalText) else stream


def shown_through_rich() -> None:
    """While a rich live display runs, it puts its own proxies in `sys.stdout` and `sys.stderr`,
    which print what is written (a warning's provider error, a file's name) through its console,
    straight to the terminal: it is shown, not sent, before it gets there. rich puts the streams
    back when the display stops."""
    from rich.file_proxy import FileProxy  # noqa: PLC0415  (loaded with the display)

    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if isinstance(stream, FileProxy):
            setattr(sys, name, _TerminalText(stream))  # type: ignore[arg-type]  # a TextIO in all but name


def discard_output(stream: TextIO) -> None:
    """Point `stream`'s descriptor at /dev/null: what is left in its buffer (a reader gone, a full
    disk) then goes nowhere, and the exit's flush does not fail on it again (Python exits 120)."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, stream.fileno())
        finally:
            os.close(null)
    except (OSError, ValueError, AttributeError):  # a stream with no descriptor (a test's capture)
        pass


def prepare_standard_streams() -> None:
    """Put /dev/null where memsift was started with stdin, stdout or stderr closed (`>&-`, a service
    manager): else the first file it opens takes that descriptor (an index's database, then written
    to by whatever prints to it), and Python leaves the stream None, so the command dies silently or
    with a traceback. Output to a closed stream is dropped, as a daemon's is. On a terminal whose
    encoding is not Unicode (`PYTHONIOENCODING=latin-1`, an old locale), a character it lacks is
    written as `\\U0001f389` instead of ending the command with a traceback. On a terminal, stdout
    and stderr show control characters (a note's text or file name, a provider's error body) instead
    of sending them (`terminal_safe`)."""
    for fd, name in enumerate(("stdin", "stdout", "stderr")):
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        null = os.open(os.devnull, os.O_RDWR)
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
        if getattr(sys, name) is None:
            setattr(sys, name, open(fd, "r" if fd == 0 else "w", encoding="utf-8", closefd=False))  # noqa: SIM115
    for stream in (sys.stdout, sys.stderr):
        if not writes_unicode(stream) and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    for fd, name in ((1, "stdout"), (2, "stderr")):
        try:
            on_terminal = os.isatty(fd)
        except OSError:
            on_terminal = False
        stream = getattr(sys, name)
        if on_terminal and not isinstance(stream, _TerminalText):
            setattr(sys, name, _TerminalText(stream))
