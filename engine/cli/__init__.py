"""The `memsift` command line.

`main` is the console script. A search is first offered to a running memsift (`resident.py`),
before anything heavy is imported; everything else (and any search it declines) runs in `main.py`.
"""

from __future__ import annotations

__all__ = ["main"]


def main() -> None:
    import os  # noqa: PLC0415
    import sys  # noqa: PLC0415

    # memsift uses no pydantic plugins; looking for them scans every installed package's entry
    # points (~15 ms of each cold call). Only this process and its children (a resident helper).
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "1")

    from .resident import try_resident  # noqa: PLC0415

    code = try_resident(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    import gc  # noqa: PLC0415

    # Importing makes only long-lived objects (modules, classes, pydantic schemas): no collection
    # pass is worth its time there, and frozen, they are skipped by the collections of the run and
    # of the interpreter's exit (together ~30 ms of a cold search).
    gc.disable()
    from .main import main as run  # noqa: PLC0415

    gc.freeze()
    gc.enable()
    run()
