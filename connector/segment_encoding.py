"""How segments are encoded in Parquet, and their row-group statistics read back from the footer.

Statistics come from the file's own footer instead of a second pass over the rows.

Measured choices (SF-1 lineitem, row groups of 131,072 rows; the runs are in
``benchmarks/README.md``):

* **Dictionary encoding per column, chosen from a sample.** A column whose values hardly
  repeat (keys, prices, free text) fills pyarrow's dictionary page inside each row group and
  then falls back to plain pages: the hashing is wasted CPU and the dictionary page wasted
  bytes. ``l_orderkey``, ``l_partkey``, ``l_extendedprice`` and ``l_comment`` encode faster
  *and* smaller without it; the low-cardinality columns (flags, quantities, dates) stay
  dictionary-encoded, which is what the read path's dictionary decoding of strings
  (``segments.dictionary_columns``) relies on.
* **Delta-encoded integers, uncompressed.** The integer-like columns left without a
  dictionary are ``DELTA_BINARY_PACKED``: less write CPU, faster reads and fewer bytes than
  plain pages under zstd (``delta_columns``). zstd finds next to nothing left in them and was
  a large part of their decode, so they skip it.
* **Dictionary-encoded columns are snappy, the rest zstd.** A dictionary column's pages are
  small (bit-packed indices), and pyarrow's zstd sets up (and zero-fills) a fresh
  decompression context for every page it reads, which cost more than zstd saved: a profile
  of ``Table.scan`` showed ``ZSTD_createDCtx`` and the kernel zeroing fresh pages.
  ``Table.scan`` went from slower than pyiceberg's read to faster for slightly more bytes.
  lz4 and no compression on those columns measured within noise of snappy, and Spark read
  lz4 there as fast as zstd. Snappy because every Parquet reader has it. The text and other
  plain columns, where zstd's ratio pays, stay zstd.
* **Small segments are snappy-compressed.** zstd's set-up per column chunk is most of a
  small write's encode CPU; a segment of fewer than ``SMALL_SEGMENT_ROWS`` rows (an append of
  a few rows, a streaming micro-batch) takes snappy, every larger one zstd (as above).
  Compaction merges small segments into larger ones, zstd from ``SMALL_SEGMENT_ROWS`` rows on.
  Snappy is what Spark writes by default: every Parquet reader reads it.
* **Statistics from the footer.** pyarrow computes min/max/null count per column chunk while
  it encodes; reading them from ``FileMetaData`` replaces a ``min_max`` pass over every column
  (a noticeable share of a push's CPU). Floats (NaN makes Parquet's min/max not ours) and
  timestamps (stored as integer microseconds) keep the Arrow pass on those columns only.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mvtable.lineage.actions import ColumnStats

from .stats import column_stats, date_bound, encode_stat, statable

# A column is dictionary-encoded when its sample has at most this share of distinct values
# (each value repeats 4 times or more on average): below it the dictionary pays for itself.
DICTIONARY_MAX_DISTINCT_SHARE = 0.25
DICTIONARY_SAMPLE_ROWS = 65_536  # rows of the first row group looked at
# A first row group smaller than this (a large segment in tiny row groups) says too little
# about the rest: dictionary everywhere, as pyarrow does by default.
DICTIONARY_MIN_SAMPLE_ROWS = 1_024


SMALL_SEGMENT_ROWS = 8_192
SMALL_SEGMENT_COMPRESSION = "snappy"
# The codec of a large segment's dictionary-encoded columns when the rest are zstd.
DICTIONARY_COMPRESSION = "snappy"
# Rows a data page may hold at most; pages end at ``data_page_size`` (1 MiB encoded) well before.
MAX_ROWS_PER_PAGE = 1 << 20
# ``max_rows_per_page`` is a newer writer option than the oldest pyarrow mvtable supports.
_PAGE_ROWS_OPTION = "max_rows_per_page" in inspect.signature(pq.ParquetWriter.__init__).parameters


def is_small_segment(rows: int | None) -> bool:
    """Whether a segment of ``rows`` rows (None: not known yet, so at least a row group) is written as a small one.

    ``SMALL_SEGMENT_COMPRESSION`` and dictionary pages everywhere (pyarrow's default; counting
    distinct values is not worth it for a few rows)."""
    return rows is not None and rows < SMALL_SEGMENT_ROWS


def parquet_writer_options(
    *,
    compression: str = "zstd",
    use_dictionary: bool | Sequence[str] = True,
    schema: pa.Schema | None = None,
) -> dict[str, Any]:
    """How segments are encoded.

    ``store_decimal_as_integer``: decimals of precision ≤ 18 are stored as INT32/INT64 rather than
    fixed-length byte arrays (as delta-rs and pyiceberg write them). Every Parquet reader reads
    both; the integer form decodes several times faster (the decimal columns were a large share of
    ``pq.read_table``'s time) and compresses a little better.
    ``use_dictionary``: True, or the columns to dictionary-encode (``dictionary_columns_for``); with
    the ``schema``, the other integer-like columns are ``DELTA_BINARY_PACKED`` (``delta_columns``)
    and stored without compression: delta packing already removes what zstd would find in them,
    while zstd was a large part of their decode, paid by every scan and every key lookup, and its encode CPU on every write. Existing segments keep their
    encoding; readers need nothing new."""
    options: dict[str, Any] = {
        "compression": compression,
        "write_statistics": True,
        "store_decimal_as_integer": True,
        # a CRC-32 in every page header, checked by every reader (``segment_checks``)
        "write_page_checksum": True,
        "use_dictionary": use_dictionary if isinstance(use_dictionary, bool) else list(use_dictionary),
    }
    if _PAGE_ROWS_OPTION:
        # pages end at ~1 MiB of encoded values (``data_page_size``), not at pyarrow's 20,000 rows: a
        # page read costs a header decoded and a checksum call whatever its size, and with no page
        # index written no reader skips pages, so small pages bought nothing
        options["max_rows_per_page"] = MAX_ROWS_PER_PAGE
    if schema is not None and not isinstance(use_dictionary, bool):
        delta = set(delta_columns(schema, use_dictionary))
        if delta:
            # no nested columns here (``dictionary_columns_for``): names are the leaf paths
            options["column_encoding"] = dict.fromkeys(delta, "DELTA_BINARY_PACKED")
        dictionary = set(use_dictionary)
        options["compression"] = {f.name: _column_codec(f.name, compression, delta=delta, dictionary=dictionary) for f in schema}
    return options


def _column_codec(name: str, compression: str, *, delta: set[str], dictionary: set[str]) -> str:
    """The codec of column ``name``: delta-packed columns are left uncompressed.

    Dictionary columns get ``DICTIONARY_COMPRESSION`` instead of zstd (see the module's notes); every
    other column gets ``compression``."""
    if name in delta:
        return "none"
    if name in dictionary and compression == "zstd":
        return DICTIONARY_COMPRESSION
    return compression


def delta_columns(schema: pa.Schema, dictionary: Sequence[str]) -> list[str]:
    """The top-level columns outside ``dictionary`` that Parquet stores as INT32/INT64, to write ``DELTA_BINARY_PACKED``.

    Those are integers, dates, times, timestamps and decimals of precision ≤ 18; they are written
    ``DELTA_BINARY_PACKED`` rather than plain: faster to write and to read, and smaller. A standard Parquet encoding (Spark's vectorized reader, DuckDB, arrow-rs, Trino read it)."""
    keep = set(dictionary)
    return [f.name for f in schema if f.name not in keep and _integer_physical(f.type)]


def _integer_physical(t: pa.DataType) -> bool:
    return (
        pa.types.is_integer(t)
        or pa.types.is_date(t)
        or pa.types.is_time(t)
        or pa.types.is_timestamp(t)
        or (pa.types.is_decimal(t) and t.precision <= 18)
    )


def dictionary_columns_for(sample: pa.Table) -> bool | list[str]:
    """The columns of a segment worth dictionary-encoding, judged on its first rows.

    Those whose first ``DICTIONARY_SAMPLE_ROWS`` rows hold at most ``DICTIONARY_MAX_DISTINCT_SHARE``
    distinct values. ``True`` (every column) for a small sample, or when a column is nested (pyarrow
    names the columns to encode by leaf path)."""
    rows = min(sample.num_rows, DICTIONARY_SAMPLE_ROWS)
    if rows < DICTIONARY_MIN_SAMPLE_ROWS or any(pa.types.is_nested(f.type) for f in sample.schema):
        return True
    head = sample.slice(0, rows)
    limit = DICTIONARY_MAX_DISTINCT_SHARE * rows
    return [
        f.name
        for f in sample.schema
        if not pa.types.is_boolean(f.type) and pc.count_distinct(head.column(f.name), mode="all").as_py() <= limit
    ]


class FooterStats:
    """Per-row-group statistics of one segment in the log's form (``stats.column_stats``), from the Parquet footer.

    Taken from the footer where Parquet's min/max mean the same thing."""

    def __init__(self, schema: pa.Schema) -> None:
        self.statable = [f for f in schema if statable(f.type)]
        # floats: Parquet skips NaN in min/max, the log keeps no min/max when a NaN is
        # there; timestamps: the log keeps integer microseconds. Both from the rows.
        self.from_rows = [f.name for f in self.statable if pa.types.is_floating(f.type) or pa.types.is_timestamp(f.type)]

    def of_rows(self, chunk: pa.Table) -> dict[str, ColumnStats]:
        """The statistics the footer cannot give, computed from the row group's rows."""
        return column_stats(chunk.select(self.from_rows)) if self.from_rows else {}

    def of_footer(self, metadata: pq.FileMetaData, row_group: int, from_rows: dict[str, ColumnStats]) -> dict[str, ColumnStats]:
        """The row group's statistics: ``from_rows`` plus every other statable column from the footer.

        A chunk without min/max (pyarrow drops them when a value exceeds 4 KiB) keeps only its null
        count: such a row group is never skipped by that column."""
        rg = metadata.row_group(row_group)
        paths = {rg.column(j).path_in_schema: j for j in range(rg.num_columns)}
        out: dict[str, ColumnStats] = {}
        for f in self.statable:
            if f.name in from_rows:
                out[f.name] = from_rows[f.name]
                continue
            st = rg.column(paths[f.name]).statistics
            if st is None:
                continue
            nulls = st.null_count if st.has_null_count else None
            if st.has_min_max and pa.types.is_date32(f.type):  # as days: a Python date cannot hold every date32
                lo, hi = date_bound(st.min_raw), date_bound(st.max_raw)
                out[f.name] = ColumnStats(min=lo, max=hi, null_count=nulls) if lo and hi else ColumnStats(null_count=nulls)
            elif st.has_min_max:
                out[f.name] = ColumnStats(min=encode_stat(st.min, f.type), max=encode_stat(st.max, f.type), null_count=nulls)
            else:
                out[f.name] = ColumnStats(null_count=nulls)
        return out
