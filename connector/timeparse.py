"""Parsing the timestamps users write (``timestampAsOf``, ``startingTimestamp``)."""

from __future__ import annotations

import datetime as dt
import math
import numbers
from typing import Any

from mvtable.errors import InvalidOptionError

_UTC = dt.timezone.utc
# The instants a timestamp may name: those a datetime can hold (years 1 to 9999). A number
# past them is a typo (digits too many, seconds given as microseconds); read as epoch
# milliseconds it would silently select the newest version.
_MIN_MS = int(dt.datetime(1, 1, 1, tzinfo=_UTC).timestamp() * 1000)
_MAX_MS = int(dt.datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=_UTC).timestamp() * 1000)


def parse_timestamp_ms(value: Any, *, option: str = "timestampAsOf") -> int:
    """Milliseconds since the epoch.

    Accepts a ``datetime`` (naive = UTC), an ISO-8601 string (``2026-11-22 10:00:00``,
    ``2026-11-22T10:00:00+01:00``; naive = UTC), a date, or an integer / digit string of epoch
    milliseconds within years 1 to 9999. ``option`` is the name the user gave the value, for the
    error.

    Raises:
        InvalidOptionError: ``value`` is no timestamp, or outside years 1 to 9999."""
    ms = _to_ms(value, option)
    if not _MIN_MS <= ms <= _MAX_MS:
        raise InvalidOptionError(
            f"{option}: {value!r} is outside years 1 to 9999 as epoch milliseconds; "
            "give epoch milliseconds (13 digits today) or a date and time such as '2026-11-22 10:00:00'"
        )
    return ms


def _to_ms(value: Any, option: str) -> int:
    if isinstance(value, bool):
        raise InvalidOptionError(f"{option}: {value!r} is not a timestamp")
    if isinstance(value, numbers.Integral):  # numpy integers too
        return int(value)
    if isinstance(value, numbers.Real):
        if not math.isfinite(float(value)):  # NaN and infinity name no instant
            raise InvalidOptionError(f"{option}: {value!r} is not a timestamp; give epoch milliseconds or a date and time")
        return int(float(value))
    if isinstance(value, dt.datetime):
        ts = value if value.tzinfo else value.replace(tzinfo=_UTC)
        return int(ts.timestamp() * 1000)
    if isinstance(value, dt.date):
        return _to_ms(dt.datetime(value.year, value.month, value.day), option)
    if isinstance(value, str):
        text = value.strip()
        if text.isdigit() and text.isascii():
            return int(text)
        try:
            return _to_ms(dt.datetime.fromisoformat(text.replace("Z", "+00:00")), option)
        except ValueError:
            pass
    raise InvalidOptionError(
        f"{option}: cannot read {value!r} as a timestamp; use e.g. '2026-11-22 10:00:00' (UTC) or epoch milliseconds"
    )
