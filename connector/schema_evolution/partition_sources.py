"""Schema changes the partition specs forbid: the columns a spec partitions by keep existing and keep their type.

The current (default) spec computes the partition of every row written from now on, so its
source columns cannot be dropped or change type (Iceberg refuses the same): the spec has to
change first (``Table.update_partitioning``). A rename is fine, as specs name columns by
field id. Older specs only describe segments already written, whose partition values were
computed from the column's type then: a widening keeps those values (an int is the same
int as a long, and buckets hash both as longs), except ``date`` → ``timestamp`` under
``identity`` (a date's value is its ISO text, a timestamp's its microseconds) or ``bucket``
(days and microseconds hash differently), which would make pruning misread them.

Pure functions of stored schemas and specs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mvtable.errors import SchemaEvolutionError
from mvtable.lineage.partitioning import PartitionSpec
from mvtable.lineage.schema_ids import field_id, with_ids

__all__ = ["check_partition_sources"]

_DATE_VALUED = ("identity", "bucket")  # transforms whose values of a date differ from those of its timestamp


def check_partition_sources(
    specs: Mapping[int, PartitionSpec], default_spec_id: int, old_doc: dict[str, Any], new_doc: dict[str, Any]
) -> None:
    """Refuse ``new_doc`` (the schema a change makes of ``old_doc``) if it drops or retypes a partition source.

    Raises:
        SchemaEvolutionError: names the column, the spec field and what to do first."""
    old, new = _columns(old_doc), _columns(new_doc)
    for spec_id, spec in sorted(specs.items()):
        for f in spec.fields:
            if f.source_id not in old:
                continue  # dropped before this spec stopped being the default
            name, was = old[f.source_id]
            now = new.get(f.source_id)
            field = f"partition field {f.name!r} ({_written(f.transform, name)}) of spec {spec_id}"
            if spec_id == default_spec_id:
                if now is None:
                    raise SchemaEvolutionError(
                        f"column {name!r} is the source of {field}, the table's current partitioning (rule: a column "
                        "the current partition spec partitions by cannot be dropped); change the spec first with "
                        "Table.update_partitioning, then drop the column"
                    )
                if now[1] != was:
                    raise SchemaEvolutionError(
                        f"column {name!r} is the source of {field}, the table's current partitioning (rule: a column "
                        f"the current partition spec partitions by keeps its type, {_type(was)}); change the spec first "
                        "with Table.update_partitioning"
                    )
            elif now is not None and was == "date" and now[1] != was and _transform_name(f.transform) in _DATE_VALUED:
                raise SchemaEvolutionError(
                    f"column {name!r} is the source of {field}, whose segments hold partition values of a date "
                    f"(rule: a date partitioned by {_transform_name(f.transform)} stays a date: the values of its "
                    f"{_type(now[1])} would differ)"
                )


def _columns(doc: dict[str, Any]) -> dict[int, tuple[str, Any]]:
    """Field id → (name, stored type) of each top-level column."""
    out = {}
    for f in with_ids(doc).get("fields", ()):
        fid = field_id(f)
        if fid is not None:
            out[fid] = (f["name"], f["type"])
    return out


def _transform_name(transform: str) -> str:
    return transform.split("[", 1)[0]


def _written(transform: str, column: str) -> str:
    if transform == "identity":
        return column
    name, _, param = transform.partition("[")
    return f"{name}({param.rstrip(']')}, {column})" if param else f"{name}({column})"


def _type(t: Any) -> str:
    return t if isinstance(t, str) else str(t.get("type", t)) if isinstance(t, dict) else str(t)
