"""Stopping a streaming query between micro-batches, so that no write is interrupted.

``query.stop()`` interrupts the micro-batch in flight. Nothing of it is committed (it runs
again after a restart), but Spark logs the interrupted write as
``ERROR WriteToDataSourceV2Exec: … is aborting`` (often followed by "failed to abort"), and
the files its finished tasks wrote stay until the query's next commit. Spark offers no
"stop after this batch" call, so ``stop_stream`` waits for a moment when no trigger is
running — between two micro-batches, where the query only waits for its next trigger —
and stops it there: nothing is in flight, nothing is aborted, no file is left.

A query whose batches run back to back with no gap (a busy ``trigger(processingTime="0
seconds")``) may offer no such moment: at ``timeout`` it is stopped as ``query.stop()``
would, and ``stop_stream`` says so by returning ``False``.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from mvtable import checks

logger = logging.getLogger(__name__)


def stop_stream(query: Any, *, timeout: float = 300.0, poll_interval: float = 0.02) -> bool:
    """Stop ``query`` (a ``StreamingQuery``, classic or Spark Connect) between micro-batches.

    Waits up to ``timeout`` seconds for no trigger to be active, then calls
    ``query.stop()``. Returns ``True`` when the query stopped between batches (or had
    already ended), ``False`` when the timeout ran out and the batch in flight was
    interrupted, as ``query.stop()`` interrupts it.

    Raises:
        InvalidOptionError: ``timeout`` or ``poll_interval`` is negative or not a number.
    """
    timeout = checks.seconds(timeout, name="timeout")
    poll_interval = checks.seconds(poll_interval, name="poll_interval")
    deadline = time.monotonic() + timeout
    while query.isActive:
        if not query.status["isTriggerActive"]:
            query.stop()
            return True
        if time.monotonic() >= deadline:
            logger.warning(
                "stop_stream: query %s had a micro-batch running for all of %.0f s; stopping it mid-batch "
                "(the batch runs again when the query restarts)",
                query.id,
                timeout,
            )
            query.stop()
            return False
        time.sleep(poll_interval)
    return True
