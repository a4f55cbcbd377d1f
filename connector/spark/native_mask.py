"""The expression mask: how ``read_native`` removes deleted rows with Spark expressions alone.

It serves where the JVM mask (``native_jvm``, the default and faster) is not available: no
JDK to build it, Spark Connect, ``MVTABLE_JVM_MASK=off``.

Spark's vectorized Parquet reader generates each row's position in its file
(``_metadata.row_index``), which is what a deletion vector addresses; ``_metadata.file_size``
tells the files apart. Each file's deletion vector becomes a dense bitmap (bit ``p`` set =
row ``p`` deleted, 125 KB per million rows), and a row is kept when its bit is clear. Two
ways to bring the bitmaps to the rows, chosen per read:

* **inline** (the default when it fits: at most ``MAX_INLINE_FILES`` files with deletes and
  ``MAX_INLINE_BYTES`` of bitmaps): all bitmaps are one ``array<tinyint>`` literal in the
  plan, built in the JVM from the bytes (no SQL text to parse, and Spark prints it as an
  object id, not its contents); a ``CASE`` on the file size gives the file's offset in it, so
  a row is live when ``element_at(bits, offset + row_index / 8) >> (row_index % 8) & 1 = 0``
  in generated code. No extra job, no broadcast exchange, no adaptive re-planning.
* **join** (many files, huge bitmaps, or no JVM handle as with Spark Connect): one row per
  file (size, bitmap as longs) broadcast-joined (left outer) to the scan. The join runs above
  the query's own filters, but costs a broadcast stage (a job, the hash relation, adaptive
  re-planning) on every query.

The inline mask is not a filter but a generator: ``explode`` of ``[true]`` for a live row and
``[]`` for a deleted one. The rows are the same; the order of work is not. A view's filter
is combined *before* the query's own (Spark's ``CombineFilters`` puts the inner condition
first, and generated code tests conditions in order), so as a filter the mask ran on every
row read; Spark pushes the query's filters *below* a ``Generate``, and defers building the
``_metadata`` struct until a row has passed them, so the bitmaps are tested only on the rows
the query keeps. That makes selective queries faster; queries that keep most rows are
unchanged (benchmarks/README.md, "The mask as a generator").

Inline is the default because it needs no stage and no hash relation per query; measured
against the join, the two were about even (benchmarks/README.md has the runs).

The mask depends only on the files and their deletion vectors, so it is built once per
process and session (``_MASKS``): a view queried many times pays for its bitmaps once."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from mvtable.errors import InvalidRowAddressError
from mvtable.visibility import load_dv_positions, process_cache

logger = logging.getLogger("mvtable.connector")

MAX_INLINE_FILES = 64  # a CASE per row is linear in the files it names
MAX_INLINE_BYTES = 32 << 20  # the literal travels with every stage's tasks

_KEY, _NAME, _ROW, _BITS = "_mv_native_size", "_mv_native_name", "_mv_native_row", "_mv_native_bits"


def deletion_bitmap(positions: np.ndarray, num_rows: int) -> np.ndarray:
    """Row positions → dense bitmap of ``ceil(num_rows / 64)`` int64 words.

    Bit ``p % 64`` of word ``p // 64`` is set for every deleted row ``p`` (little-endian, so
    its bytes are the same bitmap with bit ``p % 8`` of byte ``p // 8``).

    Raises:
        InvalidRowAddressError: A position is at or past ``num_rows``."""
    pos = np.asarray(positions, dtype=np.int64)
    if pos.size and (int(pos.max()) >= num_rows or int(pos.min()) < 0):
        raise InvalidRowAddressError(f"deletion vector names row {int(pos.max())} of a {num_rows}-row segment")
    bits = np.zeros(-(-num_rows // 64) * 64, dtype=bool)
    bits[pos] = True
    return np.packbits(bits, bitorder="little").view("<i8")


@dataclass(frozen=True)
class FileBits:
    """One scanned file with deletes: how Spark tells it apart, and its bitmap."""

    size: int
    name: str
    bitmap: np.ndarray  # int64 words, see ``deletion_bitmap``


@dataclass(frozen=True)
class Mask:
    """``live`` (a Column, inline) or ``deletes`` + ``join_on`` (a DataFrame, join)."""

    live: Any = None
    deletes: Any = None
    join_on: tuple[str, ...] = ()

    @property
    def inline(self) -> bool:
        return self.live is not None


_MASKS: dict[tuple[Any, ...], Mask] = {}
_MAX_MASKS = 16


def mask_for(spark: Any, io: Any, snapshot: Any, segments: Sequence[Any], *, inline: bool | None = None) -> Mask:
    """The mask for ``segments`` (all with a deletion vector) of ``snapshot``, cached per session, files and deletion vectors.

    ``inline`` forces a kind (tests); ``None`` picks."""
    key = (io.uri, tuple((seg.id, snapshot.dvs[seg.id]) for seg in segments), id(spark), inline)
    cached = _MASKS.get(key)
    if cached is not None:
        return cached
    files = _file_bits(io, snapshot, segments)
    mask = None
    fits = len(files) <= MAX_INLINE_FILES and sum(f.bitmap.nbytes for f in files) <= MAX_INLINE_BYTES
    if inline is not False and (fits or inline):
        mask = _inline_mask(spark, files)
    if mask is None:
        mask = _join_mask(spark, files)
    _MASKS[key] = mask
    while len(_MASKS) > _MAX_MASKS:
        _MASKS.pop(next(iter(_MASKS)))
    return mask


def apply_mask(df: Any, mask: Mask, names: Sequence[str]) -> Any:
    """``df`` (a Parquet scan of exactly the mask's files) without its deleted rows."""
    from pyspark.sql import functions as F

    if mask.inline:
        # Not ``df.where(mask.live)``: a view's filter runs before the query's own (Spark
        # combines filters inner first and evaluates them in order), so the mask was tested
        # on every row read. A generator that yields a row when it is live and none when it
        # is deleted drops the same rows, but Spark pushes the query's filters below a
        # ``Generate`` (and defers building ``_metadata`` until a row passes them): the mask
        # is tested only on the rows the query keeps.
        keep = unused_name("_mv_keep", names)
        one_if_live = F.when(mask.live, F.array(F.lit(True))).otherwise(F.array().cast("array<boolean>"))
        return df.withColumn(keep, F.explode(one_if_live)).drop(keep)
    # SQL text rather than Column objects: each Column is a py4j round trip, which adds up to
    # noticeable driver time per query for a wide table when built with Columns.
    scan = df.selectExpr(
        *[_quote(n) for n in names],
        f"_metadata.file_size AS {_KEY}",
        f"_metadata.row_index AS {_ROW}",
        *([f"_metadata.file_name AS {_NAME}"] if _NAME in mask.join_on else []),
    )
    joined = scan.join(F.broadcast(mask.deletes), list(mask.join_on), "left_outer")
    live = f"{_BITS} IS NULL OR (shiftright(element_at({_BITS}, cast(shiftright({_ROW}, 6) AS int) + 1), cast({_ROW} & 63 AS int)) & 1) = 0"
    return joined.where(live).selectExpr(*[_quote(n) for n in names])


def _file_bits(io: Any, snapshot: Any, segments: Sequence[Any]) -> list[FileBits]:
    """Bitmaps of the files, largest first (the inline ``CASE`` tests them in this order)."""
    fs, base = io.arrow()
    infos = fs.get_file_info([f"{base}/{seg.file.path}" for seg in segments])
    cache = process_cache()
    out = [
        FileBits(
            int(info.size),
            seg.file.path.rsplit("/", 1)[-1],
            deletion_bitmap(load_dv_positions(io, snapshot.dvs[seg.id], cache=cache), seg.file.num_rows),
        )
        for seg, info in zip(segments, infos)
    ]
    return sorted(out, key=lambda f: -f.bitmap.size)


def _inline_mask(spark: Any, files: Sequence[FileBits]) -> Mask | None:
    """The bitmaps as one ``array<tinyint>`` literal made in the JVM.

    ``None`` when this session has no JVM handle (Spark Connect): the join works everywhere."""
    from pyspark.sql import functions as F

    try:
        from pyspark.sql.classic.column import Column

        jvm = spark._jvm
        expressions, types = jvm.org.apache.spark.sql.catalyst.expressions, jvm.org.apache.spark.sql.types
        data = bytearray(b"".join(f.bitmap.tobytes() for f in files))
        array = expressions.UnsafeArrayData.fromPrimitiveArray(data)
        literal = expressions.Literal(array, types.ArrayType(types.DataType.fromDDL("tinyint"), False))
        bits = Column(jvm.org.apache.spark.sql.classic.ExpressionUtils.column(literal))
    except Exception as exc:  # no classic session here: fall back to the join
        logger.debug("read_native: no inline deletion mask (%s); using the broadcast join", exc)
        return None
    size, name, row = F.col("_metadata.file_size"), F.col("_metadata.file_name"), F.col("_metadata.row_index")
    shared = {f.size for f in files if sum(g.size == f.size for g in files) > 1}
    offset: Any = None
    start = 0
    for f in files:
        # equal sizes (identical appends) are told apart by name, a string compare per row
        cond = (size == f.size) & (name == f.name) if f.size in shared else size == f.size
        offset = F.when(cond, F.lit(start)) if offset is None else offset.when(cond, F.lit(start))
        start += f.bitmap.nbytes
    byte = F.element_at(bits, offset + F.shiftright(row, 3).cast("int") + 1).cast("int")
    live = F.call_function("shiftright", byte, row.bitwiseAND(7).cast("int")).bitwiseAND(1) == 0
    return Mask(live=live)


def _join_mask(spark: Any, files: Sequence[FileBits]) -> Mask:
    """One row per file (size, maybe name, bitmap as longs) for a broadcast left join."""
    build = {
        _KEY: pa.array([f.size for f in files], pa.int64()),
        _BITS: pa.array([f.bitmap for f in files], pa.list_(pa.int64())),
    }
    join_on = [_KEY]
    if len({f.size for f in files}) < len(files):
        build[_NAME] = pa.array([f.name for f in files], pa.string())
        join_on.append(_NAME)
    return Mask(deletes=spark.createDataFrame(pa.table(build)), join_on=tuple(join_on))


def unused_name(base: str, names: Sequence[str]) -> str:
    taken = {n.lower() for n in names}
    while base.lower() in taken:
        base += "_"
    return base


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
