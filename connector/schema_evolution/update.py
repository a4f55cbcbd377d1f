"""``UpdateSchema``: the ``with t.update_schema() as u:`` builder — every change of a block in one commit, or none.

Modelled on pyiceberg's ``UpdateSchema``: changes are checked as they are made (a bad one raises
at once, naming the column and the rule), applied to a private copy of the schema, and committed
together when the block ends; an exception inside the block commits nothing. The commit is an
``UPDATE_SCHEMA`` operation carrying the new schema, its id and the highest field id; it is made
from the schema read when the block began, so a schema change that lands first makes it a
``ConcurrentSchemaChangeError`` (nothing is merged silently). It takes a commit log and the
snapshot it read, never a ``Table``.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

import pyarrow as pa

from mvtable.errors import InvalidOptionError
from mvtable.lineage.actions import MetadataAction
from mvtable.lineage.enums import Operation
from mvtable.lineage.log import CommitLog, CommitResult
from mvtable.lineage.snapshot import Snapshot

from .changes import EvolvingSchema
from .partition_sources import check_partition_sources

__all__ = ["UpdateSchema"]


def _type_json(t: Any, column: str) -> Any:
    from ..schema import type_to_json

    if not isinstance(t, pa.DataType):
        raise InvalidOptionError(f"column {column!r}: the type must be a pyarrow DataType such as pa.int64(), not {t!r}")
    return type_to_json(t, column=column)


class UpdateSchema:
    """Schema changes to commit together (``Table.update_schema()``).

    Use as a context manager (``with t.update_schema() as u: u.add_column("x", pa.int64())``), or
    call ``commit()``. Each method returns the builder, so calls chain."""

    def __init__(self, commit_log: CommitLog, snapshot: Snapshot) -> None:
        self.commit_log = commit_log
        self.read = snapshot
        self._schema = EvolvingSchema.of(
            snapshot.table_schema, last_field_id=snapshot.last_field_id, primary_key=snapshot.primary_key
        )
        self.result: CommitResult | None = None

    def add_column(self, name: str, type: pa.DataType, doc: str | None = None) -> UpdateSchema:
        """Add a nullable column (a dotted ``name`` adds a field to a struct); older rows read null.

        Raises:
            SchemaEvolutionError: the name is taken or reserved, or its parent is no struct."""
        self._schema.add_column(name, _type_json(type, name), doc=doc)
        return self

    def rename_column(self, old: str, new: str) -> UpdateSchema:
        """Rename a column or nested field (no data file changes); renaming a key column renames the key.

        Raises:
            SchemaEvolutionError: no such column, or ``new`` is taken or reserved."""
        self._schema.rename_column(old, new)
        return self

    def drop_column(self, name: str) -> UpdateSchema:
        """Drop a column or nested field; its values never come back, even under a column added with its name.

        Raises:
            SchemaEvolutionError: no such column, a key column, the last field of the table or a struct, or a
                column the current partition spec partitions by."""
        self._schema.drop_column(name)
        self._check_partitioning()
        return self

    def update_column(self, name: str, type: pa.DataType) -> UpdateSchema:
        """Widen a column's type (int8→16→32→64, float32→float64, decimal precision up, date→timestamp).

        Raises:
            SchemaEvolutionError: no such column, a key column, a narrowing or other change, or a column the
                current partition spec partitions by."""
        self._schema.update_column(name, _type_json(type, name))
        self._check_partitioning()
        return self

    def _check_partitioning(self) -> None:
        """Refuse at once what the commit would refuse (``partition_sources``), where the change is made."""
        read = self.read
        check_partition_sources(read.partition_specs, read.default_spec_id, read.table_schema, self._schema.doc)

    def make_optional(self, name: str) -> UpdateSchema:
        """Let a column hold nulls.

        Raises:
            SchemaEvolutionError: no such column, or a key column."""
        self._schema.make_optional(name)
        return self

    @property
    def changes(self) -> tuple[str, ...]:
        """What the block changed so far, in order (also recorded in the commit's parameters)."""
        return tuple(self._schema.changes)

    def commit(self) -> CommitResult | None:
        """Commit the changes in one ``UPDATE_SCHEMA`` commit; None when nothing changed.

        Raises:
            ConcurrentSchemaChangeError: another schema change landed since the block began.
            SchemaEvolutionError: a column the current partition spec partitions by is dropped or changes type
                (``partition_sources``)."""
        if self.result is not None or not self._schema.changes:
            return self.result
        evolved = self._schema
        read = self.read
        check_partition_sources(read.partition_specs, read.default_spec_id, read.table_schema, evolved.doc)

        def build(current: Snapshot) -> list[MetadataAction]:
            # the spec may have changed since the block began
            check_partition_sources(current.partition_specs, current.default_spec_id, current.table_schema, evolved.doc)
            return [
                MetadataAction(
                    table_id=current.table_id,
                    table_schema=evolved.doc,
                    properties=dict(current.properties),
                    primary_key=evolved.primary_key or None,
                    schema_id=current.schema_id + 1,
                    last_field_id=evolved.last_field_id,
                )
            ]

        self.result = self.commit_log.commit(
            read=read,
            operation=Operation.UPDATE_SCHEMA,
            build=build,
            parameters={"changes": list(evolved.changes), "schemaId": read.schema_id + 1},
        )
        return self.result

    def __enter__(self) -> UpdateSchema:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if exc_type is None:
            self.commit()
