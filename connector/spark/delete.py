"""``delete(spark, path, condition)``: Spark finds the rows, one commit deletes them."""

from __future__ import annotations

import uuid
from typing import Any
from collections.abc import Mapping

from mvtable.lineage.io import open_file_io
from mvtable.lineage.log import CommitLog

from ..segments import ROW_ADDRESS_ROW, ROW_ADDRESS_SEGMENT


def delete(spark: Any, path: str, condition: str, *, storage_options: Mapping[str, str] | None = None) -> int:
    """Delete the rows matching the SQL ``condition``; returns how many rows were deleted.

    The rows are found at one version and the delete commits against that version, so a
    concurrent replace of a touched segment is a conflict, not a silent miss."""
    from . import ensure_registered

    ensure_registered(spark)
    storage = {f"storage.{k}": v for k, v in (storage_options or {}).items()}
    log = CommitLog(open_file_io(path, storage_options))
    version = log.latest_version()
    tag = uuid.uuid4().hex
    rows = (
        spark.read.format("mvtable")
        .options(**storage)
        .option("versionAsOf", version)
        .option("withRowAddress", "true")
        .load(path)
        .where(condition)
        .select(ROW_ADDRESS_SEGMENT, ROW_ADDRESS_ROW)
    )
    (
        rows.write.format("mvtable")
        .options(**storage)
        .option("operation", "delete")
        .option("readVersion", version)
        .option("tag", tag)
        .mode("append")
        .save(path)
    )
    for v in range(log.latest_version(), version, -1):
        commit = log.read_commit(v)
        if commit.parameters.get("tag") == tag:
            return int(commit.metrics.get("deleted_rows", 0))
    return 0  # every matching row was deleted already: nothing committed
