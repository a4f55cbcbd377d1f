"""Parsing the ``timestampAsOf`` values users write."""

from __future__ import annotations

import datetime as dt
import math
import numbers
from typing import Any

from mvtable.errors import InvalidOptionError


def parse_timestamp_ms(value: Any) -> int:
    """Milliseconds since the epoch. Accepts a ``datetime`` (naive = UTC), an ISO-8601 string
    (``2026-11-22 10:00:00``, ``2026-11-22T10:00:00+01:00``; naive = UTC), a date, or an
    integer / digit string of epoch milliseconds."""
    if isinstance(value, bool):
        raise InvalidOptionError(f"timestampAsOf: {value!r} is not a timestamp")
    if isinstance(value, numbers.Integral):  # numpy integers too
        return int(value)
    if isinstance(value, numbers.Real):
        if not math.isfinite(float(value)):  # NaN and infinity name no instant
            raise InvalidOptionError(f"timestampAsOf: {value!r} is not a timestamp; give epoch milliseconds or a date and time")
        return int(float(value))
    if isinstance(value, dt.datetime):
        ts = value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
        return int(ts.timestamp() * 1000)
    if isinstance(value, dt.date):
        return parse_timestamp_ms(dt.datetime(value.year, value.month, value.day))
    if isinstance(value, str):
        text = value.strip()
        if text.isdigit():
            return int(text)
        try:
            return parse_timestamp_ms(dt.datetime.fromisoformat(text.replace("Z", "+00:00")))
        except ValueError:
            pass
    raise InvalidOptionError(
        f"timestampAsOf: cannot read {value!r} as a timestamp; use e.g. '2026-11-22 10:00:00' (UTC) or epoch milliseconds"
    )
