"""Partition specs as the log records them: which transform of which column groups rows.

The spec follows Iceberg's model (hidden partitioning): a field names its source column by
field id, a transform in Iceberg's text form (``identity``, ``year``, ``month``, ``day``,
``hour``, ``bucket[N]``, ``truncate[W]``) and a name. Specs are numbered; spec 0 has no
fields and means unpartitioned, which is what every table created before partitions reads
as. Each segment records the spec it was written under and its partition tuple (one JSON
scalar per field, see ``check_partition_values``), so pruning never opens a file.

Pure: what the transforms compute lives in ``mvtable.connector.partitions``; this module only
validates the shape of what the log holds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "FIRST_FIELD_ID",
    "UNPARTITIONED",
    "PartitionField",
    "PartitionSpec",
    "PartitionValue",
    "check_partition_values",
    "partition_problem",
]

FIRST_FIELD_ID = 1000  # Iceberg numbers partition fields from 1000, apart from column ids
PartitionValue = str | int | float | bool | None
_TRANSFORM_RE = re.compile(r"^(identity|year|month|day|hour|bucket\[[1-9][0-9]*\]|truncate\[[1-9][0-9]*\])$")


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PartitionField(_Model):
    """One field of a spec: ``transform`` applied to the column whose field id is ``source_id``."""

    source_id: int = Field(ge=0)
    field_id: int = Field(ge=FIRST_FIELD_ID)
    name: str = Field(min_length=1, max_length=1000)
    transform: str

    @field_validator("transform")
    @classmethod
    def _known_transform(cls, v: str) -> str:
        if not _TRANSFORM_RE.match(v):
            raise ValueError(f"unknown partition transform {v!r}")
        return v


class PartitionSpec(_Model):
    """A numbered list of partition fields; spec 0 with no fields is the unpartitioned table."""

    spec_id: int = Field(ge=0)
    fields: tuple[PartitionField, ...] = ()

    @model_validator(mode="after")
    def _distinct(self) -> PartitionSpec:
        names = [f.name for f in self.fields]
        if len(set(names)) != len(names):
            raise ValueError(f"partition spec {self.spec_id} names a field twice: {names}")
        ids = [f.field_id for f in self.fields]
        if len(set(ids)) != len(ids):
            raise ValueError(f"partition spec {self.spec_id} uses a field id twice: {ids}")
        return self

    @property
    def is_unpartitioned(self) -> bool:
        return not self.fields


UNPARTITIONED = PartitionSpec(spec_id=0)


def check_partition_values(values: Any) -> tuple[PartitionValue, ...]:
    """``values`` as a tuple of JSON scalars, or a ValueError saying which is not one.

    Strict on purpose: a bool is not an int here (both are JSON scalars, kept apart), and a
    list or object is never a partition value."""
    if not isinstance(values, (list, tuple)):
        raise ValueError(f"a partition is a list of values, not {type(values).__name__}")
    for i, v in enumerate(values):
        if v is not None and type(v) not in (str, int, float, bool):
            raise ValueError(f"partition value {i} is a {type(v).__name__}, not a JSON scalar")
    return tuple(values)


def partition_problem(
    specs: Mapping[int, PartitionSpec], spec_id: int | None, partition: tuple[PartitionValue, ...] | None
) -> str | None:
    """Why a segment's ``(spec_id, partition)`` does not fit the table's ``specs``, or None.

    Both absent: an unpartitioned segment (spec 0). A spec id without a partition is the
    empty tuple, which fits only a spec with no fields."""
    if spec_id is None:
        return None if not partition else "a segment has partition values but no spec id"
    spec = specs.get(spec_id) if specs else (UNPARTITIONED if spec_id == 0 else None)
    if spec is None:
        return f"partition spec {spec_id} does not exist"
    n = len(partition) if partition is not None else 0
    if n != len(spec.fields):
        return f"a partition of spec {spec_id} has {len(spec.fields)} values, not {n}"
    return None
