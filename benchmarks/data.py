"""TPC-H lineitem: generate it with ``tpcgen-cli``, normalise it, and build every table
the cases read — the mvtable tables, and the same rows in each peer format.

Layout of the work folder (``<data-dir>/sf<SF>/``)::

    tpch/lineitem.parquet   tpcgen-cli output (kept between runs: generation is the same)
    mv_base/                mvtable table, no deletes
    mv_del10/               hard-link copy of mv_base + 10% deleted by predicate (DVs)
    delta_base/ delta_del10/  deltalake tables (delta-rs deletes rewrite files)
    lance_base/ lance_del10/  Lance datasets (deletion files)
    iceberg/                pyiceberg SqlCatalog (sqlite) warehouse: tables base, del10
    scratch/                per-repeat copies for the write/delete cases

"Native Parquet" reads the data files of ``mv_base`` itself (the same files, the same
row groups), so the only difference between the native and mvtable numbers is the
reader.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .common import PeerUnavailable, dir_bytes, hardlink_copy, log, tpcgen_cli


# The 10% that every system deletes: l_partkey is uniform on [1, 200000*SF] and
# independent of the file order, so the deletes land in every row group. The 1% delete
# case uses l_suppkey (uniform on [1, 10000*SF]) for the same reason.
def del10_bound(sf: float) -> int:
    return max(1, round(20000 * sf))


def del1_bound(sf: float) -> int:
    return max(1, round(100 * sf))


def del10_expr(sf: float) -> pc.Expression:
    return pc.field("l_partkey") <= del10_bound(sf)


def del10_sql(sf: float) -> str:
    return f"l_partkey <= {del10_bound(sf)}"


def del1_expr(sf: float) -> pc.Expression:
    return pc.field("l_suppkey") <= del1_bound(sf)


def del1_sql(sf: float) -> str:
    return f"l_suppkey <= {del1_bound(sf)}"


def sf_label(sf: float) -> str:
    return f"{sf:g}".replace(".", "_")


def generate(sf: float, out_dir: Path) -> Path:
    """``tpcgen-cli tpch parquet -s SF --tables=lineitem`` (cached: same SF, same rows)."""
    target = out_dir / "lineitem.parquet"
    if target.exists():
        return target
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out_dir / "tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    cmd = [tpcgen_cli(), "tpch", "parquet", "-s", f"{sf:g}", "--tables=lineitem", f"--output-dir={tmp}", "-q"]
    log(f"  generating: {' '.join(cmd)}")
    start = time.perf_counter()
    subprocess.run(cmd, check=True)
    (tmp / "lineitem.parquet").rename(target)
    shutil.rmtree(tmp, ignore_errors=True)
    log(f"  generated {target} in {time.perf_counter() - start:.1f} s")
    return target


def generate_tables(sf: float, out_dir: Path, names: list[str]) -> dict[str, Path]:
    """Other TPC-H tables (``orders``, ``customer``, ``part``…) beside lineitem, cached."""
    missing = [n for n in names if not (out_dir / f"{n}.parquet").exists()]
    if missing:
        tmp = out_dir / "tmp-tables"
        shutil.rmtree(tmp, ignore_errors=True)
        cmd = [tpcgen_cli(), "tpch", "parquet", "-s", f"{sf:g}", f"--tables={','.join(missing)}", f"--output-dir={tmp}", "-q"]
        log(f"  generating: {' '.join(cmd)}")
        subprocess.run(cmd, check=True)
        for n in missing:
            (tmp / f"{n}.parquet").rename(out_dir / f"{n}.parquet")
        shutil.rmtree(tmp, ignore_errors=True)
    return {n: out_dir / f"{n}.parquet" for n in names}


def normalise(raw: pa.Table) -> pa.Table:
    """Plain types every system reads alike: ``string_view`` → ``string``, no field-id
    metadata, nullable columns (as Spark writes them). Sorted by ``l_shipdate`` so that a
    one-month filter can prune row groups (by Parquet footers for native Spark, by the log's
    statistics for mvtable); every case reads these same sorted rows."""
    fields = []
    for f in raw.schema:
        t = pa.string() if pa.types.is_string_view(f.type) else f.type
        fields.append(pa.field(f.name, t, nullable=True))
    schema = pa.schema(fields)
    table = raw.cast(schema).replace_schema_metadata(None)
    return table.sort_by([("l_shipdate", "ascending"), ("l_orderkey", "ascending"), ("l_linenumber", "ascending")])


def ipc_cache(path: Path) -> Path:
    """The normalised rows as uncompressed Arrow IPC (memory-mapped by the Spark floor source)."""
    return path.with_name("lineitem.normalised.arrow")


def load_lineitem(path: Path) -> pa.Table:
    """The normalised table, cached next to the generated file (decoding and sorting take
    longer than reading it back): as lz4 Parquet for loading — Parquet reads allocate fresh,
    aligned buffers, whereas IPC buffers are only 8-byte aligned and Rust readers (lance)
    panic on unaligned decimal128 — and as Arrow IPC for the Spark ingest-floor source."""
    cache = path.with_name("lineitem.normalised.parquet")
    ipc = ipc_cache(path)
    if cache.exists() and ipc.exists() and min(cache.stat().st_mtime, ipc.stat().st_mtime) >= path.stat().st_mtime:
        return pq.read_table(cache)
    table = normalise(pq.read_table(path))
    tmp = cache.with_suffix(".tmp")
    pq.write_table(table, tmp, compression="lz4", row_group_size=1 << 20)
    tmp.rename(cache)
    tmp = ipc.with_suffix(".tmp")
    with pa.OSFile(str(tmp), "wb") as f, pa.ipc.new_file(f, table.schema) as w:
        w.write_table(table, max_chunksize=1 << 20)
    tmp.rename(ipc)
    return table


@dataclass
class Built:
    """Everything the cases need to find the tables."""

    root: Path
    sf: float
    rows: int
    row_group_rows: int
    segment_rows: int
    mv_base: Path
    mv_del10: Path
    native_files: list[str]
    deleted10: int
    build_s: dict[str, float] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)
    peers: dict[str, Peer] = field(default_factory=dict)
    ipc_path: Path | None = None  # the same rows, uncompressed Arrow IPC (for the Spark ingest floor)

    @property
    def scratch(self) -> Path:
        return self.root / "scratch"


def build_mvtable(data: pa.Table, root: Path, *, sf: float, row_group_rows: int, segment_rows: int) -> Built:
    from mvtable.connector import Table

    mv_base, mv_del10 = root / "mv_base", root / "mv_del10"
    for p in (mv_base, mv_del10):
        shutil.rmtree(p, ignore_errors=True)
    times: dict[str, float] = {}
    start = time.perf_counter()
    t = Table.create(str(mv_base), schema=data.schema, properties={"rowGroupRows": str(row_group_rows)})
    for off in range(0, data.num_rows, segment_rows):
        t.append(data.slice(off, segment_rows))
    times["mvtable_append_all"] = time.perf_counter() - start
    snap = t.snapshot()
    files = [str(mv_base / seg.file.path) for seg in snap.visible_segments()]
    log(
        f"  mvtable: {data.num_rows} rows in {len(files)} segments, {sum(len(s.file.row_groups) for s in snap.visible_segments())} row groups ({times['mvtable_append_all']:.1f} s)"
    )

    hardlink_copy(mv_base, mv_del10)
    start = time.perf_counter()
    deleted = Table(str(mv_del10)).delete(del10_expr(sf)).deleted_rows
    times["mvtable_delete10"] = time.perf_counter() - start
    log(
        f"  mvtable: deleted {deleted} rows ({deleted / data.num_rows:.1%}) with {del10_sql(sf)} in {times['mvtable_delete10']:.1f} s"
    )
    built = Built(root, sf, data.num_rows, row_group_rows, segment_rows, mv_base, mv_del10, files, deleted, times)
    built.sizes["mvtable_data_bytes"] = sum(os.path.getsize(f) for f in files)
    return built


# --------------------------------------------------------------------------- peers
@dataclass
class Peer:
    """One peer format: how to copy a table, read it whole, delete from it, overwrite it
    and append to it. Every method works on a *handle* (a path, or a table name for
    pyiceberg) so that write/delete repeats can run on fresh copies."""

    name: str
    base: Any = None
    del10: Any = None
    error: str | None = None  # set when the peer could not even be built
    build_s: float = 0.0
    copy: Callable[[Any, str], Any] | None = None
    read: Callable[[Any], pa.Table] | None = None
    delete: Callable[[Any, str, pc.Expression], int] | None = None
    overwrite: Callable[[Any, pa.Table], None] | None = None
    append: Callable[[Any, pa.Table], None] | None = None
    notes: list[str] = field(default_factory=list)

    def need(self) -> None:
        if self.error:
            raise PeerUnavailable(self.error)


def build_peers(data: pa.Table, built: Built, names: list[str]) -> dict[str, Peer]:
    out = {}
    for name in names:
        builder = {"deltalake": _delta, "pyiceberg": _iceberg, "lance": _lance}[name]
        start = time.perf_counter()
        try:
            peer = builder(data, built)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:
            peer = Peer(name, error=f"could not build: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
            log(f"  {name}: n/a ({peer.error})")
        peer.build_s = time.perf_counter() - start
        if not peer.error:
            log(f"  {name}: built base + 10% deleted in {peer.build_s:.1f} s")
        out[name] = peer
    return out


def _delta(data: pa.Table, built: Built) -> Peer:
    from deltalake import DeltaTable, write_deltalake

    base, del10 = built.root / "delta_base", built.root / "delta_del10"
    for p in (base, del10):
        shutil.rmtree(p, ignore_errors=True)
    write_deltalake(str(base), data)
    hardlink_copy(base, del10)
    DeltaTable(str(del10)).delete(del10_sql(built.sf))

    def copy(handle: Path, tag: str) -> Path:
        return hardlink_copy(handle, built.scratch / f"delta_{tag}")

    def delete(handle: Path, sql: str, expr: pc.Expression) -> int:
        return int(DeltaTable(str(handle)).delete(sql)["num_deleted_rows"])

    return Peer(
        "deltalake",
        base,
        del10,
        copy=copy,
        read=lambda h: DeltaTable(str(h)).to_pyarrow_table(),
        delete=delete,
        overwrite=lambda h, d: write_deltalake(str(h), d, mode="overwrite"),
        append=lambda h, d: write_deltalake(str(h), d, mode="append"),
        notes=["delta-rs deletes are copy-on-write: it rewrites every file holding a deleted row (no deletion vectors)"],
    )


def _lance(data: pa.Table, built: Built) -> Peer:
    import lance

    base, del10 = built.root / "lance_base", built.root / "lance_del10"
    for p in (base, del10):
        shutil.rmtree(p, ignore_errors=True)
    lance.write_dataset(data, str(base))
    hardlink_copy(base, del10)
    lance.dataset(str(del10)).delete(del10_sql(built.sf))

    def copy(handle: Path, tag: str) -> Path:
        return hardlink_copy(handle, built.scratch / f"lance_{tag}")

    def delete(handle: Path, sql: str, expr: pc.Expression) -> int:
        ds = lance.dataset(str(handle))
        before = ds.count_rows()
        ds.delete(sql)
        return before - lance.dataset(str(handle)).count_rows()

    return Peer(
        "lance",
        base,
        del10,
        copy=copy,
        read=lambda h: lance.dataset(str(h)).to_table(),
        delete=delete,
        overwrite=lambda h, d: lance.write_dataset(d, str(h), mode="overwrite"),
        append=lambda h, d: lance.write_dataset(d, str(h), mode="append"),
        notes=["Lance deletes write deletion files (merge-on-read), like mvtable"],
    )


def _iceberg(data: pa.Table, built: Built) -> Peer:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.expressions import LessThanOrEqual

    wh = built.root / "iceberg"
    shutil.rmtree(wh, ignore_errors=True)
    wh.mkdir(parents=True)
    catalog = SqlCatalog("bench", uri=f"sqlite:///{wh}/catalog.db", warehouse=f"file://{wh}")
    catalog.create_namespace("bench")
    tbl = catalog.create_table("bench.base", schema=data.schema)
    tbl.append(data)
    counter = {"n": 0}

    def copy(handle: str, tag: str) -> str:
        # Iceberg metadata names absolute file paths, so a folder copy would not be a copy:
        # register another table on the same metadata file instead (writes only add files).
        counter["n"] += 1
        name = f"bench.{tag}_{counter['n']}"
        catalog.register_table(name, catalog.load_table(handle).metadata_location)
        return name

    def delete(handle: str, sql: str, expr: pc.Expression) -> int:
        t = catalog.load_table(handle)
        before = _iceberg_rows(t)
        column, bound = _le_bound(expr)
        t.delete(LessThanOrEqual(column, bound))
        return before - _iceberg_rows(catalog.load_table(handle))

    del10 = copy("bench.base", "del10")
    delete(del10, del10_sql(built.sf), del10_expr(built.sf))
    return Peer(
        "pyiceberg",
        "bench.base",
        del10,
        copy=copy,
        read=lambda h: catalog.load_table(h).scan().to_arrow(),
        delete=delete,
        overwrite=lambda h, d: catalog.load_table(h).overwrite(d),
        append=lambda h, d: catalog.load_table(h).append(d),
        notes=[
            "pyiceberg deletes are copy-on-write (it writes no position/DV deletes): it rewrites every data file holding a deleted row"
        ],
    )


def _iceberg_rows(t: Any) -> int:
    summary = t.current_snapshot().summary if t.current_snapshot() else None
    return (
        int(summary["total-records"])
        if summary and "total-records" in summary.additional_properties
        else t.scan().to_arrow().num_rows
    )


def _le_bound(expr: pc.Expression) -> tuple[str, int]:
    # "(l_partkey <= 20000)" -> ("l_partkey", 20000): the only predicate shape used here
    text = str(expr).strip("()")
    column, _, bound = text.partition(" <= ")
    return column.strip(), int(bound)


def describe_sizes(built: Built) -> dict[str, int]:
    sizes = dict(built.sizes)
    for name in ("delta_base", "lance_base", "iceberg"):
        p = built.root / name
        if p.exists():
            sizes[f"{name}_bytes"] = dir_bytes(p)
    return sizes
