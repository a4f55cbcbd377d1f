"""An ordered, bounded thread map for the Python ``Table`` API.

Reading a segment is decode (pyarrow, GIL released) plus a deletion filter (also
pyarrow); one segment at a time leaves a core idle while the other filters, so
``Table.scan`` and ``Table.delete`` read several segments at once. Spark never uses this:
it already runs one task per core.

Results come back in input order, and at most ``workers + ahead`` items are in flight, so
a caller that streams (``to_batches``) holds a bounded number of decoded segments.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

__all__ = ["default_workers", "ordered_map"]

T = TypeVar("T")
R = TypeVar("R")


def default_workers() -> int:
    """One thread per core this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def ordered_map(fn: Callable[[T], R], items: Iterable[T], *, workers: int, ahead: int = 1) -> Iterator[R]:
    """``map(fn, items)`` on ``workers`` threads, in order.

    ``workers <= 1`` runs inline (no thread at all). Stopping the iteration early cancels what has
    not started; an exception in ``fn`` is raised when its item's turn comes."""
    if workers <= 1:
        yield from map(fn, items)
        return
    it = iter(items)
    pending: deque[Future[R]] = deque()
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mvtable-read")
    try:
        for item in it:
            pending.append(pool.submit(fn, item))
            if len(pending) >= workers + ahead:
                break
        while pending:
            result = pending.popleft().result()
            for item in it:  # refill one slot before handing back a result
                pending.append(pool.submit(fn, item))
                break
            yield result
    finally:
        for f in pending:
            f.cancel()
        pool.shutdown(wait=True)
