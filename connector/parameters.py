"""The types of the public API's parameters: write modes, timestamps, keys.

Named here once so that ``Table``'s signatures say what they take (a user's type checker
sees them through ``py.typed``) instead of ``Any`` or a bare ``str``."""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa

from mvtable.errors import InvalidOptionError

__all__ = ["Keys", "Timestamp", "WriteMode"]

#: An instant a read may name (``timestamp=``): a ``datetime`` or ``date`` (naive means UTC),
#: an ISO-8601 string such as ``"2026-11-22 10:00:00"``, or epoch milliseconds.
Timestamp: TypeAlias = dt.datetime | dt.date | str | int

#: The keys of a delete by key: a table or batch of the key columns, a dict of key column
#: to values, or (for a one-column key) the values themselves.
Keys: TypeAlias = pa.Table | pa.RecordBatch | Mapping[str, Sequence[Any]] | Sequence[Any] | pa.Array | np.ndarray


class WriteMode(str, enum.Enum):
    """How a write treats the rows already in the table.

    A ``str`` too, so ``"append"`` and ``WriteMode.APPEND`` are interchangeable wherever a mode is
    taken."""

    APPEND = "append"
    OVERWRITE = "overwrite"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, mode: WriteMode | str) -> WriteMode:
        """``mode`` as a ``WriteMode``; any case of the names is accepted.

        Raises:
            InvalidOptionError: ``mode`` names no write mode.
        """
        if isinstance(mode, WriteMode):
            return mode
        if isinstance(mode, str):
            try:
                return cls(mode.strip().lower())
            except ValueError:
                pass
        choices = ", ".join(repr(m.value) for m in cls)
        raise InvalidOptionError(f"unknown write mode {mode!r}; use one of {choices} (or mvtable.WriteMode)")
