"""``operation=delete`` writes: a DataFrame of row addresses (``_mv_segment``, ``_mv_row``) becomes one delete commit.

Executors turn their rows into one roaring bitmap per segment (compact to ship back); the
driver merges them and commits the deletion vectors."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap64
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import LongType, StringType, StructType

from mvtable.conf import TableProperties
from mvtable.errors import InvalidOptionError, InvalidRowAddressError, SchemaMismatchError
from mvtable.storage import open_file_io

from ..deletes import commit_deletes
from ..options import WriteOptions
from ..pinning import pin_snapshot
from ..post_commit import open_log
from ..segments import ROW_ADDRESS_ROW, ROW_ADDRESS_SEGMENT


@dataclass
class AddressesSeen(WriterCommitMessage):
    bitmaps: dict[str, bytes] = field(default_factory=dict)  # segment id -> serialized BitMap64


class DeleteWriter(DataSourceArrowWriter):
    def __init__(self, opts: WriteOptions, read_version: int) -> None:
        self.opts = opts
        self.read_version = read_version

    def write(self, iterator: Iterator[pa.RecordBatch]) -> AddressesSeen:
        seen: dict[str, BitMap64] = {}
        for batch in iterator:
            segs = batch.column(ROW_ADDRESS_SEGMENT)
            rows = batch.column(ROW_ADDRESS_ROW)
            if segs.null_count or rows.null_count:
                raise InvalidRowAddressError("row addresses must not be null")
            if batch.num_rows and pc.min(rows).as_py() < 0:
                raise InvalidRowAddressError("row positions must not be negative")
            encoded = pc.dictionary_encode(segs)
            indices = encoded.indices.to_numpy()
            positions = rows.to_numpy().astype(np.uint64)
            for i, seg_id in enumerate(encoded.dictionary.to_pylist()):
                bm = seen.setdefault(seg_id, BitMap64())
                bm.update(positions[indices == i])
        return AddressesSeen({sid: bm.serialize() for sid, bm in seen.items()})

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        merged: dict[str, BitMap64] = {}
        for m in messages:
            if isinstance(m, AddressesSeen):
                for sid, data in m.bitmaps.items():
                    merged.setdefault(sid, BitMap64()).update(BitMap64.deserialize(data))
        io = open_file_io(self.opts.path, self.opts.storage_options)
        commit_log = open_log(io)
        # pinned while the addresses are checked and merged with the read version's DVs
        with pin_snapshot(io, commit_log, version=self.read_version, owner="Spark delete commit") as pinned:
            commit_deletes(
                io,
                commit_log,
                pinned.snapshot,
                merged,
                inline_max_bytes=TableProperties.of(pinned.snapshot.properties).dv_inline_max_bytes,
                parameters={"source": "spark", **({"tag": self.opts.tag} if self.opts.tag else {})},
            )

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Executors wrote nothing; a commit that failed left at most orphan DV files."""


def make_delete_writer(opts: WriteOptions, schema: StructType, *, overwrite: bool) -> DeleteWriter:
    if overwrite:
        raise InvalidOptionError("operation=delete adds deletes to the table: use mode('append')")
    fields = {f.name: f.dataType for f in schema.fields}
    expected: dict[str, Any] = {ROW_ADDRESS_SEGMENT: StringType(), ROW_ADDRESS_ROW: LongType()}
    if fields != expected:
        raise SchemaMismatchError(
            f"operation=delete takes exactly the columns {ROW_ADDRESS_SEGMENT} (string) and {ROW_ADDRESS_ROW} (bigint), "
            f"got {[f'{n} ({t.simpleString()})' for n, t in fields.items()]}; read them with option('withRowAddress', 'true')"
        )
    read_version = opts.read_version
    if read_version is None:
        read_version = open_log(open_file_io(opts.path, opts.storage_options)).snapshot().version
    return DeleteWriter(opts, read_version)
