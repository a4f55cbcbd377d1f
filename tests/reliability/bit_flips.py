"""Single-bit flips in a table's files, and what the read paths make of them.

Each experiment flips one bit of one file of a small keyed table, runs the read paths
(``Table.scan`` without and with a predicate that skips row groups, a key lookup) on a
freshly opened table, puts the byte back, and sorts the outcome of each read into one of:

* ``correct``: the same answer as on the undamaged table (a flip in bytes nobody reads,
  such as the writer's name, or one a checksum caught and a fallback read around);
* ``typed``: an ``MvTableError`` (``CorruptSegmentError``/``CorruptMetadataError``/…);
* ``untyped``: any other exception;
* ``wrong``: a different answer and no error — the outcome that must never happen.

``positions`` picks the flips: every bit of the file (``full``) or a deterministic sample of
``count`` (byte, bit) pairs spread over the whole file, the footer included.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from mvtable import Table
from mvtable.connector.keys.commit import keyed_rows, lookup
from mvtable.connector.stats import Predicate
from mvtable.errors import MvTableError
from mvtable.lineage.snapshot_cache import process_snapshots

OUTCOMES = ("correct", "typed", "untyped", "wrong")
KEY = "k"
ROWS = 400
ROW_GROUP_ROWS = 100


def rows(start: int, n: int) -> pa.Table:
    k = pa.array(range(start, start + n), pa.int64())
    return pa.table(
        {
            KEY: k,
            "name": pa.array([f"name-{i % 5}" for i in range(start, start + n)]),
            "price": pc.multiply(pc.cast(k, pa.float64()), 0.25),
            "qty": pa.array([i % 17 for i in range(start, start + n)], pa.int32()),
        }
    )


def make_table(uri: str, *, checkpoint_interval: int = 100) -> Table:
    """A keyed table: one segment of ``ROWS`` rows in row groups of ``ROW_GROUP_ROWS``
    (version 1), and a delete of a few rows (version 2)."""
    t = Table.create(
        uri,
        schema=rows(0, 1).schema,
        primary_key=[KEY],
        properties={"rowGroupRows": str(ROW_GROUP_ROWS), "checkpointInterval": str(checkpoint_interval)},
    )
    t.append(rows(0, ROWS))
    t.delete(pc.field(KEY).isin([3, 150, 151, 399]))
    return t


def _scan_all(uri: str) -> object:
    return Table.open(uri).to_arrow().sort_by(KEY).to_pylist()


def _scan_predicate(uri: str) -> object:
    # skips the first two row groups by the log's statistics
    return Table.open(uri).to_arrow(predicates=[Predicate(KEY, ">=", 250)]).sort_by(KEY).to_pylist()


def _lookup(uri: str) -> object:
    t = Table.open(uri)
    snapshot = t.snapshot()
    keys = pa.table({KEY: pa.array([0, 3, 42, 151, 260, 398, 5000], pa.int64())})
    found = lookup(t.io, snapshot, keyed_rows(keys.schema, [KEY], keys))
    return ({sid: p.tolist() for sid, p in found.positions.items()}, found.matched.tolist())


READS: dict[str, Callable[[str], object]] = {"scan": _scan_all, "scan+predicate": _scan_predicate, "key lookup": _lookup}


@dataclass
class Report:
    """Outcomes per read path, and a few examples of the bad ones."""

    name: str
    flips: int = 0
    outcomes: dict[str, Counter[str]] = field(default_factory=lambda: {r: Counter() for r in READS})
    bad: list[str] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)

    def count(self, outcome: str) -> int:
        return sum(c[outcome] for c in self.outcomes.values())

    def lines(self) -> list[str]:
        head = f"{self.name}: {self.flips} single-bit flips × {len(READS)} reads"
        body = [f"    {read:<15}" + "  ".join(f"{o} {c[o]:>5}" for o in OUTCOMES) for read, c in self.outcomes.items()]
        kinds = ", ".join(f"{k} {n}" for k, n in self.errors.most_common(6))
        return [head, *body, f"    typed errors: {kinds}", *(f"    BAD {b}" for b in self.bad[:10])]


def positions(size: int, *, count: int | None) -> Iterator[tuple[int, int]]:
    """(byte, bit) pairs: all ``8 * size`` when ``count`` is None, else ``count`` of them at
    an even stride over the file, the bit turning with the byte."""
    if count is None or count >= 8 * size:
        for i in range(size):
            for b in range(8):
                yield i, b
        return
    for j in range(count):
        i = j * size // count
        yield i, (i * 5 + j) % 8


def _replace(path: str, data: bytes) -> None:
    """A new file in place of ``path`` (a new inode): local segments are read memory-mapped,
    and truncating a mapped file under a reader is a crash, not a flipped bit."""
    tmp = path + ".flip"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def run(name: str, uri: str, rel_path: str, *, count: int | None) -> Report:
    """Flip bits of ``rel_path`` (in table ``uri``) one at a time and classify the reads."""
    path = os.path.join(uri, rel_path)
    with open(path, "rb") as f:
        original = f.read()
    expected = {read: fn(uri) for read, fn in READS.items()}
    report = Report(name)
    try:
        for i, bit in positions(len(original), count=count):
            damaged = bytearray(original)
            damaged[i] ^= 1 << bit
            _replace(path, bytes(damaged))
            report.flips += 1
            for read, fn in READS.items():
                process_snapshots().clear()  # each read as a fresh process makes it: nothing of the table kept
                try:
                    answer = fn(uri)
                except MvTableError as exc:
                    outcome = "typed"
                    report.errors[type(exc).__name__] += 1
                    if rel_path not in str(exc) and os.path.basename(rel_path) not in str(exc):
                        outcome = "untyped"  # typed, but not naming the damaged file
                        report.bad.append(f"byte {i} bit {bit} {read}: error does not name the file: {exc}"[:300])
                except Exception as exc:
                    outcome = "untyped"
                    report.bad.append(f"byte {i} bit {bit} {read}: {type(exc).__name__}: {exc}"[:300])
                else:
                    outcome = "correct" if answer == expected[read] else "wrong"
                    if outcome == "wrong":
                        report.bad.append(f"byte {i} bit {bit} {read}: wrong answer, no error")
                report.outcomes[read][outcome] += 1
    finally:
        _replace(path, original)
    return report
