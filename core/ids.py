"""Identifiers stored in metadata: segment, table, lineage-entry and pin ids.

One pattern for all of them, checked wherever an id is parsed (commit files, checkpoints,
GC's light parser, pin names): ids become file names and log keys, so anything that could
be a path (``/``, ``..``) or break a listing (newlines) is refused."""

from __future__ import annotations

import datetime as dt
import re
import uuid
from typing import Annotated

from pydantic import Field

ID_PATTERN = r"[A-Za-z0-9._-]{1,200}"
ID_RE = re.compile(ID_PATTERN)

Id = Annotated[str, Field(min_length=1, max_length=200, pattern=f"^{ID_PATTERN}$")]
"""A validated id, for pydantic models."""


def is_id(value: object) -> bool:
    return isinstance(value, str) and ID_RE.fullmatch(value) is not None


def new_entry_id(prefix: str = "push") -> str:
    """A lineage entry id that sorts by start time and says what it is: ``push-<UTC>-<hex>``."""
    return f"{prefix}-{dt.datetime.now(dt.timezone.utc):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"
