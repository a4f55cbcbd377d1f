"""Cases without Spark: ``Table.scan().to_arrow()``, deletes, consistent push, append
latency, DV size — each against pyarrow on the same files and against the peers."""

from __future__ import annotations

import base64
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .common import CaseResult, System, hardlink_copy, log, measure
from .data import Built, Peer, del1_expr, del1_sql, del10_sql


def _peer_system(peer: Peer, fn, setup=None) -> System:
    def guarded(*args):
        peer.need()
        return fn(*args)

    def guarded_setup():
        peer.need()
        return setup()

    return System(guarded, setup=guarded_setup if setup else None, optional=True)


def _peer_rows(
    case: str,
    group: str,
    what: str,
    t: dict,
    mv_key: str,
    peers: dict[str, Peer],
    *,
    target: float | dict[str, float] | None,
    check: dict[str, str] | None = None,
) -> list[CaseResult]:
    """One row per peer; ``target`` (a ratio, or a ratio per peer name) ≤ 1.0 reads "as fast
    as that peer"."""
    rows = []
    for name, peer in peers.items():
        key = f"peer_{name}"
        tm = t.get(key)
        if tm is None:
            continue
        peer_target = target.get(name) if isinstance(target, dict) else target
        na = tm.error or peer.error
        rows.append(
            CaseResult(
                f"{case}_vs_{name}",
                group,
                f"{what}: mvtable vs {name}",
                t[mv_key].median,
                name,
                None if na else tm.median,
                target=peer_target,
                target_text=("fastest (≤ 1.0×)" if not isinstance(target, dict) else f"≤ {name} (≤ 1.0×)") if peer_target else "",
                systems={k: v.to_json() for k, v in t.items()},
                check=(check or {}).get(key, "ok"),
                details={"na": f"n/a: {na}"} if na else {"notes": peer.notes},
            )
        )
    return rows


