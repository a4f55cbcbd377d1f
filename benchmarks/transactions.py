"""Multi-table transaction benchmarks: ``python -m benchmarks.transactions [--case all|commit|read] [--repeat 3] [--smoke]``.

1. **A 3-table transaction** — one consistent push of ``--rows`` rows to a fact table and two
   appends of 1,000 rows to two dimension tables, in one ``mvtable.transaction()`` — against
   the same three commits done alone (``overwrite(consistent_push=True)``, ``append``,
   ``append``). Target: the transaction within 1.15× the wall time of the three alone.
2. **A consistent read of 3 tables** — ``mvtable.consistent_versions`` on three tables that
   each hold a history of plain commits and finished transactions, from fresh ``Table``
   objects — against one table's open (``Table(uri).snapshot()``), and against the three
   plain opens. Target: within 2× one table's open.

The median of ``--repeat`` runs is reported. Ratios are printed and written to
``benchmarks/results/transactions-<timestamp>.json``. Exits non-zero only when a result is
wrong, never for a missed target.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

import mvtable
from mvtable.connector import Table
from mvtable.lineage.checkpoint_cache import process_checkpoints
from mvtable.lineage.snapshot_cache import process_snapshots

from .common import log, machine_info

HERE = Path(__file__).resolve().parent


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.transactions", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--rows", type=int, default=None, help="rows of the pushed fact table (default 6,000,000; 20,000 with --smoke)"
    )
    p.add_argument("--repeat", type=int, default=None, help="timed runs per case (default 3; 1 with --smoke)")
    p.add_argument(
        "--history", type=int, default=None, help="commits in each table of the read case (default 200; 10 with --smoke)"
    )
    p.add_argument("--case", choices=("all", "commit", "read"), default="all", help="which case to run (default: both)")
    p.add_argument("--smoke", action="store_true", help="tiny scale: every case runs and answers correctly")
    p.add_argument("--data-dir", type=Path, default=HERE / "data" / "transactions", help="where tables go")
    p.add_argument("--out", type=Path, default=None, help="JSON results file")
    return p.parse_args(argv)


def fact_rows(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "id": pa.array(np.arange(n, dtype=np.int64)),
            "customer": pa.array(rng.integers(0, 100_000, n, dtype=np.int64)),
            "amount": pa.array(rng.random(n) * 100),
        }
    )


def dim_rows(n: int, start: int) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table({"id": pa.array(ids), "name": pa.array([f"name-{i}" for i in ids])})


def timed(fn: Callable[..., Any], *args: Any) -> float:
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def forget_tables() -> None:
    """Drop what this process keeps of tables it read (as a new process starts)."""
    process_checkpoints().clear()
    process_snapshots().clear()


def fresh(base: Path, names: list[str], *, fact: bool = True) -> list[Table]:
    """New tables: the first a fact table (unless ``fact`` is false), the others dimensions."""
    shutil.rmtree(base, ignore_errors=True)
    tables = [Table(str(base / n)) for n in names]
    for i, t in enumerate(tables):
        t.append(fact_rows(1000, 0) if i == 0 and fact else dim_rows(1000, i * 1_000_000))
    return tables


def three(tables: list[Table], fact: pa.Table, dims: list[pa.Table]) -> None:
    tables[0].overwrite(fact, consistent_push=True)
    tables[1].append(dims[0])
    tables[2].append(dims[1])


def one_transaction(tables: list[Table], fact: pa.Table, dims: list[pa.Table]) -> None:
    with mvtable.transaction() as tx:
        tx.overwrite(tables[0], fact, consistent_push=True)
        tx.append(tables[1], dims[0])
        tx.append(tables[2], dims[1])


def case_commit(base: Path, *, rows: int, repeat: int) -> dict[str, Any]:
    """The 3-table transaction against the three commits alone, each on fresh tables."""
    fact = fact_rows(rows, 1)
    dims = [dim_rows(1000, 10_000_000), dim_rows(1000, 20_000_000)]
    alone, together = [], []
    for r in range(repeat):
        f, d1, d2 = fresh(base / f"tx-{r}", ["fact", "dim1", "dim2"])
        solo = fresh(base / f"alone-{r}", ["fact", "dim1", "dim2"])
        if r % 2:  # alternate which goes first: a loaded machine's drift hits both alike
            together.append(timed(one_transaction, [f, d1, d2], fact, dims))
            alone.append(timed(three, solo, fact, dims))
        else:
            alone.append(timed(three, solo, fact, dims))
            together.append(timed(one_transaction, [f, d1, d2], fact, dims))
        ok = f.to_arrow().num_rows == rows and d1.to_arrow().num_rows == 2000 and d2.to_arrow().num_rows == 2000
        if not ok:
            raise SystemExit("the transaction's tables do not hold what it wrote")
    a, t = statistics.median(alone), statistics.median(together)
    return {
        "rows": rows,
        "alone_s": a,
        "transaction_s": t,
        "ratio": t / a,
        "target": 1.15,
        "runs": {"alone": alone, "tx": together},
    }


def case_read(base: Path, *, history: int, repeat: int) -> dict[str, Any]:
    """A consistent read of three tables with history against one table's open."""
    tables = fresh(base / "read", ["a", "b", "c"], fact=False)
    for i in range(history):
        if i % 4 == 0:
            with mvtable.transaction() as tx:
                for t in tables:
                    tx.append(t, dim_rows(10, 50_000_000 + i * 10))
        else:
            tables[i % 3].append(dim_rows(10, 60_000_000 + i * 10))
    uris = [t.uri for t in tables]
    one, three, consistent = [], [], []
    for _ in range(repeat):
        one.append(timed(lambda: Table(uris[0]).snapshot()))
        three.append(timed(lambda: [Table(u).snapshot() for u in uris]))
        consistent.append(timed(lambda: mvtable.consistent_versions([Table(u) for u in uris])))
    # the first open in a process: no checkpoint parse or replayed snapshot kept (info)
    cold_one, cold_consistent = [], []
    for _ in range(max(3, repeat // 10)):
        cold_one.append(timed(lambda: (forget_tables(), Table(uris[0]).snapshot())))
        cold_consistent.append(timed(lambda: (forget_tables(), mvtable.consistent_versions([Table(u) for u in uris]))))
    versions = mvtable.consistent_versions(uris)
    if versions != {u: Table(u).version for u in uris}:
        raise SystemExit(f"consistent versions {versions} are not the newest of settled tables")
    o, th, c = statistics.median(one), statistics.median(three), statistics.median(consistent)
    return {
        "history": history,
        "one_open_s": o,
        "three_opens_s": th,
        "consistent_read_s": c,
        "ratio_to_one_open": c / o,
        "ratio_to_three_opens": c / th,
        "cold_one_open_s": statistics.median(cold_one),
        "cold_consistent_read_s": statistics.median(cold_consistent),
        "cold_ratio_to_one_open": statistics.median(cold_consistent) / statistics.median(cold_one),
        "target_to_one_open": 2.0,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rows = args.rows or (20_000 if args.smoke else 6_000_000)
    repeat = args.repeat or (1 if args.smoke else 3)
    history = args.history or (10 if args.smoke else 200)
    base = args.data_dir
    commit: dict[str, Any] | None = None
    read: dict[str, Any] | None = None
    try:
        if args.case in ("all", "commit"):
            log(f"3-table transaction: push of {rows:,} rows + 2 appends of 1,000, {repeat} run(s)")
            commit = case_commit(base, rows=rows, repeat=repeat)
            log(
                f"  alone {commit['alone_s']:.3f}s, transaction {commit['transaction_s']:.3f}s: "
                f"{commit['ratio']:.2f}x (target 1.15x)"
            )
        if args.case in ("all", "read"):
            log(f"consistent read of 3 tables, {history} commits of history, {repeat} run(s)")
            read = case_read(base, history=history, repeat=repeat)
            log(
                f"  one open {read['one_open_s'] * 1000:.1f}ms, three opens {read['three_opens_s'] * 1000:.1f}ms, "
                f"consistent read {read['consistent_read_s'] * 1000:.1f}ms: "
                f"{read['ratio_to_one_open']:.2f}x one open (target 2x)"
            )
            log(
                f"  the first in a process (info): one open {read['cold_one_open_s'] * 1000:.1f}ms, consistent read "
                f"{read['cold_consistent_read_s'] * 1000:.1f}ms: {read['cold_ratio_to_one_open']:.2f}x"
            )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    result = {"commit": commit, "read": read, "machine": machine_info(), "smoke": args.smoke}
    out = args.out or HERE / "results" / f"transactions-{dt.datetime.now():%Y%m%d-%H%M%S}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    log(f"results in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
