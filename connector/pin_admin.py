"""Looking at a table's reader pins and releasing those of readers that are gone (``mvtable pins``, ``mvtable inspect``).

A pin keeps its version's files from GC and vacuum until it is released or expires; a
reader that died (a killed job, a Spark DataFrame nobody queries any more) leaves its pin
for up to ``pinTtl`` (``pinIdleTtl`` after the last query of a DataFrame on Spark's Parquet scan). Releasing such a pin by hand is safe for the table: only a reader that
still reads that version could fail (its files may then be collected), which is why a pin is
released by naming it or its owner, never in bulk."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

from mvtable.errors import PinNotFoundError
from mvtable.storage import FileIO
from mvtable.visibility import pins

from .holds import format_duration
from .pinning import pin_scan


def live_pins(io: FileIO, *, now_ms: int | None = None) -> list[pins.Pin]:
    """The pins GC and vacuum honour now, oldest version first."""
    return sorted(pin_scan(io, now_ms=now_ms).live, key=lambda p: (p.version, p.created_ms, p.id))


def pin_record(pin: pins.Pin, *, now_ms: int) -> dict[str, Any]:
    """One pin for people and JSON.

    Id, owner, version, created, expires (ISO-8601 UTC), ``expires_in`` (human units) and whether
    its file could be read."""
    return {
        "id": pin.id,
        "owner": pin.owner,
        "version": pin.version,
        "created": _iso(pin.created_ms),
        "expires": _iso(pin.expires_ms),
        "expires_in": format_duration((pin.expires_ms - now_ms) / 1000),
        "readable": pin.readable,
    }


def release_pins(io: FileIO, which: str, *, now_ms: int | None = None) -> list[pins.Pin]:
    """Release the live pin whose id is ``which``, or else every live pin whose owner is ``which``; returns the released pins.

    Raises:
        PinNotFoundError: no live pin has that id or owner (the message lists the owners)."""
    live = live_pins(io, now_ms=now_ms)
    chosen = [p for p in live if p.id == which] or [p for p in live if p.owner == which]
    if not chosen:
        owners = sorted({p.owner for p in live})
        raise PinNotFoundError(
            f"no live pin has the id or owner {which!r}; "
            + (f"the owners of live pins are {owners}" if owners else "the table has no live pins")
        )
    for p in chosen:
        pins.release(io, p.id)
    return chosen


def _iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc).isoformat()


def now_ms() -> int:
    return int(time.time() * 1000)
