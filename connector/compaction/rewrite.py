"""Executor work: rewrite one bin into one new segment and return its descriptor and row map.

Nothing is committed here; the driver names the output in one ``compact`` commit (or leaves it an
orphan for vacuum when the bin is dropped).

The live rows of each input are read with the deletion vector the bin carries (the one of
its read version) and written in input order, at most ``DEFAULT_READ_ROWS`` rows per read
call, so memory stays bounded whatever the bin's size."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from mvtable.errors import CorruptSegmentError
from mvtable.lineage.actions import CompactedInput, SegmentFile
from mvtable.storage import FileIO

from ..scan import ScanTask, task_masks
from ..segments import DEFAULT_READ_ROWS, SegmentWriter, iter_segment
from ..write_intents import WriteIntent
from .plan import Bin

__all__ = ["OutputSpec", "RewrittenBin", "rewrite_bin"]


@dataclass(frozen=True)
class OutputSpec:
    """How outputs are written: the table's schema, rows per row group, and its primary key.

    A keyed table's segments carry a key index, written by the same ``SegmentWriter``."""

    schema: pa.Schema
    row_group_rows: int
    primary_key: tuple[str, ...] = ()
    intent: WriteIntent | None = None  # outputs are named after it: vacuum leaves them alone until the commit


@dataclass(frozen=True)
class RewrittenBin:
    bin: Bin
    output: SegmentFile | None  # None: every row of the bin was deleted
    inputs: tuple[CompactedInput, ...]

    @property
    def output_bytes(self) -> int:
        return self.output.size_bytes if self.output is not None else 0


def rewrite_bin(io: FileIO, bin: Bin, spec: OutputSpec, *, use_threads: bool = False) -> RewrittenBin:
    """Rewrite the segments of ``bin`` into new segments as ``spec`` says, live rows in order.

    ``use_threads`` decodes each read on every core: for a bin that has the machine to itself (a
    Spark task has one core and leaves it off).

    Raises:
        CorruptSegmentError: An input yields another number of live rows than the log says."""
    out = SegmentWriter(io, spec.schema, row_group_rows=spec.row_group_rows, primary_key=spec.primary_key, intent=spec.intent)
    inputs: list[CompactedInput] = []
    written = 0
    try:
        for inp in bin.inputs:
            seg = inp.segment
            task = ScanTask(seg, tuple(range(len(seg.row_groups))), inp.dv)
            rows = 0
            masks = task_masks(io, task)
            for table in iter_segment(
                io,
                seg,
                task.row_groups,
                None,
                masks=masks,
                read_rows=DEFAULT_READ_ROWS,
                use_threads=use_threads,
                schema=spec.schema,  # by field id: old segments come out in the table's current schema
            ):
                out.write(table)
                rows += table.num_rows
            if rows != inp.live_rows:
                raise CorruptSegmentError(
                    seg.path, f"{rows} live rows read, the log says {inp.live_rows} ({seg.num_rows} minus {inp.deleted} deleted)"
                )
            output = out.segment_id if rows else None
            inputs.append(CompactedInput(segment_id=seg.id, output=output, first_row=written if rows else 0, dv=inp.dv))
            written += rows
        segment = out.close()
    except BaseException:
        out.abort()
        raise
    if segment is not None and bin.spec_id is not None:  # one partition's rows (plan_bins never mixes them)
        segment = segment.model_copy(update={"spec_id": bin.spec_id, "partition": bin.partition})
    return RewrittenBin(bin, segment, tuple(inputs))
