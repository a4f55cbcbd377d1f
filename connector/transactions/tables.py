"""How a transaction's calls name a table: a ``Table`` (anything with ``uri`` and ``storage_options``) or a URI."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from mvtable.errors import InvalidOptionError

__all__ = ["TableRef", "resolve"]


@runtime_checkable
class TableRef(Protocol):
    """What a transaction needs of a ``Table``: where it is and how to reach it."""

    uri: str
    storage_options: dict[str, Any]


def resolve(table: TableRef | str, storage_options: Mapping[str, Any] | None) -> tuple[str, dict[str, Any]]:
    """(URI, storage options) of a ``Table`` or of a URI given with ``storage_options``.

    Raises:
        InvalidOptionError: ``table`` is neither."""
    if isinstance(table, str):
        if not table:
            raise InvalidOptionError("a table URI cannot be empty")
        return table, dict(storage_options or {})
    # TableRef's own check, without a runtime protocol's isinstance (slow enough to show in a consistent read)
    if hasattr(table, "storage_options") and isinstance(getattr(table, "uri", None), str):
        return table.uri, dict(table.storage_options)
    raise InvalidOptionError(f"pass a table as a Table object or a URI, not {type(table).__name__}")
