"""A scan as a DuckDB relation over the segment files themselves, deletes applied.

``TableScan.to_reader`` makes DuckDB ingest Arrow batches that pyarrow decoded and
filtered: two decodes' worth of work for one query. Here DuckDB reads the segments with its own Parquet reader
(column pruning, statistics, its threads) and each segment that has a deletion vector is
``POSITIONAL JOIN``-ed with a one-column Arrow table of keep flags, one per row of the
file, in file order: a deleted row is dropped by a boolean test rather than a hash anti
join on positions (which cost more than the read itself). Segments without deletes are
read as they are.

Local tables only (DuckDB needs file paths), and scans without a ``filter``,
``predicates`` or row addresses: the relation is the visible rows of the projected
columns, and the query's own ``WHERE`` does the filtering.

DuckDB matches Parquet columns by name. A segment written under an older schema (a column since
renamed, dropped, added or widened: ``schema_evolution.projection`` says which) is read by field id
through pyarrow instead and handed to DuckDB as an Arrow table, so its rows come out under the
table's current names and types, and a dropped column's values never come back.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import pyarrow as pa

from mvtable.errors import InvalidOptionError
from mvtable.storage import FileIO, LocalFileIO

from .scan import ScanPlan, read_task, task_masks
from .segments import segment_projection

if TYPE_CHECKING:
    import duckdb

__all__ = ["duckdb_relation"]


def duckdb_relation(
    con: duckdb.DuckDBPyConnection, io: FileIO, plan: ScanPlan, *, schema: pa.Schema | None = None
) -> duckdb.DuckDBPyRelation:
    """The visible rows of ``plan`` as a lazy relation of ``con``.

    The keep-flag tables are registered on ``con`` under fresh names; the segment files must stay
    readable while the relation is queried (the caller holds the scan's pin). ``schema`` is the
    table schema read (with field ids): segments written under another one are read by id.

    Raises:
        InvalidOptionError: The table is not local, or the scan has predicates or row addresses."""
    if not isinstance(io, LocalFileIO):
        raise InvalidOptionError(
            f"to_duckdb reads segment files by path, so it needs a local table; {io.uri} is not local: use to_reader()"
        )
    if plan.predicates or plan.row_address:
        raise InvalidOptionError("to_duckdb takes no predicates or row addresses: put conditions in the query's WHERE")
    columns = ", ".join(_ident(c) for c in (plan.columns if plan.columns is not None else plan.schema.names))
    if not plan.tasks:
        return con.from_arrow(plan.schema.empty_table())
    keep_col = f"__mvtable_keep_{uuid.uuid4().hex}"
    parts = []
    names = list(plan.columns) if plan.columns is not None else plan.schema.names
    for task in plan.tasks:
        if schema is not None and segment_projection(io, task.segment, schema) is not None:
            name = f"__mvtable_byid_{uuid.uuid4().hex}"
            tables = list(read_task(io, task, columns=names, schema=schema))
            con.register(name, pa.concat_tables(tables) if tables else pa.schema([schema.field(n) for n in names]).empty_table())
            parts.append(f"SELECT {columns} FROM {name}")
            continue
        path = _literal(f"{io.root}/{task.segment.path}")
        masks = task_masks(io, task)
        keep = masks.keep_mask(0, task.segment.num_rows) if masks is not None else None
        if keep is None:
            parts.append(f"SELECT {columns} FROM read_parquet({path})")
            continue
        name = f"__mvtable_dv_{uuid.uuid4().hex}"
        con.register(name, pa.table({keep_col: pa.array(keep, type=pa.bool_())}))
        parts.append(f"SELECT {columns} FROM read_parquet({path}) POSITIONAL JOIN {name} WHERE {keep_col}")
    return con.sql(" UNION ALL ".join(parts))


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
