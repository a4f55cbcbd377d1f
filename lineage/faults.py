"""Fault injection for crash tests: ``MVTABLE_FAULT=<point>[,<point>…]`` SIGKILLs the process at a named step.

Tests use it to prove that a kill at any step leaves the table consistent. Unset (always,
in production) it costs one environment lookup.

Points: ``commit.<OPERATION>.before_put`` / ``.after_put`` for every commit (APPEND,
OVERWRITE, PUSH_START, CONSISTENT_PUSH, DELETE, ROLLBACK, RESTORE, RETENTION, …),
``checkpoint.before_write`` / ``.after_write``, ``write.after_files`` (segments written,
nothing committed), ``delete.after_dv_files``, ``vacuum.after_retention_commit``,
``vacuum.after_data_batch``, ``compact.after_outputs`` (a batch's outputs written, not
committed), ``compact.after_batch`` (a batch committed, the next not started), and
``gc.after_batch:N`` (see connector.gc)."""

from __future__ import annotations

import os
import signal

FAULT_ENV = "MVTABLE_FAULT"


def armed() -> set[str]:
    return {p.strip() for p in os.environ.get(FAULT_ENV, "").split(",") if p.strip()}


def point(name: str) -> None:
    """Die here if ``name`` is armed."""
    if FAULT_ENV in os.environ and name in armed():
        os.kill(os.getpid(), signal.SIGKILL)
