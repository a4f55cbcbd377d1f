"""Interop cases: DuckDB over ``TableScan.to_reader()`` against DuckDB over the Parquet
files themselves, pyiceberg reading an Iceberg export against ``Table.scan``, and the bytes
an export writes against the table's data bytes (exports write metadata only)."""

from __future__ import annotations

import shutil
import time

from .common import CaseResult, System, dir_bytes, log, measure
from .data import Built

# TPC-H Q1's shape: one scan of lineitem, a filter, a grouped aggregate over seven columns.
Q1_COLUMNS = ["l_returnflag", "l_linestatus", "l_quantity", "l_extendedprice", "l_discount", "l_tax", "l_shipdate"]
Q1 = """
SELECT l_returnflag, l_linestatus, sum(l_quantity) AS qty, sum(l_extendedprice) AS base,
       sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS charge, avg(l_discount) AS disc, count(*) AS n
FROM {source} WHERE l_shipdate <= DATE '1998-09-02' GROUP BY 1, 2 ORDER BY 1, 2
"""


def run(built: Built, *, repeat: int) -> list[CaseResult]:
    import duckdb
    from pyiceberg.table import StaticTable

    from mvtable.connector import Table

    out: list[CaseResult] = []
    rows_after = built.rows - built.deleted10
    files = ", ".join(f"'{f}'" for f in built.native_files)

    def duckdb_reader() -> int:
        con = duckdb.connect()
        con.register("lineitem", Table(str(built.mv_del10)).scan(columns=Q1_COLUMNS).to_reader(dictionary_strings=True))
        return sum(r[-1] for r in con.sql(Q1.format(source="lineitem")).fetchall())

    def duckdb_relation() -> int:
        con = duckdb.connect()
        scan = Table(str(built.mv_del10)).scan(columns=Q1_COLUMNS)
        con.register("lineitem", scan.to_duckdb(con))
        try:
            return sum(r[-1] for r in con.sql(Q1.format(source="lineitem")).fetchall())
        finally:
            scan.release()

    def duckdb_parquet() -> int:
        con = duckdb.connect()
        return sum(r[-1] for r in con.sql(Q1.format(source=f"read_parquet([{files}])")).fetchall())

    expected_q1 = _q1_rows(built, duckdb)
    in_memory = Table(str(built.mv_del10)).scan(columns=Q1_COLUMNS).to_arrow()

    def duckdb_arrow_floor() -> int:
        """(diagnostic) the same rows already decoded in memory: what DuckDB's Arrow scan
        alone costs, the floor of any Arrow-stream route."""
        con = duckdb.connect()
        con.register("lineitem", in_memory)
        return sum(r[-1] for r in con.sql(Q1.format(source="lineitem")).fetchall())

    log("  interop: DuckDB Q1 over to_reader() (10% deleted) vs over the Parquet files (no deletes)")
    systems = {
        "duckdb_parquet": System(duckdb_parquet),
        "duckdb_to_reader_del10": System(duckdb_reader),
        "duckdb_to_duckdb_del10": System(duckdb_relation),
        "duckdb_arrow_floor": System(duckdb_arrow_floor),
    }
    t = measure(systems, repeat=repeat, log=log)
    got = t["duckdb_to_reader_del10"].result
    out.append(
        CaseResult(
            "duckdb_to_reader_del10",
            "interop",
            "DuckDB Q1 over Table.scan().to_reader(), 10% deleted",
            t["duckdb_to_reader_del10"].median,
            "DuckDB Q1 over read_parquet (no deletes)",
            t["duckdb_parquet"].median,
            target=1.3,
            target_text="≤ 1.3×",
            systems={k: v.to_json() for k, v in t.items()},
            details={"arrow_floor_s": t["duckdb_arrow_floor"].median},
            check="ok" if got in (None, expected_q1) else f"{got} rows counted, expected {expected_q1}",
        )
    )

    got = t["duckdb_to_duckdb_del10"].result
    out.append(
        CaseResult(
            "duckdb_to_duckdb_del10",
            "interop",
            "DuckDB Q1 over Table.scan().to_duckdb() (DuckDB reads the segments), 10% deleted",
            t["duckdb_to_duckdb_del10"].median,
            "DuckDB Q1 over read_parquet (no deletes)",
            t["duckdb_parquet"].median,
            target=1.3,
            target_text="≤ 1.3×",
            systems={k: v.to_json() for k, v in t.items()},
            check="ok" if got in (None, expected_q1) else f"{got} rows counted, expected {expected_q1}",
        )
    )

    # an export of the 10%-deleted table in place (a copy elsewhere would be a moved table,
    # whose DV footers name the old location); its metadata is removed again at the end
    table = Table(str(built.mv_del10))
    data_bytes = dir_bytes(built.mv_del10 / "data")
    start = time.perf_counter()
    iceberg = table.export_iceberg(all_versions=True)
    iceberg_s = time.perf_counter() - start
    start = time.perf_counter()
    delta = table.export_delta(all_versions=True)
    delta_s = time.perf_counter() - start
    log(f"  export: iceberg {iceberg.bytes_written} B in {iceberg_s:.2f} s, delta {delta.bytes_written} B in {delta_s:.2f} s")
    for name, result, seconds in (("iceberg", iceberg, iceberg_s), ("delta", delta, delta_s)):
        out.append(
            CaseResult(
                f"export_bytes_{name}",
                "interop",
                f"bytes an {name} export of every version writes (metadata only)",
                result.bytes_written / 2**20,
                "table data bytes",
                data_bytes / 2**20,
                unit="MiB",
                details={
                    "bytes_written": result.bytes_written,
                    "data_bytes": data_bytes,
                    "versions": len(result.versions),
                    "copied_dv_bytes": result.copied_dv_bytes,
                    "export_s": seconds,
                },
            )
        )

    log("  interop: pyiceberg reading the Iceberg export vs Table.scan().to_arrow(), 10% deleted")
    t = measure(
        {
            "mvtable_scan": System(lambda: table.scan().to_arrow().num_rows),
            "pyiceberg_export": System(lambda: StaticTable.from_metadata(iceberg.metadata).scan().to_arrow().num_rows),
        },
        repeat=repeat,
        log=log,
    )
    for folder in ("metadata", "_delta_log"):
        shutil.rmtree(built.mv_del10 / folder, ignore_errors=True)
    got = t["pyiceberg_export"].result
    out.append(
        CaseResult(
            "pyiceberg_export_del10",
            "interop",
            "Table.scan().to_arrow() vs pyiceberg on the export, 10% deleted",
            t["mvtable_scan"].median,
            "pyiceberg StaticTable scan of the export",
            t["pyiceberg_export"].median,
            systems={k: v.to_json() for k, v in t.items()},
            check="ok" if got in (None, rows_after) else f"pyiceberg read {got} rows, expected {rows_after}",
        )
    )
    return out


def _q1_rows(built: Built, duckdb) -> int:
    """Rows Q1 counts once deletes apply: the query over ``to_arrow()`` (the reference read)."""
    from mvtable.connector import Table

    reference = Table(str(built.mv_del10)).scan(columns=Q1_COLUMNS).to_arrow()
    con = duckdb.connect()
    con.register("reference", reference)
    return sum(r[-1] for r in con.sql(Q1.format(source="reference")).fetchall())