def run(built: Built, data: pa.Table, *, repeat: int, smoke: bool, groups: set[str]) -> tuple[list[CaseResult], dict[str, Any]]:
    from mvtable.connector import Table

    out: list[CaseResult] = []
    metrics: dict[str, Any] = {}
    peers = built.peers
    base, del10 = str(built.mv_base), str(built.mv_del10)
    files = built.native_files
    rows_after_del10 = built.rows - built.deleted10
    counter = {"n": 0}

    def tag(prefix: str) -> str:
        counter["n"] += 1
        return f"{prefix}_{counter['n']}"

    # ------------------------------------------------------------------ Table.scan()
    if "table_scan" in groups:
        log("  table_scan: Table.scan().to_arrow(), whole table")
        # pyiceberg's delete is copy-on-write (it rewrote the files, and reads 10% fewer rows
        # with no mask); mvtable's is merge-on-read. The same trade made explicit: a copy of
        # the 10%-deleted table compacted (segments worn by deletes rewritten), timed too.
        compacted = str(hardlink_copy(Path(del10), built.root / "mv_del10_compacted"))
        started = time.perf_counter()
        compaction = Table(compacted).compact(delete_ratio=0.05)
        compact_s = time.perf_counter() - started
        log(
            f"  table_scan: compacted a copy of the 10%-deleted table in {compact_s:.2f} s "
            f"({compaction.input_segments} segments → {compaction.output_segments}, {compaction.rows_dropped} rows purged)"
        )
        systems = {
            "pyarrow_read_table": System(lambda: pq.read_table(files).num_rows),
            "mvtable": System(lambda: Table(base).scan().to_arrow().num_rows),
            "mvtable_del10": System(lambda: Table(del10).scan().to_arrow().num_rows),
            "mvtable_del10_compacted": System(lambda: Table(compacted).scan().to_arrow().num_rows),
        }
        for name, peer in peers.items():
            systems[f"peer_{name}"] = _peer_system(peer, lambda p=peer: p.read(p.del10).num_rows)
        t = measure(systems, repeat=repeat, log=log)
        sj = {k: v.to_json() for k, v in t.items()}
        checks = {
            k: ("ok" if v.result in (None, rows_after_del10) else f"{v.result} rows, expected {rows_after_del10}")
            for k, v in t.items()
            if k.startswith("peer_")
        }
        out += [
            CaseResult(
                "table_scan",
                "table",
                "Table.scan().to_arrow(), no deletes",
                t["mvtable"].median,
                "pyarrow.parquet.read_table",
                t["pyarrow_read_table"].median,
                systems=sj,
                check="ok" if t["mvtable"].result == built.rows else f"{t['mvtable'].result} rows, expected {built.rows}",
            ),
            CaseResult(
                "table_scan_del10",
                "table",
                "Table.scan().to_arrow(), 10% deleted",
                t["mvtable_del10"].median,
                "pyarrow.parquet.read_table (no deletes)",
                t["pyarrow_read_table"].median,
                target=1.2,
                target_text="≤ 1.2×",
                systems=sj,
                check="ok"
                if t["mvtable_del10"].result == rows_after_del10
                else f"{t['mvtable_del10'].result} rows, expected {rows_after_del10}",
            ),
        ]
        out += _peer_rows(
            "table_scan_del10",
            "peers",
            "whole-table read to Arrow, 10% deleted",
            t,
            "mvtable_del10",
            peers,
            target=1.0,
            check=checks,
        )
        out += [
            CaseResult(
                "table_scan_del10_compacted_vs_pyiceberg",
                "peers",
                "whole-table read to Arrow, 10% deleted, after Table.compact (pyiceberg's delete rewrote its files)",
                t["mvtable_del10_compacted"].median,
                "pyiceberg",
                t["peer_pyiceberg"].median if "peer_pyiceberg" in t and not t["peer_pyiceberg"].error else None,
                systems=sj,
                details={
                    "compact_s": compact_s,
                    "notes": ["mvtable compacted first (delete_ratio=0.05); compaction time in compact_s"],
                },
                check="ok"
                if t["mvtable_del10_compacted"].result == rows_after_del10
                else f"{t['mvtable_del10_compacted'].result} rows, expected {rows_after_del10}",
            )
        ]

    # ------------------------------------------------------------------ delete 1%
    if "delete" in groups:
        log(f"  delete_1pct: Table.delete({del1_sql(built.sf)})")
        expected = int(np.count_nonzero(data.column("l_suppkey").to_numpy() <= int(del1_sql(built.sf).split()[-1])))
        systems = {
            "mvtable_scan_pred_column": System(lambda: Table(base).scan(columns=["l_suppkey"]).to_arrow().num_rows),
            "pyarrow_read_pred_column": System(lambda: pq.read_table(files, columns=["l_suppkey"]).num_rows),
            "mvtable_delete": System(
                lambda path: Table(path).delete(del1_expr(built.sf)).deleted_rows,
                setup=lambda: str(hardlink_copy(built.mv_base, built.scratch / tag("mv_delete"))),
            ),
        }
        for name, peer in peers.items():
            systems[f"peer_{name}"] = _peer_system(
                peer,
                lambda h, p=peer: p.delete(h, del1_sql(built.sf), del1_expr(built.sf)),
                setup=lambda p=peer: p.copy(p.base, tag(f"{p.name}_delete")),
            )
        t = measure(systems, repeat=repeat, log=log)
        sj = {k: v.to_json() for k, v in t.items()}
        checks = {
            k: ("ok" if v.result in (None, expected) else f"deleted {v.result}, expected {expected}")
            for k, v in t.items()
            if k.startswith("peer_")
        }
        got = t["mvtable_delete"].result
        out.append(
            CaseResult(
                "delete_1pct",
                "table",
                f"Table.delete({del1_sql(built.sf)}) (1% of rows)",
                t["mvtable_delete"].median,
                "Table.scan(columns=[l_suppkey])",
                t["mvtable_scan_pred_column"].median,
                target=1.5,
                target_text="≤ 1.5×",
                systems=sj,
                check="ok" if got == expected else f"deleted {got}, expected {expected}",
                details={
                    "deleted_rows": got,
                    "ratio_vs_pyarrow_read_pred_column": (t["mvtable_delete"].median or 0)
                    / (t["pyarrow_read_pred_column"].median or 1),
                },
            )
        )
        out += _peer_rows("delete_1pct", "peers", "delete 1% by predicate", t, "mvtable_delete", peers, target=None, check=checks)

    # ------------------------------------------------------------------ consistent push
    if "consistent_push" in groups:
        log(f"  consistent_push: Table.overwrite(<{built.rows} rows>, consistent_push=True)")
        scratch = built.scratch
        systems = {
            "pyarrow_write_table": System(
                lambda path: pq.write_table(data, path, row_group_size=built.row_group_rows, compression="zstd"),
                setup=lambda: str(scratch / f"{tag('pq_write')}.parquet"),
            ),
            "mvtable_consistent_push": System(
                lambda path: Table(path).overwrite(data, consistent_push=True),
                setup=lambda: str(hardlink_copy(built.mv_base, scratch / tag("mv_push"))),
            ),
            "mvtable_overwrite": System(
                lambda path: Table(path).overwrite(data),
                setup=lambda: str(hardlink_copy(built.mv_base, scratch / tag("mv_overwrite"))),
            ),
        }
        for name, peer in peers.items():
            systems[f"peer_{name}"] = _peer_system(
                peer, lambda h, p=peer: p.overwrite(h, data), setup=lambda p=peer: p.copy(p.base, tag(f"{p.name}_push"))
            )
        t = measure(systems, repeat=repeat, warmup=0, log=log)
        sj = {k: v.to_json() for k, v in t.items()}
        out.append(
            CaseResult(
                "consistent_push",
                "table",
                f"consistent push (overwrite) of all {built.rows} rows",
                t["mvtable_consistent_push"].median,
                "pyarrow.parquet.write_table (zstd, same row groups)",
                t["pyarrow_write_table"].median,
                systems=sj,
                details={"mvtable_plain_overwrite_s": t["mvtable_overwrite"].median},
            )
        )
        # the target is the fastest peer, so the push must be ≤ 1.0× of every one
        out += _peer_rows(
            "consistent_push", "peers", "overwrite the whole table", t, "mvtable_consistent_push", peers, target=1.0
        )
        _clean_scratch(scratch)

    # ------------------------------------------------------------------ append latency
    if "append" in groups:
        n_rows = 100 if smoke else 1000
        n = 3 if smoke else max(10, 5 * repeat)
        small = data.slice(0, n_rows)
        log(f"  append_latency: Table.append(<{n_rows} rows>) x {n}")
        mv_path = str(hardlink_copy(built.mv_base, built.scratch / "mv_append"))
        # the same table with commitDurability=os (set at create only): the commit is left to
        # the OS's write-back, as Lance and delta-rs leave theirs
        os_path = _table_like_base(built, data, built.scratch / "mv_append_os", commitDurability="os")
        pq_dir = built.scratch / "pq_append"
        pq_dir.mkdir(parents=True, exist_ok=True)
        systems = {
            "pyarrow_write_table": System(lambda: pq.write_table(small, str(pq_dir / f"{tag('f')}.parquet"), compression="zstd")),
            "mvtable_append": System(lambda: Table(mv_path).append(small)),
            "mvtable_append_os": System(lambda: Table(os_path).append(small)),
        }
        handles = {}
        for name, peer in peers.items():
            if not peer.error:
                try:
                    handles[name] = peer.copy(peer.base, f"{name}_append")
                except (KeyboardInterrupt, SystemExit):
                    raise
                except BaseException as exc:
                    peer.error = f"copy failed: {exc}"
            systems[f"peer_{name}"] = _peer_system(peer, lambda p=peer: p.append(handles[p.name], small))
        t = measure(systems, repeat=n, log=log)
        sj = {k: v.to_json() for k, v in t.items()}
        # one row per durability setting, each against pq.write_table and against Lance (the target)
        for case, key, durability, path, baseline, base_key in (
            (
                "append_latency",
                "mvtable_append",
                "fsync (default)",
                mv_path,
                "pyarrow.parquet.write_table of the same rows",
                "pyarrow_write_table",
            ),
            (
                "append_latency_os",
                "mvtable_append_os",
                "os",
                os_path,
                "Table.append with the default commitDurability=fsync",
                "mvtable_append",
            ),
        ):
            out.append(
                CaseResult(
                    case,
                    "table",
                    f"append commit latency, commitDurability={durability} ({n_rows} rows, median of {n})",
                    t[key].median,
                    baseline,
                    t[base_key].median,
                    systems=sj,
                    details={"table_versions_after": Table(path).version, "commitDurability": durability},
                )
            )
            out += _peer_rows(case, "peers", f"append {n_rows} rows ({durability})", t, key, peers, target={"lance": 1.0})

    # ------------------------------------------------------------------ DV bytes
    if "dv_bytes" in groups:
        metrics["dv_bytes"] = dv_bytes(built)
    return out, metrics


