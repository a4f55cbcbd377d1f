"""The type changes a column may make without rewriting data: widenings only.

Iceberg's promotions (int → long, float → double, a decimal's precision up at the same scale)
plus Delta's byte/short → int and date → timestamp. Every old value has exactly one value of the
new type, so old files are read and cast (``projection``); anything else would change or lose
values, and is a ``SchemaEvolutionError``. Types are the stored (Spark JSON) names.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["can_widen", "widening_rule"]

_INTEGERS = ("byte", "short", "integer", "long")
_DECIMAL = re.compile(r"^decimal\((\d+),\s*(-?\d+)\)$")
WIDENING_RULE = (
    "only widenings are allowed: byte → short → integer → long, float → double, decimal precision up at the same "
    "scale, date → timestamp"
)


def widening_rule() -> str:
    """The rule, as error messages state it."""
    return WIDENING_RULE


def can_widen(old: Any, new: Any) -> bool:
    """Whether a column of stored type ``old`` may become ``new`` (the same type counts)."""
    if old == new:
        return True
    if not isinstance(old, str) or not isinstance(new, str):
        return False  # nested types change through their fields, never as a whole
    if old in _INTEGERS and new in _INTEGERS:
        return _INTEGERS.index(old) < _INTEGERS.index(new)
    if (old, new) in (("float", "double"), ("date", "timestamp"), ("date", "timestamp_ntz")):
        return True
    a, b = _DECIMAL.match(old), _DECIMAL.match(new)
    if a and b:
        return int(a.group(2)) == int(b.group(2)) and int(b.group(1)) >= int(a.group(1))
    return False
