"""Python children forked from a server that imported mvtable, pyarrow and s3fs once: what
the kill tests run instead of a fresh ``python -c`` each.

A fresh interpreter importing them costs far more CPU than the trial itself, and the kill
tests start one or two per trial; a child of the ``multiprocessing`` fork server costs a
fork. The child is a real process all the same: it runs its script as ``__main__``,
with its own ``sys.argv`` and kill point (``MVTABLE_FAULT``), and dies by its own SIGKILL
(its exit code is then ``-9``). The fork server is one per test process; the modules that
use it stop it when they end (``stop_fork_server``), or it lives until the process exits."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

PRELOAD = ["pyarrow", "pyarrow.compute", "mvtable.connector", "s3fs"]

_FORKS = multiprocessing.get_context("forkserver")
_FORKS.set_forkserver_preload(PRELOAD)


def context() -> Any:
    """The fork server's ``multiprocessing`` context (its preloads set)."""
    return _FORKS


def child_main(script: str, argv: Sequence[str], point: str, stderr_path: str) -> None:
    """Arm ``point`` (``MVTABLE_FAULT``), send stderr to ``stderr_path`` and run ``script``
    with ``sys.argv = [name, *argv]``, as ``python -c script *argv`` would."""
    os.environ["MVTABLE_FAULT"] = point
    sys.argv = ["forked-child", *argv]
    with open(stderr_path, "w") as err:
        os.dup2(err.fileno(), 2)
    exec(compile(script, "<forked child>", "exec"), {"__name__": "__main__"})


def run_forked(
    script: str, argv: Sequence[str] = (), *, point: str = "", timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a child forked from the server, ``point`` armed; returns its exit
    code (``-9``: killed at the point) and stderr. A child still running after ``timeout``
    is killed."""
    with tempfile.TemporaryDirectory(prefix="mvtable-forked-") as tmp:
        err = os.path.join(tmp, "stderr")
        proc = _FORKS.Process(target=child_main, args=(script, list(argv), point, err))
        proc.start()
        proc.join(timeout)
        if proc.is_alive():
            proc.kill()
            proc.join()
        stderr = open(err).read() if os.path.exists(err) else ""
    return subprocess.CompletedProcess(["forked-child", *argv], proc.exitcode, "", stderr)


def stop_fork_server() -> None:
    """Stop the fork server if it runs (``_stop`` is the standard library's own hook); the
    next child starts a new one."""
    from multiprocessing import forkserver

    stop = getattr(forkserver._forkserver, "_stop", None)
    if stop is not None:
        stop()
