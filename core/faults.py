"""Fault injection for crash tests: ``MVTABLE_FAULT=<point>[,<point>…]`` SIGKILLs the process at a named step.

Tests use it to prove that a kill at any step leaves the table consistent. Unset (always,
in production) it costs one environment lookup.

Points: ``commit.<OPERATION>.before_put`` / ``.after_put`` for every commit (APPEND,
OVERWRITE, PUSH_START, CONSISTENT_PUSH, DELETE, ROLLBACK, RESTORE, RETENTION, …),
``checkpoint.before_write`` / ``.after_write``, ``write.after_files`` (segments written,
nothing committed), ``delete.after_dv_files``, ``vacuum.after_retention_commit``,
``vacuum.after_data_batch``, ``compact.after_outputs`` (a batch's outputs written, not
committed), ``compact.after_batch`` (a batch committed, the next not started),
``upsert.after_files`` (an upsert's segments written, nothing committed),
``gc.after_batch:N`` (GC dies after its N-th delete batch: ``numbered``), and the steps of a
multi-table transaction: ``transaction.after_files`` (a call's files written),
``transaction.after_prepare.<i>`` (the i-th table prepared, counting from 1),
``transaction.after_decision``, ``transaction.after_finalize.<i>``,
``transaction.rollback.after_decision`` and ``transaction.rollback.after_revert.<i>`` (with
``commit.TXN_PREPARE`` / ``TXN_COMMIT`` / ``TXN_ABORT`` / ``TXN_ROLLBACK`` for their commits).

Every layer names its steps here (the shared core imports no layer), so the commit log and
the connector's writers, deletes, compaction, vacuum and GC arm their points the same way.

``run_at(point, action)`` runs ``action`` in this process when a point is reached instead
(tests run a vacuum there: at every step between a write's files and its commit)."""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager

FAULT_ENV = "MVTABLE_FAULT"

logger = logging.getLogger("mvtable.faults")
_actions: dict[str, list[Callable[[], None]]] = {}


def armed() -> set[str]:
    return {p.strip() for p in os.environ.get(FAULT_ENV, "").split(",") if p.strip()}


def point(name: str) -> None:
    """Run the actions registered for ``name``, then die here if ``name`` is armed."""
    if _actions:
        for action in list(_actions.get(name, ())):
            action()
    if FAULT_ENV in os.environ and name in armed():
        os.kill(os.getpid(), signal.SIGKILL)


def numbered(name: str) -> int | None:
    """The count armed as ``<name>:N`` (at least 1), or None when ``name`` is not armed.

    Raises:
        ValueError: ``N`` is not a number (a test set the variable wrongly).
    """
    for item in os.environ.get(FAULT_ENV, "").split(","):
        point_name, _, arg = item.strip().partition(":")
        if point_name == name:
            try:
                return max(1, int(arg))
            except ValueError:
                raise ValueError(f"{FAULT_ENV}: {name} needs a number, not {arg!r}") from None
    return None


def die(what: str) -> None:  # pragma: no cover - the process ends here
    """SIGKILL this process now (``what`` names it in the log first)."""
    logger.warning("%s: killing %s process %s", FAULT_ENV, what, os.getpid())
    kill = getattr(signal, "SIGKILL", None)
    if kill is not None:
        os.kill(os.getpid(), kill)
    os._exit(137)


@contextmanager
def run_at(name: str, action: Callable[[], None]) -> Iterator[None]:
    """Call ``action()`` whenever this process reaches point ``name`` inside the block."""
    _actions.setdefault(name, []).append(action)
    try:
        yield
    finally:
        _actions[name].remove(action)
        if not _actions[name]:
            del _actions[name]
