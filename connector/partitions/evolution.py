"""Partition evolution: a new spec for new writes, old segments keep theirs (Iceberg's).

``update_partitioning(["day(ts)"])`` adds a spec and makes it the default in one
``UPDATE_PARTITIONING`` commit; nothing is rewritten. Every segment already written keeps
the spec it names, and pruning reads each segment through its own spec, so a filter prunes
old and new segments alike. Compaction may later rewrite old segments into the new grain
(``compaction``: Druid's compaction from ``HOUR`` to ``DAY`` segments); time travel and
rollback still see each version as it was, because specs are only ever added.

Field ids follow Iceberg: a field with the same column and transform as a field of an
earlier spec keeps that field's id, any other gets a new one above every id used before,
so an Iceberg export of the evolved table reads the same.
"""

from __future__ import annotations

from collections.abc import Sequence

from mvtable.errors import NothingToCommit, TableNotFoundError
from mvtable.lineage.actions import Action, MetadataAction
from mvtable.lineage.enums import Operation
from mvtable.lineage.log import CommitLog
from mvtable.lineage.partitioning import FIRST_PARTITION_FIELD_ID, PartitionField, PartitionSpec
from mvtable.lineage.snapshot import Snapshot

from ..results import PartitioningResult
from .spec import parse_partition_by, spec_columns

__all__ = ["evolved_spec", "update_partitioning"]


def evolved_spec(snapshot: Snapshot, partition_by: Sequence[str]) -> PartitionSpec:
    """The spec ``partition_by`` asks for, numbered after ``snapshot``'s specs, with Iceberg's field ids.

    An earlier spec with the same fields is returned as it is (going back to a grain reuses its spec).

    Raises:
        PartitionSpecError: a bad field (see ``parse_partition_by``)."""
    specs = snapshot.partition_specs
    parsed = parse_partition_by(partition_by, snapshot.table_schema, spec_id=0)
    for spec in specs.values():
        if _same_fields(spec.fields, parsed.fields):
            return spec
    known = {(f.source_id, f.transform): f.field_id for s in specs.values() for f in s.fields}
    next_id = max((f.field_id for s in specs.values() for f in s.fields), default=FIRST_PARTITION_FIELD_ID - 1) + 1
    fields = []
    for f in parsed.fields:
        field_id = known.get((f.source_id, f.transform))
        if field_id is None:
            field_id, next_id = next_id, next_id + 1
        fields.append(PartitionField(source_id=f.source_id, field_id=field_id, name=f.name, transform=f.transform))
    return PartitionSpec(spec_id=max(specs, default=0) + 1, fields=tuple(fields))


def _same_fields(a: Sequence[PartitionField], b: Sequence[PartitionField]) -> bool:
    return [(f.source_id, f.transform) for f in a] == [(f.source_id, f.transform) for f in b]


def update_partitioning(commit_log: CommitLog, snapshot: Snapshot, partition_by: Sequence[str]) -> PartitioningResult:
    """Make ``partition_by`` the spec of new writes, in one commit planned again on the newest snapshot.

    Raises:
        TableNotFoundError: there is no table yet (a spec is set at create then).
        PartitionSpecError: a bad field; nothing is committed.
        CommitConflictError: every attempt lost its race.
        CommitStateUnknownError: the store never said whether the commit landed."""
    if not snapshot.exists:
        raise TableNotFoundError(f"no table at {commit_log.io.uri}: create it with partition_by=… instead")
    wanted = evolved_spec(snapshot, partition_by)  # checked once before committing: a bad spec commits nothing
    chosen: list[PartitionSpec] = [wanted]

    def build(current: Snapshot) -> list[Action]:
        spec = chosen[0] = evolved_spec(current, partition_by)
        if spec.spec_id == current.default_spec_id:
            raise NothingToCommit(f"new writes already use partition spec {spec.spec_id}")
        specs = {**current.partition_specs, spec.spec_id: spec}
        return [
            MetadataAction(
                table_id=current.table_id,
                table_schema=current.table_schema,
                properties=dict(current.properties),
                partition_specs=tuple(specs[i] for i in sorted(specs)),
                default_spec_id=spec.spec_id,
            )
        ]

    try:
        result = commit_log.commit(
            read=snapshot,
            operation=Operation.UPDATE_PARTITIONING,
            parameters=lambda: {"partition_by": list(partition_by), "spec_id": chosen[0].spec_id},
            build=build,
        )
    except NothingToCommit:
        return PartitioningResult(spec_id=chosen[0].spec_id, fields=_texts(snapshot, chosen[0]), version=None, changed=False)
    return PartitioningResult(
        spec_id=chosen[0].spec_id, fields=_texts(snapshot, chosen[0]), version=result.commit.version, changed=True
    )


def _texts(snapshot: Snapshot, spec: PartitionSpec) -> tuple[str, ...]:
    out = []
    for f, column, transform in spec_columns(spec, snapshot.table_schema):
        name = column or f"<dropped column {f.source_id}>"
        if transform.name == "identity":
            out.append(name)
        elif transform.param is not None:
            out.append(f"{transform.name}({transform.param}, {name})")
        else:
            out.append(f"{transform.name}({name})")
    return tuple(out)
