"""The checks' own share of a read's work, measured inside the read instead of by difference.

``benchmarks.checksums`` times each read with the checks on and off. That difference is
the honest total, but a 0.1–1 s read on a shared 2-core machine moves by a few percent from
run to run, as much as the checks cost, so two runs of the same A/B can land on either side
of a 3% target. This module measures the same cost a second way, with an error far below
that:

* ``Table.scan`` (Python): every page CRC is computed in ``page_checks.verify_pages``. It
  is wrapped to add up the CPU time of its own thread while it runs
  (``time.thread_time``, exact, whatever the other threads do), set against the CPU time
  of the whole process over the same reads.
* Spark (``create_view``): parquet-mr checks a page in ``ParquetFileReader.Chunk.verifyCrc``:
  ``java.util.zip.CRC32.update`` over the page's bytes, already in memory, and nothing else.
  A sampling profiler cannot see it (Java Flight Recorder drops every sample taken inside the
  CRC32 intrinsic: a query that spends most of its time in ``crc32()`` shows none), so the
  check is timed where it runs instead: ``CRC32.update`` over a buffer in the Spark JVM gives
  its seconds per byte, times the bytes of every column chunk the query reads (from the
  segments' footers, every row group: an upper bound, Spark skips some), set against the
  CPU time of the checked query (this process's and the JVM's).

A share ``s`` of the checked read's work is a cost of ``s / (1 - s)`` over the unchecked
read: what the 3% target is about.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["CheckShare", "chunk_bytes", "jvm_check_share", "jvm_crc_seconds_per_byte", "python_check_share"]


@dataclass(frozen=True)
class CheckShare:
    """How much of a read's work the checks were, over ``rounds`` reads."""

    rounds: int
    check: float  # CPU seconds inside the checks
    total: float  # CPU seconds of all the read's work
    unit: str

    @property
    def share(self) -> float:
        return self.check / self.total if self.total else 0.0

    @property
    def cost(self) -> float:
        """The checks' cost over the same read without them (``0.02`` = 2%)."""
        return self.check / (self.total - self.check) if self.total > self.check else float("inf")

    def to_json(self) -> dict[str, Any]:
        return {
            "rounds": self.rounds,
            "check": self.check,
            "total": self.total,
            "unit": self.unit,
            "share": self.share,
            "cost": self.cost,
        }


def python_check_share(read: Callable[[], object], *, rounds: int, cpu_clock: Callable[[], float]) -> CheckShare:
    """The CPU time inside ``page_checks.verify_pages`` against the process's over ``rounds`` reads."""
    from mvtable.connector import page_checks

    spent: list[float] = []
    verify = page_checks.verify_pages

    def timed(*args: Any, **kwargs: Any) -> None:
        start = time.thread_time()
        try:
            verify(*args, **kwargs)
        finally:
            spent.append(time.thread_time() - start)

    page_checks.verify_pages = timed  # read_checked looks it up when it calls it
    try:
        before = cpu_clock()
        for _ in range(rounds):
            read()
        total = cpu_clock() - before
    finally:
        page_checks.verify_pages = verify
    if not spent:
        raise RuntimeError("no page was checked: the read did not go through page_checks.read_checked")
    return CheckShare(rounds=rounds, check=sum(spent), total=total, unit="CPU s")


def jvm_crc_seconds_per_byte(spark: Any, *, megabytes: int = 256, rounds: int = 5) -> float:
    """What ``java.util.zip.CRC32`` costs per byte in the Spark JVM (the best of ``rounds``,
    each with its Py4J call), on a direct buffer as parquet-mr's pages are."""
    jvm = spark.sparkContext._jvm
    buffer = jvm.java.nio.ByteBuffer.allocateDirect(megabytes << 20)
    crc = jvm.java.util.zip.CRC32()
    best = float("inf")
    for _ in range(rounds + 1):  # the first call compiles
        buffer.rewind()
        start = time.perf_counter()
        crc.update(buffer)
        best = min(best, time.perf_counter() - start)
    return best / (megabytes << 20)


def chunk_bytes(table_path: str, columns: list[str]) -> int:
    """The compressed bytes of every column chunk of ``columns`` in the table's visible
    segments (dictionary pages included): what a full read of those columns checks."""
    import pyarrow.parquet as pq

    from mvtable.connector import Table
    from mvtable.connector.page_checks import chunk_ranges

    total = 0
    for seg in Table.open(table_path).snapshot().visible_segments():
        metadata = pq.ParquetFile(f"{table_path}/{seg.file.path}").metadata
        total += sum(length for _, length, _ in chunk_ranges(metadata, range(metadata.num_row_groups), columns))
    return total


def jvm_check_share(*, checked_bytes: int, seconds_per_byte: float, checked_cpu: float, rounds: int) -> CheckShare:
    """The page checks' CPU time in one checked query (``checked_cpu``, the median of ``rounds``)."""
    return CheckShare(rounds=rounds, check=checked_bytes * seconds_per_byte, total=checked_cpu, unit="CPU s")
