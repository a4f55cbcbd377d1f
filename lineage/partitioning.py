"""Partition specs as the log records them (Iceberg's ``PartitionSpec``), pure data.

A spec is a list of fields, each a transform of one column named by its field id, so a
renamed column keeps partitioning the table. Specs are never changed, only added: a table
whose partitioning evolves keeps every old spec, and each segment names the spec its
partition values follow. Spec 0 with no field is the unpartitioned table.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["FIRST_PARTITION_FIELD_ID", "UNPARTITIONED", "PartitionField", "PartitionSpec"]

FIRST_PARTITION_FIELD_ID = 1000  # Iceberg's: partition field ids live apart from column ids


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