def _table_like_base(built: Built, data: pa.Table, path: Path, **properties: str) -> str:
    """A table built like ``mv_base`` (same rows, row groups and segments) with other
    table properties, which can only be set when a table is created."""
    import shutil

    from mvtable.connector import Table

    shutil.rmtree(path, ignore_errors=True)
    t = Table.create(str(path), schema=data.schema, properties={"rowGroupRows": str(built.row_group_rows), **properties})
    for off in range(0, data.num_rows, built.segment_rows):
        t.append(data.slice(off, built.segment_rows))
    return str(path)


def _dv_blob_bytes(snapshot: Any) -> tuple[int, int, int]:
    """(framed blob bytes, inline DVs, DVs in files) of every visible segment's DV."""
    total = inline = in_files = 0
    for ref in snapshot.dvs.values():
        if ref.inline is not None:
            total += ref.size or len(base64.b64decode(ref.inline))
            inline += 1
        else:
            total += ref.size
            in_files += 1
    return total, inline, in_files


def dv_bytes(built: Built) -> dict[str, Any]:
    """DV bytes per deleted row: random 1% and 10% of rows (``Table.delete_rows`` with
    uniformly random positions), and the 10% predicate delete of ``mv_del10``."""
    from mvtable.connector import Table

    out: dict[str, Any] = {}
    rng = np.random.default_rng(42)
    base = Table(str(built.mv_base))
    segs = base.snapshot().visible_segments()
    for label, frac in (("random_1pct", 0.01), ("random_10pct", 0.10)):
        path = hardlink_copy(built.mv_base, built.scratch / f"dv_{label}")
        positions = {
            s.id: np.sort(rng.choice(s.file.num_rows, size=max(1, int(s.file.num_rows * frac)), replace=False)) for s in segs
        }
        start = time.perf_counter()
        res = Table(str(path)).delete_rows(positions)
        elapsed = time.perf_counter() - start
        total, inline, files = _dv_blob_bytes(Table(str(path)).snapshot())
        out[label] = {
            "deleted_rows": res.deleted_rows,
            "dv_bytes": total,
            "bytes_per_deleted_row": total / res.deleted_rows,
            "inline_dvs": inline,
            "file_dvs": files,
            "delete_rows_s": elapsed,
        }
        log(
            f"  dv_bytes {label}: {res.deleted_rows} rows -> {total} bytes ({total / res.deleted_rows:.3f} B/row), delete_rows {elapsed:.2f} s"
        )
    total, inline, files = _dv_blob_bytes(Table(str(built.mv_del10)).snapshot())
    out["predicate_10pct"] = {
        "deleted_rows": built.deleted10,
        "dv_bytes": total,
        "bytes_per_deleted_row": total / max(1, built.deleted10),
        "inline_dvs": inline,
        "file_dvs": files,
        "predicate": del10_sql(built.sf),
    }
    return out


def _clean_scratch(scratch: Path) -> None:
    import shutil

    for p in scratch.glob("*"):
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
