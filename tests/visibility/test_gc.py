"""Visibility GC planning (pure): which DV files may go, and delete batches."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mvtable.visibility.files import DV_DIR
from mvtable.visibility.gc import batches, path_bytes, plan_dv_gc

NOW = 1_700_000_000_000  # ms
HOUR = 3600.0


@dataclass(frozen=True)
class Info:
    name: str
    size: int
    mtime: float | None


def f(name: str, *, age_s: float | None, size: int = 100) -> Info:
    return Info(f"{name}.dv", size, None if age_s is None else NOW / 1000 - age_s)


def p(name: str) -> str:
    return f"{DV_DIR}/{name}.dv"


def test_needed_files_are_kept_however_old():
    plan = plan_dv_gc([f("a", age_s=10 * 86400)], needed={p("a")}, superseded={p("a")}, now_ms=NOW, grace_s=HOUR)
    assert plan.delete == ()
    assert plan.kept_needed == 1


def test_superseded_files_go_at_once_even_when_young():
    plan = plan_dv_gc([f("old", age_s=1), f("cur", age_s=1)], needed={p("cur")}, superseded={p("old")}, now_ms=NOW, grace_s=HOUR)
    assert plan.delete == (p("old"),)
    assert (plan.superseded, plan.orphans, plan.kept_needed, plan.kept_in_grace) == (1, 0, 1, 0)


def test_a_never_committed_file_survives_the_grace_period():
    """The DV file of a delete still in flight: written, not yet committed. The log does not
    name it, so only its age can protect it."""
    listing = [f("inflight", age_s=5), f("orphan", age_s=2 * HOUR)]
    plan = plan_dv_gc(listing, needed=set(), superseded=set(), now_ms=NOW, grace_s=HOUR)
    assert plan.delete == (p("orphan"),)
    assert (plan.orphans, plan.kept_in_grace) == (1, 1)
    # exactly at the grace boundary it may go
    plan = plan_dv_gc([f("edge", age_s=HOUR)], needed=set(), now_ms=NOW, grace_s=HOUR)
    assert plan.delete == (p("edge"),)


def test_unknown_or_future_mtimes_are_kept():
    listing = [f("nomtime", age_s=None), f("future", age_s=-600)]
    plan = plan_dv_gc(listing, needed=set(), now_ms=NOW, grace_s=0)
    assert plan.delete == ()
    assert plan.kept_in_grace == 2


def test_zero_grace_removes_every_unreferenced_file():
    listing = [f("a", age_s=0), f("b", age_s=1), f("c", age_s=1)]
    plan = plan_dv_gc(listing, needed={p("c")}, now_ms=NOW, grace_s=0)
    assert plan.delete == (p("a"), p("b"))


def test_sizes_and_stray_files():
    listing = [Info("x.dv", 10, 0.0), Info("y.dv.123.tmp", 7, 0.0), Info("z.dv", 1000, 0.0)]
    plan = plan_dv_gc(listing, needed={f"{DV_DIR}/z.dv"}, now_ms=NOW, grace_s=HOUR)
    assert plan.delete == (f"{DV_DIR}/x.dv", f"{DV_DIR}/y.dv.123.tmp")
    assert plan.delete_bytes == 17


def test_needed_paths_outside_the_listing_are_ignored():
    plan = plan_dv_gc([f("a", age_s=0)], needed={"data/elsewhere.dv", p("a")}, now_ms=NOW, grace_s=0)
    assert plan.delete == ()


def test_negative_grace_is_refused():
    with pytest.raises(ValueError):
        plan_dv_gc([], needed=set(), now_ms=NOW, grace_s=-1)


def test_batches_respect_the_byte_bound():
    paths = [p(str(i)) for i in range(10)]
    n = path_bytes(paths[0])
    out = batches(paths, max_bytes=3 * n)
    assert [len(b) for b in out] == [3, 3, 3, 1]
    assert [x for b in out for x in b] == paths
    assert batches([], max_bytes=10) == []
    assert batches(["a" * 50, "b"], max_bytes=10) == [["a" * 50], ["b"]]
    assert batches(["é"], max_bytes=1) == [["é"]]  # two UTF-8 bytes, alone
    with pytest.raises(ValueError):
        batches(["a"], max_bytes=0)


@given(st.lists(st.text(min_size=1, max_size=40), max_size=60), st.integers(min_value=1, max_value=200))
def test_batches_property(paths, max_bytes):
    out = batches(paths, max_bytes=max_bytes)
    assert [x for b in out for x in b] == paths
    for b in out:
        assert b
        assert len(b) == 1 or sum(path_bytes(x) for x in b) <= max_bytes
    # greedy: no batch could have taken the next batch's first path
    for b, nxt in zip(out, out[1:]):
        assert sum(path_bytes(x) for x in b) + path_bytes(nxt[0]) > max_bytes


@given(
    st.dictionaries(
        st.text("abcdef", min_size=1, max_size=4),
        st.tuples(st.sampled_from(["needed", "superseded", "unknown"]), st.one_of(st.none(), st.floats(-100, 10_000))),
        max_size=20,
    ),
    st.floats(0, 5_000),
)
def test_plan_never_deletes_needed_or_young_unknown_files(files, grace_s):
    listing = [f(name, age_s=age) for name, (_, age) in files.items()]
    needed = {p(n) for n, (kind, _) in files.items() if kind == "needed"}
    superseded = {p(n) for n, (kind, _) in files.items() if kind == "superseded"}
    plan = plan_dv_gc(listing, needed=needed, superseded=superseded, now_ms=NOW, grace_s=grace_s)
    deleted = set(plan.delete)
    assert not deleted & needed
    assert superseded <= deleted
    for name, (kind, age) in files.items():
        if kind == "unknown":
            old_enough = age is not None and (NOW / 1000 - age) * 1000 <= NOW - round(grace_s * 1000)
            assert (p(name) in deleted) == old_enough
