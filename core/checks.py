"""One check per kind of value a caller hands mvtable: a flag, a count, a version, seconds, column names.

Python is forgiving where a table format must not be: ``dry_run="no"`` is truthy and
would delete files, ``1.5`` would be truncated to a one-byte size, ``"id"`` iterates as
the columns ``i`` and ``d``. Each check returns the value in its canonical type (a numpy
integer becomes an ``int``) or raises an ``InvalidOptionError`` that names the argument,
says what was given and what is expected. Like ``errors``, this module imports nothing
else of mvtable, so every package may use it.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable

from .errors import InvalidOptionError

__all__ = ["column_names", "count", "epoch_ms", "flag", "seconds", "version"]


def flag(value: object, *, name: str) -> bool:
    """A real ``bool``: a string such as ``"no"`` or a number would silently mean ``True``.

    Raises:
        InvalidOptionError: ``value`` is not ``True`` or ``False``."""
    if not isinstance(value, bool):
        raise InvalidOptionError(f"{name} must be True or False, not {value!r}")
    return value


def count(value: object, *, name: str, minimum: int = 1) -> int:
    """An integer (numpy integers too) no smaller than ``minimum``.

    Booleans and floats are refused rather than rounded.

    Raises:
        InvalidOptionError: ``value`` is not an integer, or is below ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidOptionError(f"{name} must be an integer >= {minimum}, not {value!r}")
    number = int(value)
    if number < minimum:
        raise InvalidOptionError(f"{name} must be an integer >= {minimum}, not {number}")
    return number


def version(value: object, *, name: str = "version") -> int:
    """A version number: an integer >= 0 (numpy integers too, never a bool or a float).

    Raises:
        InvalidOptionError: ``value`` is not such an integer."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < 0:
        raise InvalidOptionError(f"{name} must be a version number (an integer >= 0), not {value!r}")
    return int(value)


def seconds(value: object, *, name: str, error: type[InvalidOptionError] = InvalidOptionError) -> float:
    """A finite, non-negative number of seconds.

    Strings are refused (``"5"`` is not a duration here), and so are NaN, which compares
    false with every limit and would skip them, and infinity, which overflows the clock
    arithmetic. ``error`` lets the settings parser raise its own subclass.

    Raises:
        InvalidOptionError: ``value`` is not such a number (as ``error``, a subclass, when given)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise error(f"{name} must be a number of seconds, not {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise error(f"{name} must be a finite number of seconds, not {value!r}")
    if number < 0:
        raise error(f"{name} cannot be negative ({value!r})")
    return number


def epoch_ms(value: object, *, name: str = "now_ms") -> int | None:
    """``None`` (the clock) or a time in epoch milliseconds: a finite number >= 0, as an ``int``.

    NaN would compare false with every cutoff (nothing expires, or everything does,
    depending on the comparison), infinity overflows, and a string or a ``datetime`` is
    not a number of milliseconds.

    Raises:
        InvalidOptionError: ``value`` is neither ``None`` nor such a number."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidOptionError(f"{name} must be a time in epoch milliseconds (e.g. int(time.time() * 1000)), not {value!r}")
    number = float(value) if not isinstance(value, numbers.Integral) else int(value)
    if not math.isfinite(number) or number < 0:
        raise InvalidOptionError(f"{name} must be a finite time in epoch milliseconds (>= 0), not {value!r}")
    return int(number)


def column_names(value: Iterable[str] | None, *, name: str = "columns") -> list[str] | None:
    """``None`` (every column) or a list of names.

    A bare string is refused: iterating it would ask for one column per letter.

    Raises:
        InvalidOptionError: ``value`` is a string, not iterable, or holds a non-string."""
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise InvalidOptionError(f"{name} must be a list of names, e.g. [{value!r}], not {type(value).__name__} {value!r}")
    names = list(value)
    bad = [n for n in names if not isinstance(n, str)]
    if bad:
        raise InvalidOptionError(f"{name} must be a list of names (strings), not one holding {bad[0]!r}")
    return names
