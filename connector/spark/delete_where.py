"""``delete(spark, path, condition)``: Spark finds the rows, one commit deletes them."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from mvtable.storage import open_file_io

from ..pinning import pin_snapshot
from ..post_commit import open_log
from ..schema import schema_from_json, schema_to_json
from ..schema_evolution.field_ids import strip_ids
from ..segments import ROW_ADDRESS_ROW, ROW_ADDRESS_SEGMENT


def condition_columns(spark: Any, schema: Any, condition: str) -> list[str] | None:
    """The table columns ``condition`` reads, in table order, or ``None`` when they cannot be told.

    With ``None`` the caller reads every column. A Python data source gets no column pruning
    from Spark, so without this the delete scan decodes every column to evaluate a predicate
    on one or two (benchmarks/README.md has what that costs). The condition is analysed
    against an empty relation of the table's schema, so a typo fails here with Spark's own
    message, before any scan."""
    df = spark.createDataFrame([], schema).where(condition)  # AnalysisException on a bad condition
    try:
        refs = df._jdf.queryExecution().analyzed().references().toSeq()
        names = {refs.apply(i).name().lower() for i in range(refs.size())}
    except Exception:
        return None
    columns = [f.name for f in schema.fields if f.name.lower() in names]
    if any("," in c for c in columns):  # the columns option is comma-separated
        return None
    return columns


def delete(spark: Any, path: str, condition: str, *, storage_options: Mapping[str, str] | None = None) -> int:
    """Delete the rows matching the SQL ``condition``; returns how many rows were deleted.

    The rows are found at one version and the delete commits against that version, so a
    concurrent replace of a touched segment is a conflict, not a silent miss."""
    from pyspark.sql.types import StructType

    from . import ensure_registered

    ensure_registered(spark)
    storage = {f"storage.{k}": v for k, v in (storage_options or {}).items()}
    io = open_file_io(path, storage_options)
    commit_log = open_log(io)
    # Pinned from finding the rows until their commit: the version the rows are read at.
    with pin_snapshot(io, commit_log, owner="Spark delete") as pinned:
        version = pinned.version
        tag = uuid.uuid4().hex
        schema = StructType.fromJson(strip_ids(schema_to_json(schema_from_json(pinned.snapshot.table_schema))))
        columns = condition_columns(spark, schema, condition)
        reader = spark.read.format("mvtable").options(**storage).option("versionAsOf", version).option("withRowAddress", "true")
        if columns is not None:
            # At least one column: a condition such as "true" reads none, and the scan needs one.
            reader = reader.option("columns", ",".join(columns or [schema.fields[0].name]))
        rows = reader.load(path).where(condition).select(ROW_ADDRESS_SEGMENT, ROW_ADDRESS_ROW)
        (
            rows.write.format("mvtable")
            .options(**storage)
            .option("operation", "delete")
            .option("readVersion", version)
            .option("tag", tag)
            .mode("append")
            .save(path)
        )
    for v in range(commit_log.latest_version(), version, -1):
        commit = commit_log.read_commit(v)
        if commit.parameters.get("tag") == tag:
            return int(commit.metrics.get("deleted_rows", 0))
    return 0  # every matching row was deleted already: nothing committed
