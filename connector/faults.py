"""Fault injection for crash tests: ``MVTABLE_FAULT=<point>[,<point>…]`` makes the process
SIGKILL itself when it reaches a named step, so tests can prove that a kill at any step
leaves the table consistent. Unset (always, in production) it costs one dict lookup."""

from __future__ import annotations

import os
import signal

FAULT_ENV = "MVTABLE_FAULT"


def armed() -> set[str]:
    return {p.strip() for p in os.environ.get(FAULT_ENV, "").split(",") if p.strip()}


def point(name: str) -> None:
    """Die here if ``name`` is armed."""
    if name in armed():
        os.kill(os.getpid(), signal.SIGKILL)
