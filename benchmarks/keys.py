"""Primary-key benchmarks: ``python -m benchmarks.keys [--sf 0.1] [--repeat 3] [--smoke]``.

1. **Upsert 1% of lineitem** (keyed by ``l_orderkey, l_linenumber``; half the rows replace
   existing keys, half are new) into the whole table: time and peak memory of mvtable's
   ``Table.upsert`` vs ``deltalake`` merge (``when_matched_update_all().when_not_matched_insert_all()``),
   ``pyiceberg`` ``Table.upsert`` and Lance ``merge_insert`` on the same data and machine.
   Each system runs in its own fresh Python process on a fresh copy of its table, so peak
   memory (``ru_maxrss``) is the process's own; ``floor`` is the same process before the
   upsert (imports and the change set loaded).
2. **Keyed append** of 10,000 new rows (1,000 in smoke mode) into keyed tables of growing size,
   vs the same append into a table without a key. The new keys fall inside the key range of
   every segment (TPC-H order keys are sparse: ``l_orderkey`` 8..31 mod 32 never occurs), so
   min/max statistics cannot rule a segment out and every segment's key index is consulted:
   the lookup's worst case short of reading key columns.

Ratios are printed and written to ``benchmarks/results/keys-<timestamp>.json``. Exits non-zero
only when a system answers wrongly or mvtable fails, never for a missed target.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from . import data
from .common import hardlink_copy, log

HERE = Path(__file__).resolve().parent
KEY = ["l_orderkey", "l_linenumber"]
SYSTEMS = ["mvtable", "deltalake", "pyiceberg", "lance"]
SLOW_S = 60.0  # a peer slower than this is timed once


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.keys", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sf", type=float, default=None, help="TPC-H scale factor (default 0.1; 0.01 with --smoke)")
    p.add_argument("--repeat", type=int, default=None, help="timed runs per system (default 3; 1 with --smoke)")
    p.add_argument("--append-repeat", type=int, default=None, help="timed appends per size and kind (default 7; 1 with --smoke)")
    p.add_argument("--smoke", action="store_true", help="tiny scale: every case runs and answers correctly")
    p.add_argument("--data-dir", type=Path, default=HERE / "data", help="where data and tables go")
    p.add_argument("--out", type=Path, default=None, help="JSON results file")
    p.add_argument("--cases", default="upsert,append", help="which cases to run (default upsert,append)")
    p.add_argument("--peers", default="deltalake,pyiceberg,lance", help="peers for the upsert case ('' for none)")
    p.add_argument(
        "--append-sizes", default=None, help="table sizes in rows for the append case (default SF x 1M, 6M, 30M / 6 …)"
    )
    a = p.parse_args(argv)
    a.sf = a.sf if a.sf is not None else (0.01 if a.smoke else 0.1)
    a.repeat = a.repeat if a.repeat is not None else (1 if a.smoke else 3)
    a.append_repeat = a.append_repeat if a.append_repeat is not None else (1 if a.smoke else 7)
    if not 1 <= a.append_repeat <= 10:
        p.error("--append-repeat must be 1..10 (appends inside every segment's range use 24 unused order-key offsets)")
    a.peer_names = [x for x in (s.strip() for s in a.peers.split(",")) if x]
    a.case_names = {x.strip() for x in a.cases.split(",") if x.strip()}
    if a.case_names - {"upsert", "append"}:
        p.error(f"unknown cases {sorted(a.case_names - {'upsert', 'append'})}; choose from upsert, append")
    rows = int(6_000_000 * a.sf)
    a.sizes = [int(s) for s in a.append_sizes.split(",")] if a.append_sizes else [rows // 6, rows, rows * 5]
    a.append_rows = 1_000 if a.smoke else 10_000
    return a


# -- the change set ---------------------------------------------------------------------
def change_set(lineitem: pa.Table, *, fraction: float = 0.01, seed: int = 7) -> pa.Table:
    """``fraction`` of the rows: half of them existing keys with new values, half new keys
    (existing rows moved to order keys above the table's largest)."""
    rng = np.random.default_rng(seed)
    n = max(2, int(lineitem.num_rows * fraction))
    picked = lineitem.take(pa.array(np.sort(rng.choice(lineitem.num_rows, n, replace=False))))
    half = n // 2
    updated = picked.slice(0, half)
    updated = updated.set_column(updated.schema.get_field_index("l_comment"), "l_comment", pa.array(["upserted"] * half))
    new = picked.slice(half)
    top = pc.max(lineitem.column("l_orderkey")).as_py()
    shifted = pc.add(new.column("l_orderkey"), pa.scalar(top + 1, new.schema.field("l_orderkey").type))
    new = new.set_column(new.schema.get_field_index("l_orderkey"), "l_orderkey", shifted)
    return pa.concat_tables([updated, new])


# -- one upsert in a fresh process --------------------------------------------------------
def child(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one system's upsert on ``spec['handle']``; report time, peak memory and rows."""
    changes = pq.read_table(spec["changes"])
    system, handle = spec["system"], spec["handle"]
    floor = peak_rss()
    if system == "mvtable":
        from mvtable import Table

        t = Table.open(handle)
        t.snapshot()  # the table's state read before the timer, as lance.dataset / DeltaTable / load_table do
        start, cpu_start = time.perf_counter(), time.process_time()
        r = t.upsert(changes)
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        table = t.scan(columns=KEY).to_arrow()
        detail = {"inserted": r.inserted_rows, "updated": r.updated_rows}
    elif system == "deltalake":
        from deltalake import DeltaTable

        dtab = DeltaTable(handle)
        start, cpu_start = time.perf_counter(), time.process_time()
        m = (
            dtab.merge(changes, predicate=" AND ".join(f"t.{k} = s.{k}" for k in KEY), source_alias="s", target_alias="t")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        table = DeltaTable(handle).to_pyarrow_table(columns=KEY)
        detail = {"inserted": m.get("num_target_rows_inserted"), "updated": m.get("num_target_rows_updated")}
    elif system == "pyiceberg":
        from pyiceberg.catalog.sql import SqlCatalog

        wh = spec["warehouse"]
        catalog = SqlCatalog("bench", uri=f"sqlite:///{wh}/catalog.db", warehouse=f"file://{wh}")
        tbl = catalog.load_table(handle)
        start, cpu_start = time.perf_counter(), time.process_time()
        u = tbl.upsert(changes, join_cols=KEY)
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        table = catalog.load_table(handle).scan(selected_fields=tuple(KEY)).to_arrow()
        detail = {"inserted": u.rows_inserted, "updated": u.rows_updated}
    elif system == "lance":
        import lance

        ds = lance.dataset(handle)
        start, cpu_start = time.perf_counter(), time.process_time()
        r = ds.merge_insert(KEY).when_matched_update_all().when_not_matched_insert_all().execute(changes)
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        table = lance.dataset(handle).to_table(columns=KEY)
        detail = {"inserted": r.get("num_inserted_rows"), "updated": r.get("num_updated_rows")}
    else:
        raise ValueError(system)
    peak = peak_rss()
    distinct = table.group_by(KEY).aggregate([]).num_rows
    return {
        "seconds": elapsed,
        "cpu_seconds": cpu,  # every thread of the process: what the call costs a busy machine
        "peak_bytes": peak,
        "floor_bytes": floor,
        "rows": table.num_rows,
        "distinct": distinct,
        **detail,
    }


def peak_rss() -> int:
    """This process's peak resident set (``VmHWM``: unlike ``ru_maxrss``, not inherited
    from the parent across ``exec``)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def run_child(spec: dict[str, Any]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent), *sys.path])}
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.keys", "--child", json.dumps(spec)], capture_output=True, env=env, text=True
    )
    if proc.returncode:
        raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- building the tables ------------------------------------------------------------------
def build_upsert_tables(lineitem: pa.Table, root: Path, peers: list[str]) -> dict[str, Any]:
    """One base table per system; each timed run works on a fresh copy (``copy``)."""
    from mvtable import Table

    out: dict[str, Any] = {}
    base = root / "mvtable_keyed"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    t = Table.create(str(base), schema=lineitem.schema, primary_key=KEY, properties={"rowGroupRows": "131072"})
    for start in range(0, lineitem.num_rows, 1_000_000):
        t.append(lineitem.slice(start, 1_000_000))
    out["mvtable"] = base
    if "deltalake" in peers:
        from deltalake import write_deltalake

        write_deltalake(str(root / "delta"), lineitem)
        out["deltalake"] = root / "delta"
    if "lance" in peers:
        import lance

        lance.write_dataset(lineitem, str(root / "lance"))
        out["lance"] = root / "lance"
    if "pyiceberg" in peers:
        from pyiceberg.catalog.sql import SqlCatalog

        wh = root / "iceberg"
        wh.mkdir()
        catalog = SqlCatalog("bench", uri=f"sqlite:///{wh}/catalog.db", warehouse=f"file://{wh}")
        catalog.create_namespace("bench")
        catalog.create_table("bench.base", schema=lineitem.schema).append(lineitem)
        out["pyiceberg"] = (catalog, wh)
    return out


def copy_of(system: str, base: Any, root: Path, n: int) -> dict[str, Any]:
    if system == "pyiceberg":
        catalog, wh = base
        name = f"bench.run_{n}"
        catalog.register_table(name, catalog.load_table("bench.base").metadata_location)
        return {"handle": name, "warehouse": str(wh)}
    return {"handle": str(hardlink_copy(base, root / "runs" / f"{system}_{n}"))}


def upsert_case(lineitem: pa.Table, root: Path, *, repeat: int, peers: list[str]) -> dict[str, Any]:
    changes = change_set(lineitem)
    expected_rows = lineitem.num_rows + changes.num_rows // 2 + changes.num_rows % 2
    changes_path = root.parent / "upsert_changes.parquet"
    bases = build_upsert_tables(lineitem, root, peers)
    pq.write_table(changes, changes_path)
    systems = ["mvtable", *[p for p in SYSTEMS if p in peers]]
    runs: dict[str, list[dict[str, Any]]] = {s: [] for s in systems}
    errors: dict[str, str] = {}
    n = 0
    for i in range(repeat):
        k = i % len(systems)
        for system in systems[k:] + systems[:k]:
            if system in errors or (system != "mvtable" and runs[system] and runs[system][0]["seconds"] > SLOW_S):
                continue  # a peer that took minutes once is not run again (pyiceberg at SF 0.1)
            n += 1
            spec = {"system": system, "changes": str(changes_path), **copy_of(system, bases[system], root, n)}
            try:
                r = run_child(spec)
            except RuntimeError as exc:
                if system == "mvtable":
                    raise
                errors[system] = str(exc)[:300]
                log(f"    {system} failed: {errors[system]}")
                continue
            r["load1"] = os.getloadavg()[0]
            r["ok"] = r["rows"] == expected_rows and r["distinct"] == expected_rows
            runs[system].append(r)
            log(
                f"    {system:<10} {r['seconds']:.3f} s (cpu {r['cpu_seconds']:.3f} s)  peak {r['peak_bytes'] / 2**20:.0f} MiB  rows {r['rows']} ok={r['ok']}"
            )
    shutil.rmtree(root / "runs", ignore_errors=True)
    summary = {}
    for system, rs in runs.items():
        if rs:
            summary[system] = {
                "median_s": statistics.median(r["seconds"] for r in rs),
                "median_cpu_s": statistics.median(r["cpu_seconds"] for r in rs),
                "peak_mib": statistics.median(r["peak_bytes"] for r in rs) / 2**20,
                "floor_mib": statistics.median(r["floor_bytes"] for r in rs) / 2**20,
                "ok": all(r["ok"] for r in rs),
                "runs": len(rs),
                "inserted": rs[-1].get("inserted"),
                "updated": rs[-1].get("updated"),
                "load1": statistics.median(r["load1"] for r in rs),
            }
        else:
            summary[system] = {"na": errors.get(system, "not run")}
    return {"rows": lineitem.num_rows, "changes": changes.num_rows, "systems": summary}


# -- keyed append at growing sizes ------------------------------------------------------------
def sized(lineitem: pa.Table, rows: int) -> pa.Table:
    """``rows`` rows of lineitem, repeated with order keys shifted by whole multiples of 32
    past the largest (so keys stay unique and keep TPC-H's sparse pattern)."""
    top = pc.max(lineitem.column("l_orderkey")).as_py()
    step = (top // 32 + 1) * 32
    parts, have, copy = [], 0, 0
    while have < rows:
        part = lineitem.slice(0, rows - have)
        keys = pc.add(part.column("l_orderkey"), pa.scalar(copy * step, part.schema.field("l_orderkey").type))
        parts.append(part.set_column(part.schema.get_field_index("l_orderkey"), "l_orderkey", keys))
        have += part.num_rows
        copy += 1
    return pa.concat_tables(parts)


def new_rows(table_rows: pa.Table, n: int, round_: int, *, kind: str) -> pa.Table:
    """``n`` rows with keys that do not exist. ``in_range``: inside every segment's key
    range, order keys ``32k + 8 + round`` (TPC-H never uses 8..31 mod 32), so only the key
    index can rule segments out; ``above``: new orders past the largest order key (what an
    append of new data usually is), which the row groups' min/max rule out."""
    rng = np.random.default_rng(round_)
    sample = table_rows.take(pa.array(rng.choice(table_rows.num_rows, n, replace=False)))
    keys = pc.cast(sample.column("l_orderkey"), pa.int64()).to_numpy()
    if kind == "above":
        top = pc.max(table_rows.column("l_orderkey")).as_py()
        fresh = top + 1 + round_ * n + np.arange(n)
    else:
        fresh = (keys // 32) * 32 + 8 + (round_ % 24)
    sample = sample.set_column(0, "l_orderkey", pa.array(fresh).cast(sample.schema.field("l_orderkey").type))
    line = pc.cast(sample.column("l_linenumber"), pa.int64()).to_numpy()
    _, first = np.unique(fresh * 16 + line, return_index=True)  # one row per key
    return sample.take(pa.array(np.sort(first)))


def append_case(lineitem: pa.Table, root: Path, *, sizes: list[int], append_rows: int, repeat: int) -> list[dict[str, Any]]:
    from mvtable import Table
    from mvtable.connector.key_index import forget_filters

    out = []
    for size in sizes:
        base = sized(lineitem, size)
        tables = {}
        for name, key in (("keyed", KEY), ("plain", None)):
            path = root / f"append_{size}_{name}"
            shutil.rmtree(path, ignore_errors=True)
            t = Table.create(str(path), schema=base.schema, primary_key=key, properties={"rowGroupRows": "131072"})
            for start in range(0, base.num_rows, 1_000_000):
                t.append(base.slice(start, 1_000_000))
            tables[name] = t
        added: list[pa.Table] = []
        for kind in ("in_range", "above"):
            times: dict[str, list[float]] = {"keyed": [], "plain": []}
            first: dict[str, float] = {}
            forget_filters()  # building the table kept them: the first append reads them all, as a new process does
            for r in range(repeat + 1):  # the first round warms up (the keyed one reads every key filter)
                rows = new_rows(base, append_rows, len(added), kind=kind)
                added.append(rows)
                for name in ("keyed", "plain") if r % 2 else ("plain", "keyed"):
                    began = time.perf_counter()
                    tables[name].append(rows)
                    took = time.perf_counter() - began
                    if r:
                        times[name].append(took)
                    else:
                        first[name] = took
            k, p = statistics.median(times["keyed"]), statistics.median(times["plain"])
            log(f"    {size:>10} rows, new keys {kind:<8}: keyed {k:.3f} s, plain {p:.3f} s, ratio {k / p:.2f}")
            out.append(
                {
                    "table_rows": size,
                    "kind": kind,
                    "keyed_s": k,
                    "plain_s": p,
                    "ratio": k / p,
                    "first_keyed_s": first["keyed"],
                    "first_plain_s": first["plain"],
                    "load1": os.getloadavg()[0],
                }
            )
        keyed_rows = tables["keyed"].scan(columns=KEY).to_arrow()
        appended = sum(t.num_rows for t in added)
        ok = keyed_rows.num_rows == keyed_rows.group_by(KEY).aggregate([]).num_rows == size + appended
        for row in out[-2:]:
            row["ok"] = ok
        for t in tables.values():
            shutil.rmtree(t.uri, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        print(json.dumps(child(json.loads(argv[1]))))
        return 0
    a = parse_args(argv)
    root = a.data_dir / f"sf{data.sf_label(a.sf)}"
    work = root / "keys"
    log(f"key benchmarks: SF {a.sf:g}, repeat {a.repeat} (appends {a.append_repeat}), append sizes {a.sizes}")
    lineitem = data.load_lineitem(data.generate(a.sf, root / "tpch"))
    upsert: dict[str, Any] = {"systems": {}}
    append: list[dict[str, Any]] = []
    if "upsert" in a.case_names:
        log(f"[upsert] 1% of {lineitem.num_rows} rows, half new; systems mvtable + {a.peer_names}")
        upsert = upsert_case(lineitem, work / "upsert", repeat=a.repeat, peers=a.peer_names)
    if "append" in a.case_names:
        log(f"[append] {a.append_rows} new rows into keyed vs plain tables")
        append = append_case(lineitem, work, sizes=a.sizes, append_rows=a.append_rows, repeat=a.append_repeat)
    shutil.rmtree(work, ignore_errors=True)
    if upsert["systems"]:
        mv = upsert["systems"]["mvtable"]
        print(
            f"\nupsert 1% of lineitem SF {a.sf:g} ({upsert['changes']} rows into {upsert['rows']}), load {os.getloadavg()[0]:.1f}"
        )
        for system, s in upsert["systems"].items():
            if "na" in s:
                print(f"  {system:<10} n/a: {s['na']}")
                continue
            print(
                f"  {system:<10} {s['median_s']:8.3f} s ({s['runs']} runs)  cpu {s['median_cpu_s']:7.3f} s"
                f"  peak {s['peak_mib']:6.0f} MiB (floor {s['floor_mib']:.0f})"
                f"  mvtable/{system} {mv['median_s'] / s['median_s']:5.2f}x (cpu {mv['median_cpu_s'] / s['median_cpu_s']:5.2f}x)"
                f"  correct={s['ok']}"
            )
    if append:
        print(
            f"\nappend {a.append_rows} new keys, keyed vs no key (in_range: inside every segment's key range; above: new orders)"
        )
    for row in append:
        print(
            f"  {row['table_rows']:>10} rows {row['kind']:<8}: {row['keyed_s']:.3f} s vs {row['plain_s']:.3f} s"
            f" = {row['ratio']:.2f}x  (first, filters not in memory: {row['first_keyed_s']:.3f} s vs {row['first_plain_s']:.3f} s)"
            f"  correct={row['ok']}"
        )
    out = a.out or HERE / "results" / f"keys-{dt.datetime.now():%Y%m%dT%H%M%S}{'-smoke' if a.smoke else ''}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"command": "python -m benchmarks.keys " + " ".join(argv), "sf": a.sf, "repeat": a.repeat, "load1": os.getloadavg()[0]}
    out.write_text(json.dumps({"meta": meta, "upsert": upsert, "append": append}, indent=2, default=str))
    print(f"\nresults: {out}")
    wrong = [s for s, v in upsert["systems"].items() if v.get("ok") is False] + [
        str(r["table_rows"]) for r in append if not r["ok"]
    ]
    if wrong:
        print(f"WRONG answers: {wrong}")
    return 1 if any(w == "mvtable" or w.isdigit() for w in wrong) else 0


if __name__ == "__main__":
    sys.exit(main())
