"""The CLI's last resort: an exception no part of memsift expected (a bug of memsift's, or of a
library it calls) is told in one line that says what failed and where its details went, never as
a traceback on a user's terminal. The traceback is kept in a private file of the state folder
(the newest `KEEP` of them), secrets masked, and printed too with -v.
"""

from __future__ import annotations

import errno
import os
import platform
import sys
import time
import traceback
from pathlib import Path

__all__ = ["report_crash", "write_refused"]

KEEP = 20  # crash reports kept; older ones are removed


_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}  # the disk, a quota, a file's size limit: the machine's


def report_crash(exc: BaseException) -> int:
    """Say that memsift failed and where the details are; the exit code (1). A write the machine
    refused (a full disk, `> /dev/full`, a terminal gone) is no bug: said in one line, no report."""
    from ..logging import is_verbose  # noqa: PLC0415
    from ..secrets import redact  # noqa: PLC0415
    from ..text import shorten  # noqa: PLC0415
    from .output import EXIT_CODES  # noqa: PLC0415

    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:  # raised in a task group (watch)
        exc = exc.exceptions[0]
    if isinstance(exc, OSError):
        output = _writing_output(exc)
        if exc.errno in _FULL or (exc.errno == errno.EIO and output):  # EIO on the output: a terminal gone
            return write_refused(exc, output=output)

    details = redact("".join(traceback.format_exception(exc)))
    kept = _keep(details)
    what = redact(shorten(f"{type(exc).__name__}: {exc}".strip().rstrip(":"), 240))
    if is_verbose():
        sys.stderr.write(details)
    where = f"the details are in {kept}" if kept else "run it again with -v to see the details"
    sys.stderr.write(f"memsift: internal error ({what}). This is a bug in memsift, not a problem with your notes or "
                     f"settings: {where}; please report it.\n")
    return EXIT_CODES["error"]


def write_refused(exc: OSError, *, output: bool) -> int:
    """A write the machine refused, in one line (`output`: memsift's own output); the exit code (1)."""
    full = exc.errno in _FULL
    _say(f"memsift: cannot write {'the output' if output else 'a file'}: {exc.strerror or exc}"
         + (" (the disk or a quota is full: free some space, or write the output elsewhere)" if full else ""))
    if output:
        from .streams import discard_output  # noqa: PLC0415

        discard_output(sys.stdout)
    return 1  # EXIT_CODES["error"]


def _writing_output(exc: BaseException) -> bool:
    """The exception came from writing memsift's output (click's echo, or the terminal's stream)."""
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last, tb = tb, tb.tb_next
    if last is None:
        return False
    where = last.tb_frame.f_code.co_filename.replace(os.sep, "/")
    return where.endswith(("click/utils.py", "engine/cli/streams.py"))


def _say(line: str) -> None:
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except OSError:  # stderr on the same full disk
        pass


def _keep(details: str) -> Path | None:
    """The report written to `<state folder>/crashes/`, or None where it cannot be written."""
    from ..files.fingerprint import memsift_version  # noqa: PLC0415
    from ..private_dirs import default_state_dir, make_private_dir  # noqa: PLC0415
    from ..secrets import redact  # noqa: PLC0415

    try:
        folder = default_state_dir(os.environ) / "crashes"
        make_private_dir(folder)
        path = folder / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.txt"
        head = (f"memsift {memsift_version()} · Python {platform.python_version()} · {platform.platform()}\n"
                f"command: {redact(' '.join(sys.argv[1:]))}\n\n")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as fh:
            fh.write(head + details)
        for old in sorted(folder.glob("*.txt"))[:-KEEP]:
            old.unlink(missing_ok=True)
        return path
    except Exception:  # noqa: BLE001  (a report that cannot be kept is printed with -v instead)
        return None
