"""Compaction: merge small segments and rewrite segments worn by deletes.

It runs beside ingestion and deletes, without ever failing either of them.

* ``plan`` — which segments, in which bins (pure);
* ``rewrite`` — executor work: one bin → one new segment and its row map;
* ``rowmap`` — where a compacted row went (rank over the input's deletion vector);
* ``driver`` — batches, the ``compact`` commit, deletes carried onto outputs;
* ``auto`` — the bounded compaction that follows a data write when the table asks for it
  (run by ``mvtable.connector.post_commit``).

``compact`` is the entry point for one table (``Table.compact`` and the CLI call it; the
Spark version, ``mvtable.connector.spark.compaction.compact``, passes a rewriter that runs
one Spark task per bin)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import pyarrow.compute as pc

from mvtable import checks
from mvtable.conf import TableProperties, parse_size
from mvtable.errors import InvalidOptionError
from mvtable.lineage.log import CommitLog
from mvtable.lineage.snapshot import Snapshot
from mvtable.storage import FileIO

from ..expressions import check_filter
from ..parallel import default_workers, ordered_map
from ..partitions.pruning import prune_segments
from ..schema import schema_from_json
from ..write_intents import WriteIntent
from .driver import CompactionReport, DroppedBin, Progress, run
from .grain import grain_of
from .plan import Bin, CompactionOptions, plan_bins
from .rewrite import OutputSpec, RewrittenBin, rewrite_bin

__all__ = [
    "Bin",
    "CompactionOptions",
    "OutputSpec",
    "CompactionReport",
    "DroppedBin",
    "compact",
    "compaction_options",
    "plan_bins",
]

# (bins, how to write outputs) -> rewritten bins, in the order given
Rewriter = Callable[[Sequence[Bin], OutputSpec], list[RewrittenBin]]


def compaction_options(
    props: TableProperties,
    *,
    target_file_size: int | str | None = None,
    min_input_files: int | None = None,
    delete_ratio: float | None = None,
    max_bytes_per_commit: int | str | None = None,
) -> CompactionOptions:
    """The table's compaction properties with the caller's overrides, checked.

    Raises:
        InvalidOptionError: ``delete_ratio`` is not a fraction in (0, 1]."""
    # a bad size is a SettingsError, an InvalidOptionError that names the option
    target = (
        parse_size(target_file_size, name="target_file_size") if target_file_size is not None else props.compact_target_file_size
    )
    per_commit = (
        parse_size(max_bytes_per_commit, name="max_bytes_per_commit")
        if max_bytes_per_commit is not None
        else props.compact_max_bytes_per_commit
    )
    files = props.compact_min_input_files if min_input_files is None else checks.count(min_input_files, name="min_input_files")
    ratio = props.compact_delete_ratio if delete_ratio is None else delete_ratio
    if not isinstance(ratio, (int, float)) or isinstance(ratio, bool) or not 0 < ratio <= 1:
        raise InvalidOptionError(f"delete_ratio must be a fraction in (0, 1], not {delete_ratio!r}")
    return CompactionOptions(target, files, float(ratio), per_commit)


def local_rewriter(io: FileIO) -> Rewriter:
    """Rewrite bins on this machine, one thread per core."""

    def rewrite(bins: Sequence[Bin], spec: OutputSpec) -> list[RewrittenBin]:
        cores = default_workers()
        workers = max(1, min(cores, len(bins)))
        threads = len(bins) < cores  # fewer bins than cores: each decodes on several
        return list(ordered_map(lambda b: rewrite_bin(io, b, spec, use_threads=threads), bins, workers=workers))

    return rewrite


def compact(
    io: FileIO,
    commit_log: CommitLog,
    *,
    snapshot: Snapshot | None = None,
    target_file_size: int | str | None = None,
    min_input_files: int | None = None,
    delete_ratio: float | None = None,
    max_bytes_per_commit: int | str | None = None,
    dry_run: bool = False,
    progress: Progress | None = None,
    rewriter: Rewriter | None = None,
    only: set[str] | None = None,
    max_batches: int | None = None,
    where: pc.Expression | None = None,
) -> CompactionReport:
    """Compact the table ``commit_log`` reads (see ``driver`` for how it stays out of everyone's way).

    Options default to the table properties ``compactTargetFileSize``, ``compactMinInputFiles``,
    ``compactDeleteRatio`` and ``compactMaxBytesPerCommit``. ``where`` limits the run to the
    partitions a filter may match (by partition values alone). Segments written under an
    older partition spec move into the default spec's grain where they fit one partition
    (``grain``).

    Raises:
        InvalidFilterError: ``where`` does not fit the table's schema."""
    dry_run = checks.flag(dry_run, name="dry_run")
    snapshot = snapshot if snapshot is not None else commit_log.snapshot()
    within = _within(snapshot, where) if where is not None else None
    props = TableProperties.of(snapshot.properties)
    options = compaction_options(
        props,
        target_file_size=target_file_size,
        min_input_files=min_input_files,
        delete_ratio=delete_ratio,
        max_bytes_per_commit=max_bytes_per_commit,
    )
    rewrite = rewriter or local_rewriter(io)
    spec = OutputSpec(schema_from_json(snapshot.table_schema), props.row_group_rows, tuple(snapshot.primary_key or ()))

    def rewrite_bins(bins: Sequence[Bin], intent: WriteIntent) -> list[RewrittenBin]:
        return rewrite(bins, dataclasses.replace(spec, intent=intent))

    return run(
        io,
        commit_log,
        snapshot,
        options,
        rewrite=rewrite_bins,
        inline_max_bytes=props.dv_inline_max_bytes,
        dry_run=dry_run,
        progress=progress,
        only=only,
        max_batches=max_batches,
        within=within,
        grain=grain_of(snapshot),
    )


def _within(snapshot: Snapshot, where: pc.Expression) -> set[str]:
    """The visible segments whose partition ``where`` may match.

    Raises:
        InvalidFilterError: ``where`` does not fit the table's schema."""
    arrow = schema_from_json(snapshot.table_schema)
    check_filter(where, arrow, what="compaction filter (where=)")
    kept, _ = prune_segments(
        snapshot.visible_segments(), specs=snapshot.partition_specs, table_schema=snapshot.table_schema, arrow=arrow, filter=where
    )
    return {s.id for s in kept}
