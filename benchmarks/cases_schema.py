"""Schema evolution: reading a table whose schema changed 20 times against the same rows in a table that never changed.

Both tables hold the same rows in the same number of segments. The evolved one had a schema
change before each of its appends after the first (renames of a few columns, and one column added
and dropped again), so almost every segment was written under another schema than the one read
and goes through the read-by-id projection; the other reads every file as it is.
"""

from __future__ import annotations

import shutil

import pyarrow as pa
import pyarrow.compute as pc

from .common import CaseResult, System, log, measure
from .data import Built

CHANGES = 20
RENAMED = ("l_comment", "l_shipinstruct", "l_shipmode", "l_returnflag")


def _build(built: Built, lineitem: pa.Table) -> tuple[str, str, dict[str, str]]:
    """(the plain table, the evolved table, evolved name → plain name)."""
    from mvtable.connector import Table

    root = built.scratch / "schema"
    shutil.rmtree(root, ignore_errors=True)
    plain_uri, evolved_uri = str(root / "plain"), str(root / "evolved")
    props = {"rowGroupRows": str(built.row_group_rows)}
    step = -(-lineitem.num_rows // (CHANGES + 1))
    slices = [lineitem.slice(i, step) for i in range(0, lineitem.num_rows, step)]
    plain = Table.create(plain_uri, schema=lineitem.schema, properties=props)
    for s in slices:
        plain.append(s)
    evolved = Table.create(evolved_uri, schema=lineitem.schema, properties=props)
    names = {n: n for n in lineitem.schema.names}  # plain name → current evolved name
    extra = False
    for i, s in enumerate(slices):
        if i:
            with evolved.update_schema() as u:
                if i == CHANGES // 2:
                    u.add_column("extra", pa.int64())
                    extra = True
                elif i == CHANGES // 2 + 1:
                    u.drop_column("extra")
                    extra = False
                else:
                    col = RENAMED[i % len(RENAMED)]
                    new = f"{col}_v{i}"
                    u.rename_column(names[col], new)
                    names[col] = new
        data = s.rename_columns([names[n] for n in s.schema.names])
        if extra:
            data = data.append_column("extra", pa.array([i] * data.num_rows, pa.int64()))
        evolved.append(data)
    assert evolved.history()[-1].version == 2 * len(slices) - 1, "one schema change before each append after the first"
    return plain_uri, evolved_uri, {v: k for k, v in names.items()}


def run(built: Built, lineitem: pa.Table, *, repeat: int) -> list[CaseResult]:
    from mvtable.connector import Table

    plain_uri, evolved_uri, to_plain = _build(built, lineitem)
    log(f"  schema: {lineitem.num_rows} rows in {CHANGES + 1} segments, {CHANGES} schema changes vs none")

    def read(uri: str) -> float:
        t = Table(uri).to_arrow()
        return float(
            pc.sum(t.column(t.schema.names.index(next(n for n in t.schema.names if n.startswith("l_quantity"))))).as_py()
        )

    systems = {"plain": System(lambda: read(plain_uri)), "evolved": System(lambda: read(evolved_uri))}
    t = measure(systems, repeat=repeat)
    a, b = Table(plain_uri).to_arrow(), Table(evolved_uri).to_arrow()
    same = b.rename_columns([to_plain.get(n, n) for n in b.schema.names]).equals(a)
    return [
        CaseResult(
            "schema_evolved_scan",
            "schema",
            f"Table.to_arrow of a table whose schema changed {CHANGES} times (renames, a column added and dropped)",
            t["evolved"].median,
            "the same rows, schema never changed",
            t["plain"].median,
            target=1.05,
            target_text="≤ 1.05×",
            systems={k: v.to_json() for k, v in t.items()},
            details={"segments": CHANGES + 1, "changes": CHANGES},
            check="ok" if same else "the evolved table's rows differ from the plain one's",
        )
    ]
