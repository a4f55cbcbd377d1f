"""Partition specs as the log records them (Iceberg's ``PartitionSpec``), pure data.

A spec is a list of fields, each a transform of one column named by its field id, so a
renamed column keeps partitioning the table. Specs are never changed, only added: a table
whose partitioning evolves keeps every old spec, and each segment names the spec its
partition values follow. Spec 0 with no field is the unpartitioned table, which is what
every table created before partitions reads as.

Each segment records its partition tuple: one JSON scalar per spec field
(``check_partition_values``), so pruning never opens a file. What the transforms compute
lives in ``mvtable.connector.partitions``; this module only validates the shape of what
the log holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "FIRST_PARTITION_FIELD_ID",
    "UNPARTITIONED",
    "PartitionField",
    "PartitionSpec",
    "PartitionValue",
    "check_partition_values",
    "partition_problem",
]

FIRST_PARTITION_FIELD_ID = 1000  # Iceberg's: partition field ids live apart from column ids
PartitionValue = str | int | float | bool | None


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PartitionField(_Model):
    """One field of a spec: ``transform`` (Iceberg's text form, ``day``, ``bucket[16]``) of column ``source_id``."""

    source_id: int = Field(ge=0)
    field_id: int = Field(ge=FIRST_PARTITION_FIELD_ID)
    name: Annotated[str, Field(min_length=1, max_length=1000)]
    transform: Annotated[str, Field(min_length=1, max_length=64)]


class PartitionSpec(_Model):
    spec_id: int = Field(ge=0)
    fields: tuple[PartitionField, ...] = ()

    @model_validator(mode="after")
    def _distinct(self) -> PartitionSpec:
        names = [f.name for f in self.fields]
        if len(set(names)) != len(names):
            raise ValueError("a partition spec names a field twice")
        if len({f.field_id for f in self.fields}) != len(self.fields):
            raise ValueError("a partition spec repeats a field id")
        return self

    @property
    def partitioned(self) -> bool:
        return bool(self.fields)


UNPARTITIONED = PartitionSpec(spec_id=0)


def check_partition_values(values: Any) -> tuple[PartitionValue, ...]:
    """``values`` as a tuple of JSON scalars, or a ValueError saying which is not one.

    Strict on purpose: a bool stays a bool (both are JSON scalars, kept apart from ints), and
    a list or object is never a partition value."""
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
    spec = specs.get(spec_id)
    if spec is None:
        return f"partition spec {spec_id} does not exist"
    n = len(partition) if partition is not None else 0
    if n != len(spec.fields):
        return f"a partition of spec {spec_id} has {len(spec.fields)} values, not {n}"
    return None
