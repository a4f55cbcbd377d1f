"""``compact(spark, path, …)``: compaction with one Spark task per bin; the driver plans and makes one commit per batch.

The planning is ``mvtable.connector.compaction``'s. Each batch runs as one Spark job over
``spark.range(n, numPartitions=n)``: partition ``i`` holds the single row ``i`` and rewrites
bin ``i`` in ``mapInArrow`` (pyarrow only, no pandas). A task returns its output's
descriptor and row map as JSON, validated by the driver like any log content. A failed
attempt's file is an orphan (names are unique per attempt) that vacuum removes; Spark
retries the task."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa

from mvtable.lineage.actions import CompactedInput, SegmentFile
from mvtable.storage import open_file_io

from ..compaction import CompactionReport, OutputSpec
from ..compaction import compact as compact_table
from ..compaction.driver import Progress
from ..compaction.plan import Bin
from ..compaction.rewrite import RewrittenBin, rewrite_bin
from ..post_commit import open_log

__all__ = ["compact"]

_RESULT = "i long, result string"


def compact(
    spark: Any,
    path: str,
    *,
    target_file_size: int | str | None = None,
    min_input_files: int | None = None,
    delete_ratio: float | None = None,
    max_bytes_per_commit: int | str | None = None,
    dry_run: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    progress: Progress | None = None,
) -> CompactionReport:
    """Compact the table at ``path`` with Spark: each task rewrites one bin, the driver commits.

    Options default to the table's properties, as for ``Table.compact``. A bin's rewrite runs in
    a Spark task, so its errors reach the caller wrapped in a Spark exception:
    ``mvtable.errors.from_spark`` unwraps them. The commits run here, on the driver.

    Raises:
        TableNotFoundError: There is no mvtable table at ``path``.
        StorageLocationError: ``path`` cannot hold a table (an empty path, a file, an unknown protocol).
        InvalidOptionError: A malformed size, count, ratio or flag (``SettingsError`` names the
            option).
        CorruptSegmentError: A segment to rewrite is not what the log recorded (wrapped by Spark).
        FilesMissingError: A segment to rewrite is gone, vacuumed or deleted by hand (wrapped by Spark).
        CommitStateUnknownError: The store never said whether a compaction commit landed; look
            for it in the table's history before running it again.
        TooManyRetriesError: Every retry of a commit lost the race to concurrent writers.
        CorruptMetadataError: A log file or checkpoint is damaged; the message names it.
        StorageError: The store refused or failed a read or write (full, read-only, no permission).
    """
    options = dict(storage_options or {})
    io = open_file_io(path, options)

    def rewrite(bins: Sequence[Bin], spec: OutputSpec) -> list[RewrittenBin]:
        job = (path, options, spec, list(bins))

        def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            uri, opts, task_spec, all_bins = job
            task_io = open_file_io(uri, opts)
            for batch in batches:
                for i in batch.column(0).to_pylist():
                    done = rewrite_bin(task_io, all_bins[i], task_spec)
                    result = {
                        "output": done.output.model_dump(mode="json") if done.output is not None else None,
                        "inputs": [inp.model_dump(mode="json") for inp in done.inputs],
                    }
                    yield pa.RecordBatch.from_pydict({"i": [i], "result": [json.dumps(result)]})

        n = len(bins)
        rows = spark.range(0, n, 1, n).mapInArrow(run, _RESULT).collect()
        found: dict[int, RewrittenBin] = {}
        for row in rows:
            result = json.loads(row.result)
            output = SegmentFile.model_validate(result["output"]) if result["output"] is not None else None
            inputs = tuple(CompactedInput.model_validate(inp) for inp in result["inputs"])
            found[row.i] = RewrittenBin(bins[row.i], output, inputs)
        if sorted(found) != list(range(n)):
            raise RuntimeError(f"Spark returned results for bins {sorted(found)} of {n}")
        return [found[i] for i in range(n)]

    return compact_table(
        io,
        open_log(io),
        target_file_size=target_file_size,
        min_input_files=min_input_files,
        delete_ratio=delete_ratio,
        max_bytes_per_commit=max_bytes_per_commit,
        dry_run=dry_run,
        progress=progress,
        rewriter=rewrite,
    )
