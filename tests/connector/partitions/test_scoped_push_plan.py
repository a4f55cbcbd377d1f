"""What ``scoped_push.plan_scoped`` decides, checked against the rows themselves.

Random tables (several appends of random days, numbers and text, with nulls and deletes)
and random predicates: a segment kept holds no live row the predicate matches, a segment
replaced whole holds only such rows, and one rewritten holds both. The metadata-only
decisions (``classify``) are what this guards: a wrong proof would replace rows the push
was not asked to, or keep rows it was."""

from __future__ import annotations

import datetime as dt
import random

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable.connector import Table, scoped_push
from mvtable.connector.scan import ScanTask, read_task
from mvtable.connector.schema import schema_from_json

SCHEMA = pa.schema([("day", pa.date32()), ("n", pa.int64()), ("s", pa.string())])
DAYS = [dt.date(2024, 1, d) for d in range(1, 6)]


def random_rows(rng: random.Random, k: int) -> pa.Table:
    one_day = rng.random() < 0.6  # most appends hold one day: statistics then prove things
    day = rng.choice(DAYS)
    return pa.table(
        {
            "day": [day if one_day else rng.choice([*DAYS, None]) for _ in range(k)],
            "n": [rng.choice([None, *range(10)]) if rng.random() < 0.9 else None for _ in range(k)],
            "s": [rng.choice(["a", "b", "c", None]) for _ in range(k)],
        },
        schema=SCHEMA,
    )


def random_predicate(rng: random.Random) -> pc.Expression:
    f = pc.field
    day = rng.choice(DAYS)
    terms = [
        f("day") == day,
        f("day") >= day,
        f("day") < day,
        f("n") > rng.randrange(10),
        f("n") <= rng.randrange(10),
        f("n") != rng.randrange(10),
        f("s").isin(rng.sample(["a", "b", "c"], 2)),
        f("s").is_null(),
        f("n").is_valid(),
        (f("n") > 3) | (f("s") == "a"),  # no conjunction: read
    ]
    out = rng.choice(terms)
    for _ in range(rng.randrange(3)):
        out = out & rng.choice(terms)
    return out


def live_matches(t: Table, snapshot, sid: str, predicate: pc.Expression) -> tuple[int, int]:
    seg = snapshot.segments[sid]
    schema = schema_from_json(snapshot.table_schema)
    task = ScanTask(seg.file, tuple(range(len(seg.file.row_groups))), snapshot.dvs.get(sid))
    live = matched = 0
    for table in read_task(t.io, task, columns=None, schema=schema):
        live += table.num_rows
        matched += table.filter(predicate).num_rows
    return live, matched


@pytest.mark.parametrize("seed", range(12))
def test_the_plan_keeps_replaces_and_rewrites_exactly_by_the_rows(tmp_path, seed):
    rng = random.Random(seed)
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, properties={"rowGroupRows": "4"})
    for _ in range(6):
        t.append(random_rows(rng, rng.randrange(1, 12)))
    t.delete(pc.field("n") == rng.randrange(10))
    snapshot = t.snapshot()
    decided = 0  # segments decided from metadata alone: the part under test
    for _ in range(8):
        predicate = random_predicate(rng)
        plan = scoped_push.plan_scoped(t.io, snapshot, scoped_push.ScopeRequest(predicate=predicate))
        decided += len(snapshot.visible_segment_ids()) - plan.probed
        for sid in snapshot.visible_segment_ids():
            live, matched = live_matches(t, snapshot, sid, predicate)
            where = f"{predicate} on segment {sid} ({matched} of {live} live rows match)"
            if sid in plan.replaced:
                assert matched == live, where
            elif sid in plan.rewritten:
                assert 0 < matched < live, where
            else:
                assert matched == 0, where
    assert decided > 0
