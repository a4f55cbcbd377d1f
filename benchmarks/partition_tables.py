"""The day-partitioned lineitem of every system in ``benchmarks.partitions``, and replacing one day in each.

Every system holds the same visible rows: lineitem with the usual 10% deleted
(``data.del10_expr``), partitioned by the ship day:

* ``mvtable``: ``Table.create(…, partition_by=["day(l_shipdate)"])``, one append, the 10% deleted
  by predicate (deletion vectors);
* ``deltalake``: ``write_deltalake(…, partition_by=["l_shipdate"])`` (Delta has no transforms:
  ``l_shipdate`` is a date, so identity on it is one partition per day), then delta-rs's delete
  (copy-on-write);
* ``pyiceberg``: a SqlCatalog (sqlite) table with the spec ``day(l_shipdate)``, one append, then
  its delete (copy-on-write);
* ``lance``: not partitioned (Lance has no partitioning), the 10% deleted (deletion files).

A one-day replace is timed on a fresh copy of each (hard links; for pyiceberg another catalog
entry on the same metadata), and traced once more in a child process under ``strace`` to count
the data files it opens (``traced_replace``).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from . import data
from .common import hardlink_copy, log

PARTITION_BY = ["day(l_shipdate)"]
SYSTEMS = ("mvtable", "deltalake", "pyiceberg", "lance")
ICEBERG_PARTITION_NAME = "l_shipdate_day"


class PartitionApiMissing(RuntimeError):
    """mvtable on this checkout has no partitioned tables (issue 30's API): the mvtable cases cannot run."""


def day_filter(day: dt.date) -> pc.Expression:
    return pc.field("l_shipdate") == pa.scalar(day, pa.date32())


def day_sql(day: dt.date) -> str:
    return f"l_shipdate = '{day.isoformat()}'"


def refreshed(rows: pa.Table) -> pa.Table:
    """A day's new version: the same rows with ``l_comment = 'refreshed'`` (so the check sees it landed)."""
    i = rows.schema.get_field_index("l_comment")
    return rows.set_column(i, rows.schema.field(i), pa.array(["refreshed"] * rows.num_rows, pa.string()))


# --------------------------------------------------------------------------- mvtable
def mvtable_create(uri: str, schema: pa.Schema, *, partition_by: list[str], properties: dict[str, str]) -> Any:
    """``Table.create(uri, schema=…, partition_by=…)``, or ``PartitionApiMissing`` naming the call
    when this mvtable does not know ``partition_by`` yet."""
    from mvtable.connector import Table

    try:
        return Table.create(uri, schema=schema, partition_by=partition_by, properties=properties)
    except TypeError as exc:
        if "partition_by" not in str(exc):
            raise
        raise PartitionApiMissing(
            f"Table.create(uri, schema=…, partition_by={partition_by!r}) is not supported by this mvtable "
            f"({exc}); partitioned tables (issue 30) are not on this checkout yet"
        ) from None


def mvtable_replace(handle: str, rows: pa.Table, day: dt.date) -> None:
    """The consistent push of one day: ``overwrite(rows, consistent_push=True, replace_where=<that day>)``."""
    from mvtable.connector import Table

    try:
        Table(handle).overwrite(rows, consistent_push=True, replace_where=day_filter(day))
    except TypeError as exc:
        if "replace_where" not in str(exc):
            raise
        raise PartitionApiMissing(
            f"Table.overwrite(data, consistent_push=True, replace_where=<expression>) is not supported by this mvtable "
            f"({exc}); scoped consistent pushes (issue 30) are not on this checkout yet"
        ) from None


def mvtable_day(handle: str, day: dt.date) -> tuple[pa.Table, int]:
    from mvtable.connector import Table

    t = Table(handle)
    return t.scan(filter=day_filter(day)).to_arrow(), t.scan(columns=["l_orderkey"]).to_arrow().num_rows


def build_mvtable(lineitem: pa.Table, root: Path, *, sf: float, row_group_rows: int) -> Path:
    """The partitioned mvtable table, 10% deleted by predicate."""
    from mvtable.connector import Table

    path = root / "mvtable"
    shutil.rmtree(path, ignore_errors=True)
    t = mvtable_create(str(path), lineitem.schema, partition_by=PARTITION_BY, properties={"rowGroupRows": str(row_group_rows)})
    t.append(lineitem)
    deleted = Table(str(path)).delete(data.del10_expr(sf)).deleted_rows
    segments = len(Table(str(path)).snapshot().visible_segments())
    log(f"  mvtable: {lineitem.num_rows} rows in {segments} segments, {deleted} deleted ({data.del10_sql(sf)})")
    return path


# --------------------------------------------------------------------------- peers
def build_delta(lineitem: pa.Table, root: Path, *, sf: float) -> Path:
    from deltalake import DeltaTable, write_deltalake

    path = root / "delta"
    shutil.rmtree(path, ignore_errors=True)
    write_deltalake(str(path), lineitem, partition_by=["l_shipdate"])
    DeltaTable(str(path)).delete(data.del10_sql(sf))
    return path


def delta_replace(handle: str, rows: pa.Table, day: dt.date) -> None:
    from deltalake import write_deltalake

    write_deltalake(handle, rows, mode="overwrite", predicate=day_sql(day))


def delta_day(handle: str, day: dt.date) -> tuple[pa.Table, int]:
    from deltalake import DeltaTable

    t = DeltaTable(handle)
    return t.to_pyarrow_table(filters=[("l_shipdate", "=", day)]), t.to_pyarrow_dataset().count_rows()


@dataclass
class Iceberg:
    """The Iceberg warehouse: one SqlCatalog (sqlite) in ``warehouse``, the table ``bench.base``."""

    warehouse: Path
    counter: list[int] = field(default_factory=lambda: [0])

    def catalog(self) -> Any:
        from pyiceberg.catalog.sql import SqlCatalog

        return SqlCatalog("bench", uri=f"sqlite:///{self.warehouse}/catalog.db", warehouse=f"file://{self.warehouse}")

    def copy(self, handle: str) -> str:
        # Iceberg metadata names absolute paths, so a folder copy is no copy: another catalog
        # entry on the same metadata file is (writes only add files)
        self.counter[0] += 1
        catalog = self.catalog()
        name = f"bench.copy_{self.counter[0]}"
        catalog.register_table(name, catalog.load_table(handle).metadata_location)
        return name


def build_iceberg(lineitem: pa.Table, root: Path, *, sf: float) -> Iceberg:
    from pyiceberg.expressions import LessThanOrEqual
    from pyiceberg.transforms import DayTransform

    wh = root / "iceberg"
    shutil.rmtree(wh, ignore_errors=True)
    wh.mkdir(parents=True)
    ice = Iceberg(wh)
    catalog = ice.catalog()
    catalog.create_namespace("bench")
    tbl = catalog.create_table("bench.base", schema=lineitem.schema)
    with tbl.update_spec() as spec:
        spec.add_field("l_shipdate", DayTransform(), ICEBERG_PARTITION_NAME)
    tbl = catalog.load_table("bench.base")
    tbl.append(lineitem)
    tbl.delete(LessThanOrEqual("l_partkey", data.del10_bound(sf)))
    return ice


def iceberg_replace(ice: Iceberg, handle: str, rows: pa.Table, day: dt.date) -> None:
    from pyiceberg.expressions import EqualTo

    ice.catalog().load_table(handle).overwrite(rows, overwrite_filter=EqualTo("l_shipdate", day.isoformat()))


def iceberg_day(ice: Iceberg, handle: str, day: dt.date) -> tuple[pa.Table, int]:
    from pyiceberg.expressions import EqualTo

    t = ice.catalog().load_table(handle)
    return t.scan(row_filter=EqualTo("l_shipdate", day.isoformat())).to_arrow(), t.scan(
        selected_fields=("l_orderkey",)
    ).to_arrow().num_rows


def iceberg_writable_transforms(root: Path) -> dict[str, str]:
    """Which partition transforms pyiceberg can *write* here: each on a tiny table, ``ok`` or the error.

    pyiceberg writes identity by itself and every other transform through ``pyiceberg-core``
    (its Rust transforms); without that package only identity works."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.transforms import parse_transform

    wh = root / "iceberg-transforms"
    shutil.rmtree(wh, ignore_errors=True)
    wh.mkdir(parents=True)
    catalog = SqlCatalog("probe", uri=f"sqlite:///{wh}/catalog.db", warehouse=f"file://{wh}")
    catalog.create_namespace("probe")
    rows = pa.table(
        {
            "i": pa.array([1, 2, None], pa.int64()),
            "s": pa.array(["alpha", "beta", None], pa.string()),
            "d": pa.array([dt.date(2024, 1, 31), dt.date(2025, 6, 1), None], pa.date32()),
            "ts": pa.array([dt.datetime(2024, 1, 31, 5), dt.datetime(2025, 6, 1, 23), None], pa.timestamp("us")),
        }
    )
    out = {}
    for n, (text, column) in enumerate(
        [
            ("identity", "i"),
            ("year", "d"),
            ("month", "d"),
            ("day", "d"),
            ("hour", "ts"),
            ("bucket[16]", "i"),
            ("truncate[4]", "s"),
        ]
    ):
        try:
            tbl = catalog.create_table(f"probe.t{n}", schema=rows.schema)
            with tbl.update_spec() as spec:
                spec.add_field(column, parse_transform(text), f"{column}_part")
            tbl = catalog.load_table(f"probe.t{n}")
            tbl.append(rows)
            back = tbl.scan().to_arrow().num_rows
            out[text] = "ok" if back == rows.num_rows else f"wrote {back} of {rows.num_rows} rows"
        except Exception as exc:
            out[text] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    shutil.rmtree(wh, ignore_errors=True)
    return out


def build_lance(lineitem: pa.Table, root: Path, *, sf: float) -> Path:
    import lance

    path = root / "lance"
    shutil.rmtree(path, ignore_errors=True)
    lance.write_dataset(lineitem, str(path))
    lance.dataset(str(path)).delete(data.del10_sql(sf))
    return path


def lance_replace(handle: str, rows: pa.Table, day: dt.date) -> None:
    """Lance has neither partitions nor a replace: delete the day, then append it (two commits)."""
    import lance

    lance.dataset(handle).delete(f"l_shipdate = date '{day.isoformat()}'")
    lance.write_dataset(rows, handle, mode="append")


def lance_day(handle: str, day: dt.date) -> tuple[pa.Table, int]:
    import lance

    ds = lance.dataset(handle)
    return ds.to_table(filter=f"l_shipdate = date '{day.isoformat()}'"), ds.count_rows()


# --------------------------------------------------------------------------- one interface
@dataclass
class DaySystem:
    """One system's day-partitioned table: ``base`` (a path, or an Iceberg table name), how to copy
    it, replace a day in a copy, and read a day back."""

    name: str
    base: str
    copy: Callable[[str, str], str]
    replace: Callable[[str, pa.Table, dt.date], None]
    read_day: Callable[[str, dt.date], tuple[pa.Table, int]]
    warehouse: str | None = None  # pyiceberg's
    notes: list[str] = field(default_factory=list)


def build_system(name: str, lineitem: pa.Table, root: Path, *, sf: float, row_group_rows: int) -> DaySystem:
    scratch = root / "scratch"

    def folder_copy(handle: str, tag: str) -> str:
        return str(hardlink_copy(Path(handle), scratch / f"{name}_{tag}"))

    if name == "mvtable":
        path = build_mvtable(lineitem, root, sf=sf, row_group_rows=row_group_rows)
        return DaySystem(name, str(path), folder_copy, mvtable_replace, mvtable_day)
    if name == "deltalake":
        path = build_delta(lineitem, root, sf=sf)
        return DaySystem(
            name,
            str(path),
            folder_copy,
            delta_replace,
            delta_day,
            notes=["partitioned by l_shipdate itself (Delta has no transforms; a date is one partition per day)"],
        )
    if name == "pyiceberg":
        ice = build_iceberg(lineitem, root, sf=sf)
        return DaySystem(
            name,
            "bench.base",
            lambda handle, tag: ice.copy(handle),
            lambda handle, rows, day: iceberg_replace(ice, handle, rows, day),
            lambda handle, day: iceberg_day(ice, handle, day),
            warehouse=str(ice.warehouse),
        )
    if name == "lance":
        path = build_lance(lineitem, root, sf=sf)
        return DaySystem(
            name, str(path), folder_copy, lance_replace, lance_day, notes=["not partitioned: delete the day, then append it"]
        )
    raise ValueError(f"unknown system {name!r}; choose from {', '.join(SYSTEMS)}")


def replace_in(system: str, handle: str, rows: pa.Table, day: dt.date, *, warehouse: str | None) -> None:
    """The replace of ``system`` by name (what the traced child process runs)."""
    if system == "mvtable":
        mvtable_replace(handle, rows, day)
    elif system == "deltalake":
        delta_replace(handle, rows, day)
    elif system == "pyiceberg":
        assert warehouse is not None
        iceberg_replace(Iceberg(Path(warehouse)), handle, rows, day)
    elif system == "lance":
        lance_replace(handle, rows, day)
    else:
        raise ValueError(system)


# --------------------------------------------------------------------------- which files hold which days
def data_files(system: DaySystem, handle: str) -> dict[str, tuple[dt.date, dt.date]]:
    """Every data file of ``handle``'s current version, by absolute path, with the first and last
    ship day it holds. Read from each file itself (its footer statistics, or its rows for Lance),
    not from the table's metadata: the trace is checked against the files' contents."""
    if system.name == "mvtable":
        from mvtable.connector import Table

        paths = [os.path.join(handle, seg.file.path) for seg in Table(handle).snapshot().visible_segments()]
        return {os.path.realpath(p): _parquet_days(p) for p in paths}
    if system.name == "deltalake":
        from deltalake import DeltaTable

        return {_local(p): _parquet_days(p) for p in DeltaTable(handle).file_uris()}
    if system.name == "pyiceberg":
        assert system.warehouse is not None
        tbl = Iceberg(Path(system.warehouse)).catalog().load_table(handle)
        return {_local(task.file.file_path): _parquet_days(task.file.file_path) for task in tbl.scan().plan_files()}
    if system.name == "lance":
        import lance

        out = {}
        ds = lance.dataset(handle)
        for frag in ds.get_fragments():
            days = frag.to_table(columns=["l_shipdate"]).column(0)
            mm = pc.min_max(days).as_py()
            for f in frag.data_files():
                out[os.path.realpath(os.path.join(handle, "data", f.path))] = (mm["min"], mm["max"])
        return out
    raise ValueError(system.name)


def _local(uri: str) -> str:
    return os.path.realpath(uri.removeprefix("file://"))


_PARTITION_IN_PATH = re.compile(r"l_shipdate=(\d{4}-\d{2}-\d{2})")


def _parquet_days(path: str) -> tuple[dt.date, dt.date]:
    path = path.removeprefix("file://")
    md = pq.ParquetFile(path).metadata
    names = md.schema.to_arrow_schema().names
    if "l_shipdate" not in names:  # a Delta file: the partition column lives in the path only
        m = _PARTITION_IN_PATH.search(path)
        if m is None:
            raise ValueError(f"{path}: no l_shipdate column and no l_shipdate=… folder")
        day = dt.date.fromisoformat(m.group(1))
        return day, day
    i = names.index("l_shipdate")
    lows, highs = [], []
    for g in range(md.num_row_groups):
        s = md.row_group(g).column(i).statistics
        if s is None or not s.has_min_max:
            raise ValueError(f"{path}: row group {g} has no l_shipdate statistics")
        lows.append(s.min)
        highs.append(s.max)
    return min(lows), max(highs)


# --------------------------------------------------------------------------- the trace
_OPEN = re.compile(r'^\s*(?:\[pid\s+)?(\d+)\]?\s+(?:open|openat|openat2)\((?:AT_FDCWD|\d+|\d+<[^>]*>), "((?:[^"\\]|\\.)*)"')


def traced_replace(
    system: DaySystem, handle: str, rows_path: Path, day: dt.date, *, files: dict[str, tuple[dt.date, dt.date]], trace_dir: Path
) -> dict[str, Any]:
    """Replace ``day`` in ``handle`` in a child process under ``strace -f`` (every thread's
    ``open``/``openat``: Python, Arrow's C++, Rust alike) and count which of ``files`` (the data
    files before the replace) it opened: of the replaced day, and of other days."""
    strace = shutil.which("strace")
    if strace is None:
        return {"na": "strace is not installed (apt-get install strace): the files opened cannot be traced"}
    trace_dir.mkdir(parents=True, exist_ok=True)
    trace = trace_dir / f"{system.name}.strace"
    spec = {
        "system": system.name,
        "handle": handle,
        "rows": str(rows_path),
        "day": day.isoformat(),
        "warehouse": system.warehouse,
    }
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]), *sys.path])}
    cmd = [strace, "-f", "-qq", "-e", "trace=open,openat,openat2", "-o", str(trace), sys.executable, "-m"]
    cmd += ["benchmarks.partitions", "--child", json.dumps(spec)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(Path(handle).parent) if "/" in handle else None)
    if proc.returncode:
        last = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"
        raise RuntimeError(f"{system.name}: the traced replace failed: {last}")
    opened = set()
    cwd = Path(handle).parent if "/" in handle else Path.cwd()
    for line in trace.read_text(errors="replace").splitlines():
        m = _OPEN.match(line)
        if m:
            p = m.group(2)
            opened.add(os.path.realpath(p if os.path.isabs(p) else os.path.join(cwd, p)))
    same_day = [p for p, (lo, hi) in files.items() if lo <= day <= hi]
    other = [p for p in files if p not in set(same_day)]
    read_same = sorted(p for p in same_day if p in opened)
    read_other = sorted(p for p in other if p in opened)
    trace.unlink(missing_ok=True)
    return {
        "data_files_before": len(files),
        "files_of_the_day": len(same_day),
        "files_of_the_day_read": len(read_same),
        "files_of_other_days": len(other),
        "files_of_other_days_read": len(read_other),
        "examples_of_other_days_read": [os.path.relpath(p, cwd) for p in read_other[:3]],
    }


def child(spec: dict[str, Any]) -> None:
    """The traced child: one replace, nothing else (``python -m benchmarks.partitions --child SPEC``)."""
    rows = pq.read_table(spec["rows"])
    replace_in(spec["system"], spec["handle"], rows, dt.date.fromisoformat(spec["day"]), warehouse=spec["warehouse"])
