"""Slow things booted in a background thread right after collection (a standalone cluster,
a wheel build), so that they are ready by the time the tests that need them run.

``tests/conftest.py`` calls :func:`prestart` for what the selected tests use
(``MVTABLE_TEST_PRESTART=0`` turns that off); a fixture then calls :func:`take`, which
waits for the background start or starts in the foreground if nothing was prestarted.
Whatever was started is stopped by its fixture, or by :func:`stop_all` at session end."""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

# name -> (future of the started thing, how to stop it)
_STARTED: dict[str, tuple[concurrent.futures.Future[Any], Callable[[Any], None]]] = {}
_LOCK = threading.Lock()


def enabled() -> bool:
    return os.environ.get("MVTABLE_TEST_PRESTART", "1") != "0"


def prestart(name: str, start: Callable[[], T], stop: Callable[[T], None]) -> None:
    """Run ``start()`` in a daemon thread unless ``name`` was prestarted already."""
    with _LOCK:
        if name in _STARTED or not enabled():
            return
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        _STARTED[name] = (future, stop)

    def boot() -> None:
        try:
            future.set_result(start())
        except BaseException as exc:  # handed to the fixture
            future.set_exception(exc)

    threading.Thread(target=boot, name=f"prestart-{name}", daemon=True).start()


def take(name: str, start: Callable[[], T]) -> T:
    """The prestarted ``name`` (waiting for it), else ``start()`` now.  The caller owns
    it from here on and must stop it."""
    with _LOCK:
        entry = _STARTED.pop(name, None)
    if entry is None:
        return start()
    result: T = entry[0].result()
    return result


def stop_all() -> None:
    """Stop everything prestarted that no fixture took (waits for a boot in progress)."""
    with _LOCK:
        entries = list(_STARTED.values())
        _STARTED.clear()
    for future, stop in entries:
        with contextlib.suppress(BaseException):
            stop(future.result(timeout=300))
