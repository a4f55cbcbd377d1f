"""A gang of long-lived Python processes (spawn context) that run one function together,
lined up by a shared barrier: how the tests race real OS processes against one store.

Starting Python processes that import s3fs and pyarrow costs seconds on a small machine;
a gang pays that once per module and then runs many races.  The functions it runs must be
importable by the children (module-level functions in an importable module)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

_GANG_BARRIER: Any = None  # this child's multiprocessing.Barrier, set by the initializer


def _gang_init(barrier: Any) -> None:
    global _GANG_BARRIER
    _GANG_BARRIER = barrier
    import mvtable.lineage.log  # noqa: F401  (pay the imports once, not inside a race)

    try:
        import s3fs  # noqa: F401
    except ImportError:
        pass


def _gang_call(fn: Callable[..., Any], index: int, args: tuple[Any, ...]) -> Any:
    barrier = _GANG_BARRIER
    try:
        return fn(index, barrier, *args)
    except BaseException:
        barrier.abort()  # release the others at once instead of letting them time out
        raise


def _gang_hello(index: int, barrier: Any) -> int:
    barrier.wait(timeout=120)
    return os.getpid()


class ProcessGang:
    """``n`` long-lived OS processes (spawn context) that run one function together, each
    with its index and a shared ``multiprocessing.Barrier`` to line up their races.

    Starting Python processes that import s3fs and pyarrow costs seconds on a small machine;
    a gang pays that once and then runs many races."""

    def __init__(self, n: int) -> None:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        ctx = mp.get_context("spawn")
        self.n = n
        self.barrier = ctx.Barrier(n)
        self.pool = ProcessPoolExecutor(max_workers=n, mp_context=ctx, initializer=_gang_init, initargs=(self.barrier,))
        try:
            pids = self.run(_gang_hello, timeout=180)
        except BaseException:
            self.close()
            raise
        if len(set(pids)) != n:
            self.close()
            raise RuntimeError(f"expected {n} distinct processes, got pids {pids}")
        self.pids = pids

    def run(self, fn: Callable, *args: Any, timeout: float = 90.0) -> list:
        """``[fn(i, barrier, *args) for i in range(n)]``, each call in its own process, all
        at the same time. Re-raises the first failure."""
        from concurrent.futures import wait

        self.barrier.reset()
        futures = [self.pool.submit(_gang_call, fn, i, args) for i in range(self.n)]
        done, pending = wait(futures, timeout=timeout)
        if pending:
            self.close()
            raise TimeoutError(f"{len(pending)} of {self.n} processes did not finish {fn.__name__} within {timeout}s")
        errors = [e for e in (f.exception() for f in futures) if e is not None]
        # a broken barrier is the echo of the real failure elsewhere
        errors.sort(key=lambda e: type(e).__name__ == "BrokenBarrierError")
        if errors:
            raise errors[0]
        return [f.result() for f in futures]

    def close(self) -> None:
        procs = list((getattr(self.pool, "_processes", None) or {}).values())
        self.pool.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + 3  # idle workers: no need to wait long
        for p in procs:
            p.join(timeout=max(0.0, deadline - time.monotonic()))
        for p in procs:
            if p.is_alive():
                p.terminate()
                p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join()
