"""The child side of ``test_crash.py``: one operation with a kill point armed.

It runs in a child forked from a ``multiprocessing`` fork server that imported mvtable and
pyarrow once, so a trial costs a fork instead of a fresh interpreter importing them (~1 s
of CPU each, 60 trials).  Module-level, so that the fork server can import it."""

from __future__ import annotations

import os
import sys


def run(script: str, uri: str, arg_json: str, point: str, stderr_path: str) -> None:
    """Arm ``point`` (``MVTABLE_FAULT``), send stderr to ``stderr_path`` and run ``script``
    with ``sys.argv = [name, uri, arg_json]``, as ``python -c script uri arg_json`` would."""
    os.environ["MVTABLE_FAULT"] = point
    sys.argv = ["crash-child", uri, arg_json]
    with open(stderr_path, "w") as err:
        os.dup2(err.fileno(), 2)
    exec(compile(script, "<crash child>", "exec"), {"__name__": "__main__"})
