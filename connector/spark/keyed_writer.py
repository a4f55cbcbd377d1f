"""Spark writes to a keyed table: appends, overwrites / consistent pushes, and ``operation=upsert``.

The key work is distributed: each task validates its rows' keys, looks them up in the
snapshot the write read (min/max + key index, key columns of candidate row groups only)
and writes its segment with its key index; it sends back the segment, the hashes of its
keys and (upsert) the addresses of the rows they replace. The driver checks keys across
tasks by hash (reading key values back only when two hashes collide) and makes the one
commit, checked against concurrent commits like every keyed write."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
from pyroaring import BitMap64
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from mvtable.lineage.actions import SegmentFile
from mvtable.storage import FileIO, open_file_io

from .. import recovery, write_intents, writes
from ..key_hashing import hash_keys
from ..key_index import index_path
from ..keys.commit import KeyedDeletes, KeyedRows, check_absent, lookup, segment_keys
from ..keys.validate import check_unique, key_table
from ..partitions.writing import PartitionedWriter
from ..segments import SegmentWriter
from ..upsert import commit_upsert


@dataclass
class KeyedSegmentsWritten(WriterCommitMessage):
    segments: list[SegmentFile] = field(default_factory=list)
    hashes: bytes = b""  # uint64 key hashes of the segment's rows
    replaced: dict[str, bytes] = field(default_factory=dict)  # upsert: segment id -> serialized BitMap64


class KeyedWriter(DataSourceArrowWriter):
    """``upsert=False``: a keyed append (keys must be new) or overwrite (``plan.mode``)."""

    def __init__(self, plan: writes.WritePlan, *, upsert: bool) -> None:
        self.plan = plan
        self.upsert = upsert

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KeyedSegmentsWritten:
        plan = self.plan
        io = open_file_io(plan.uri, plan.storage_options)
        make_writer = lambda: SegmentWriter(
            io,
            plan.arrow_schema,
            row_group_rows=plan.row_group_rows,
            primary_key=plan.primary_key,
            id_prefix=plan.segment_prefix,
            intent=plan.intent,
        )
        spec = plan.partition_spec
        # a partitioned table: one writer per partition the task meets (see PartitionedWriter)
        writer: SegmentWriter | PartitionedWriter = (
            PartitionedWriter(spec, plan.table_schema, make_writer) if spec is not None and spec.partitioned else make_writer()
        )
        try:
            # a keyed consistent push renews its lease, every write its intent
            with recovery.keep_lease(io, plan.entry_id, lease_ms=plan.lease_ms), write_intents.keep(io, plan.intent):
                message = self._write(io, writer, iterator)
        except BaseException:
            writer.abort()
            raise
        return message

    def _write(
        self, io: FileIO, writer: SegmentWriter | PartitionedWriter, iterator: Iterator[pa.RecordBatch]
    ) -> KeyedSegmentsWritten:
        plan = self.plan
        schema = plan.arrow_schema
        parts: list[pa.Table] = []
        for batch in iterator:
            data = pa.Table.from_batches([batch])
            parts.append(key_table(data, schema, plan.primary_key))  # key errors before schema ones
            writer.write(writes.align(plan, data))
        message = KeyedSegmentsWritten()
        keys = pa.concat_tables(parts) if parts else None
        if keys is not None and keys.num_rows:
            rows = KeyedRows(plan.primary_key, hash_keys(keys, plan.primary_key), keys)
            check_unique(keys, rows.hashes)
            message.hashes = rows.hashes.tobytes()
            if plan.read_version >= 0 and plan.mode == writes.APPEND:
                read = plan.commit_log().snapshot(plan.read_version)
                if self.upsert:
                    found = lookup(io, read, rows)
                    message.replaced = {sid: _bitmap(pos).serialize() for sid, pos in found.positions.items()}
                else:
                    check_absent(io, read, rows)
        closed = writer.close()
        message.segments = closed if isinstance(closed, list) else [closed] if closed is not None else []
        if isinstance(writer, PartitionedWriter):
            message.hashes = b""  # rows were split across segments: the commit reads the keys back in segment order
        return message

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        plan = self.plan
        commit_log = plan.commit_log()
        got = [m for m in messages if isinstance(m, KeyedSegmentsWritten)]
        segments = [s for m in got for s in m.segments]
        hashes: np.ndarray | None = (
            np.concatenate([np.frombuffer(m.hashes, dtype=np.uint64) for m in got]) if got else np.zeros(0, np.uint64)
        )
        if plan.partition_spec is not None and plan.partition_spec.partitioned:
            hashes = None  # not in segment order (see _write)
        rows = segment_keys(commit_log.io, segments, plan.primary_key, hashes=hashes)  # keys repeated across tasks
        if not self.upsert:
            writes.finish_write(plan, segments, keys=rows)
            return
        deletes = KeyedDeletes()
        for m in got:
            for sid, data in m.replaced.items():
                bm = BitMap64.deserialize(data)
                deletes.positions[sid] = deletes.positions[sid] | bm if sid in deletes.positions else bm
        try:
            commit_upsert(
                commit_log.io,
                commit_log,
                read=writes.read_snapshot(commit_log, plan),
                segments=segments,
                rows=rows,
                deletes=deletes,
                inline_max_bytes=plan.dv_inline_max_bytes,
                parameters={"source": "spark"},
                intent=plan.intent,
            )
        finally:
            writes.release_pin(plan)
            write_intents.release(commit_log.io, plan.intent)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        segments = [s for m in messages if isinstance(m, KeyedSegmentsWritten) for s in m.segments]
        if self.upsert:
            commit_log = self.plan.commit_log()
            if not writes.commit_landed(commit_log, self.plan, segments):
                commit_log.io.delete([p for s in segments for p in (s.path, index_path(s.path))])
            writes.release_pin(self.plan)
            write_intents.release(commit_log.io, self.plan.intent)
            return
        writes.abort_write(self.plan, segments)


def _bitmap(positions: np.ndarray) -> BitMap64:
    bm = BitMap64()
    bm.update(positions.astype(np.uint64))
    return bm
