"""Concurrent transactions from several processes, on overlapping and disjoint sets of tables.

Each transaction appends one row tagged with its name and participants to each of its
tables, and deletes its own row of a seed segment that every table shares (so transactions
of different processes hold the same segment, conflict and retry). While they run, the
test reads consistent versions again and again: every tag is in all of its tables or in
none, and every seed row is gone from all of its transaction's tables or from none."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import pyarrow as pa

import mvtable
from mvtable.connector import Table

CHILD = textwrap.dedent(
    """
    import json, sys, time
    import pyarrow as pa, pyarrow.compute as pc
    import mvtable
    from mvtable.errors import TransactionConflictError

    cfg = json.loads(sys.argv[1])
    tables = {name: mvtable.Table(uri, storage_options=cfg["options"]) for name, uri in cfg["uris"].items()}
    sets, proc, count = cfg["sets"], cfg["proc"], cfg["count"]
    done, conflicts = [], 0
    for i in range(count):
        names = sets[i % len(sets)]
        tag = f"p{proc}-{i}:{','.join(names)}"
        seed = f"seed:{proc}:{i}"
        for attempt in range(50):
            try:
                with mvtable.transaction() as tx:
                    for name in names:
                        tx.append(tables[name], pa.table({"tag": [tag]}))
                        tx.delete(tables[name], pc.field("tag") == seed)
                done.append(tag)
                break
            except TransactionConflictError:
                conflicts += 1
                time.sleep(0.05)
        else:
            raise SystemExit(f"{tag} never committed")
    print(json.dumps({"done": done, "conflicts": conflicts}))
    """
)

SETS = {0: [["A", "B"], ["A"]], 1: [["B", "C"], ["B", "C", "D"]], 2: [["C", "D"], ["D"]]}
COUNT = 12


def participants(p: int, i: int) -> set[str]:
    return set(SETS[p][i % len(SETS[p])])


def tags_by_table(tables: dict[str, Table], versions: dict[str, int] | None) -> dict[str, set[str]]:
    """tag -> the tables that show it."""
    out: dict[str, set[str]] = {}
    for name, t in tables.items():
        for tag in t.to_arrow(version=None if versions is None else versions[t.uri]).column("tag").to_pylist():
            out.setdefault(tag, set()).add(name)
    return out


def check_whole(shown: dict[str, set[str]], seeds: list[str]) -> None:
    for tag, names in shown.items():
        if not tag.startswith("seed:"):
            assert names == set(tag.split(":")[1].split(",")), f"{tag} shows in {sorted(names)} only"
    for seed in seeds:
        _, p, i = seed.split(":")
        gone = set("ABCD") - shown.get(seed, set())
        assert gone in (set(), participants(int(p), int(i))), f"{seed} is gone from {sorted(gone)} only"


def test_concurrent_transactions_from_several_processes_are_always_seen_whole(tmp_path):
    run_concurrently({name: str(tmp_path / name) for name in "ABCD"}, {}, count=COUNT)


def test_concurrent_transactions_on_s3(seaweedfs_s3):
    run_concurrently({name: seaweedfs_s3.url(name) for name in "ABCD"}, seaweedfs_s3.storage_options(), count=6)


def run_concurrently(locations: dict[str, str], options: dict, *, count: int) -> None:
    seeds = [f"seed:{p}:{i}" for p in SETS for i in range(count)]
    tables = {name: Table(uri, storage_options=options) for name, uri in locations.items()}
    for t in tables.values():
        t.append(pa.table({"tag": seeds}))
    uris = {name: t.uri for name, t in tables.items()}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                CHILD,
                json.dumps({"uris": uris, "options": options, "sets": sets, "proc": p, "count": count}),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for p, sets in SETS.items()
    ]
    reads = 0
    try:
        while any(p.poll() is None for p in procs):
            check_whole(tags_by_table(tables, mvtable.consistent_versions(list(tables.values()))), seeds)
            reads += 1
            time.sleep(0.02)
        outputs = [p.communicate(timeout=60) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, (_, err) in zip(procs, outputs):
        assert p.returncode == 0, err[-3000:]
    results = [json.loads(out) for out, _ in outputs]
    final = tags_by_table(tables, mvtable.consistent_versions(list(tables.values())))
    check_whole(final, seeds)
    committed = {tag for r in results for tag in r["done"]}
    assert (
        {tag for tag in final if not tag.startswith("seed:")}
        == committed
        == {f"p{p}-{i}:{','.join(SETS[p][i % len(SETS[p])])}" for p in SETS for i in range(count)}
    )
    assert {s for s in seeds if final.get(s) == set("ABCD") - participants(*map(int, s.split(":")[1:]))} == set(seeds)
    assert reads >= 3  # the consistent reads really ran while transactions did
