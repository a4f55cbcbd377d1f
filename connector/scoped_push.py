"""Scoped consistent pushes: replace the rows a predicate matches, or the partitions the data holds.

``t.overwrite(data, consistent_push=True, replace_where=pc.field("ts") >= …)`` replaces the
rows ``replace_where`` matches; ``partition_overwrite="dynamic"`` replaces the partitions
``data`` has rows in (Delta's ``replaceWhere`` and dynamic partition overwrite, Iceberg's
``ReplacePartitions``). Either is a consistent push like any other (one lineage entry,
all-or-nothing, rolled back in one call), whose entry records its scope
(``lineage.push_scopes``) so that pushes of disjoint partitions run at the same time.

The phases, in the order a write runs them:

1. ``check_rows``: every row of the data must satisfy ``replace_where`` (a row where it is
   false or null is a ``ReplaceWhereViolationError`` naming the row), before anything starts.
2. ``scoped_classify.classify``: each segment visible at the read snapshot, from metadata alone (its
   partition values and row-group statistics): none of its rows can match (kept), every row
   provably matches (replaced whole: a metadata change), or some may (``probe``d).
3. ``probe`` reads only the predicate's columns of the segments ``classify`` could not
   decide: no live row matches (kept), all do (replaced whole), or some (rewritten:
   copy-on-write, its live rows that do not match move to new segments of the push).
4. ``scope_of``: the partitions of the data and of every replaced segment.
5. After the push started, ``write_kept`` writes the rows the rewritten segments keep.

The segments replaced are those of the read snapshot, never the newest: an append that
lands while the push runs stays visible after it (the push replaces what it read). A
delete that lands meanwhile on a segment the push *rewrites* would be lost with the copy,
so it is a conflict at the push's end (``lineage.operations.push_segments``).

A predicate aligned to partitions (or to the statistics, which partitioned segments have
tight) is decided by ``classify`` alone: no data file is read or written.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mvtable.dvref import DeletionVectorRef
from mvtable.errors import InvalidOptionError, ReplaceWhereViolationError
from mvtable.lineage.actions import SegmentFile
from mvtable.lineage.partitioning import PartitionSpec
from mvtable.lineage.push_scopes import PushScope, ScopeValue
from mvtable.lineage.snapshot import SegmentState, Snapshot
from mvtable.storage import FileIO

from .deletes import evaluate
from .expressions import check_filter, referenced_columns
from .keys.commit import KeyedRows, check_absent, keyed_rows, segment_keys
from .partitions.conjuncts import conjuncts
from .partitions.scope_labels import default_spec, partition_label, segment_partition
from .partitions.spec import spec_columns
from .partitions.writing import partition_index
from .scan import ScanTask, read_task
from .schema import schema_from_json
from .scoped_classify import KEEP, PROBE, REPLACE, classify

__all__ = [
    "DYNAMIC",
    "ScopeRequest",
    "ScopedPlan",
    "check_options",
    "check_keys",
    "check_rows",
    "data_partitions",
    "plan_scoped",
    "probe",
    "request",
    "scope_of",
    "write_kept",
]

DYNAMIC = "dynamic"
_PREDICATE_CHARS = 10_000  # what PushScope.predicate holds
_PartitionKey = tuple[ScopeValue, ...]


# -- options ------------------------------------------------------------------------------


def request(
    data: pa.Table | None, *, replace_where: object, partition_overwrite: object, text: str | None = None
) -> ScopeRequest | None:
    """The scope a write's options ask for (None: no scope, the push replaces the whole table).

    ``text`` is the predicate as the user wrote it (Spark's SQL), for the lineage entry.

    Raises:
        InvalidOptionError: both options, ``replace_where`` that is no expression, or an unknown
            ``partition_overwrite``."""
    if replace_where is None and partition_overwrite is None:
        return None
    if replace_where is not None and partition_overwrite is not None:
        raise InvalidOptionError(
            "replace_where and partition_overwrite both say what a push replaces: give one "
            "(replace_where=<predicate>, or partition_overwrite='dynamic' for the partitions the data holds)"
        )
    if partition_overwrite is not None:
        if partition_overwrite != DYNAMIC:
            raise InvalidOptionError(
                f"partition_overwrite takes 'dynamic' (replace the partitions the data holds), not {partition_overwrite!r}"
            )
        return ScopeRequest(dynamic=True, data=data)
    if not isinstance(replace_where, pc.Expression):
        raise InvalidOptionError(
            f"replace_where must be a pyarrow.compute.Expression (e.g. pc.field('day') == date(2024, 1, 5)), "
            f"not {type(replace_where).__name__}"
        )
    return ScopeRequest(predicate=replace_where, predicate_text=text, data=data)


def check_options(*, mode: str, consistent_push: bool, replace_where: object, partition_overwrite: object) -> None:
    """Refuse scoped-push options that do not go together.

    A scoped push is a consistent push: ``replace_where`` and ``partition_overwrite`` need
    ``consistent_push=True`` and mode overwrite (a plain overwrite replaces the whole table).

    Raises:
        InvalidOptionError: one without ``consistent_push`` or overwrite, both at once, or an
            unknown ``partition_overwrite``."""
    if replace_where is None and partition_overwrite is None:
        return
    what = "replace_where" if replace_where is not None else "partition_overwrite"
    if replace_where is not None and partition_overwrite is not None:
        raise InvalidOptionError(
            "replace_where and partition_overwrite both say what a push replaces: give one "
            "(replace_where=<predicate>, or partition_overwrite='dynamic' for the partitions the data holds)"
        )
    if partition_overwrite is not None and partition_overwrite != DYNAMIC:
        raise InvalidOptionError(
            f"partition_overwrite takes 'dynamic' (replace the partitions the data holds), not {partition_overwrite!r}"
        )
    if mode != "overwrite" or not consistent_push:
        raise InvalidOptionError(
            f"{what} scopes a consistent push: use it with mode('overwrite') and consistent_push=True "
            "(a plain overwrite replaces the whole table)"
        )


# -- 1. the data ----------------------------------------------------------------------------


def check_rows(
    data: pa.Table, predicate: pc.Expression, *, schema: pa.Schema, first_row: int = 0, source: str = "the data"
) -> None:
    """Refuse data with a row that ``predicate`` does not hold for (false or null), naming the first.

    ``first_row`` is the position of ``data``'s first row in what the write was given, and
    ``source`` what that is (a Spark task checks its batches one at a time).

    Raises:
        InvalidFilterError: ``predicate`` does not fit the table's schema.
        ReplaceWhereViolationError: a row of ``data`` is outside ``predicate``."""
    check_filter(predicate, schema, what="replace_where")
    if not data.num_rows:
        return
    holds = evaluate(data, predicate)
    bad = pc.invert(pc.fill_null(holds, False))
    first = pc.index(bad, True).as_py()
    if first < 0:
        return
    row = data.slice(first, 1).to_pylist()[0]
    count = pc.sum(bad).as_py()
    raise ReplaceWhereViolationError(
        f"row {first_row + first} of {source} is outside replace_where {predicate}: {_row_text(row)} "
        f"({count} row(s) are); a scoped push only writes rows it replaces, so it is refused and nothing of it becomes visible"
    )


def _row_text(row: Mapping[str, Any]) -> str:
    items = [f"{k}={v!r}" if isinstance(v, (str, bytes)) else f"{k}={v}" for k, v in list(row.items())[:12]]
    return "{" + ", ".join(items) + (", …" if len(row) > 12 else "") + "}"


def data_partitions(data: pa.Table, spec: PartitionSpec, table_schema: dict[str, Any]) -> list[_PartitionKey]:
    """The partition tuples (the log's JSON form) of ``data``'s rows under ``spec``, each once, in first-seen order.

    Raises:
        PartitionSpecError: a spec field's column is no longer in the table."""
    return partition_index(data, spec, table_schema)[1]


# -- 2. what metadata decides: ``scoped_classify.classify`` -----------------------------------


# -- 3. what the rows decide ------------------------------------------------------------------


@dataclass(frozen=True)
class ProbeResult:
    kind: str  # KEEP, REPLACE or "rewrite"
    matched: int  # live rows the predicate matches


def probe(io: FileIO, snapshot: Snapshot, seg: SegmentState, match: RowMatch, schema: pa.Schema) -> ProbeResult:
    """Read the columns ``match`` needs of ``seg``'s live rows: none match (keep), all do (replace whole), or some (rewrite)."""
    columns = match.columns(schema)
    task = ScanTask(seg.file, tuple(range(len(seg.file.row_groups))), snapshot.dvs.get(seg.id))
    matched = live = 0
    for table in read_task(io, task, columns=columns, use_threads=True, read_rows=1 << 20, schema=schema):
        live += table.num_rows
        matched += int(pc.sum(match.rows(table)).as_py() or 0)
    if matched == 0:
        return ProbeResult(KEEP, 0)
    return ProbeResult(REPLACE if matched == live else "rewrite", matched)


class RowMatch(Protocol):
    """Which rows a scoped push replaces: a predicate's true rows (``PredicateMatch``), or the rows of some partitions (``PartitionMatch``)."""

    def columns(self, schema: pa.Schema) -> list[str] | None:
        """The columns ``rows`` reads (None: all)."""

    def rows(self, table: pa.Table) -> pa.Array:
        """A boolean per row of ``table`` (no nulls): True for the rows the push replaces."""


@dataclass(frozen=True)
class PredicateMatch:
    predicate: pc.Expression

    def columns(self, schema: pa.Schema) -> list[str] | None:
        return referenced_columns(self.predicate, schema)

    def rows(self, table: pa.Table) -> pa.Array:
        return pc.fill_null(evaluate(table, self.predicate), False).combine_chunks()


@dataclass(frozen=True)
class PartitionMatch:
    """The rows whose partition under ``spec`` (the log's JSON form) is one of ``partitions``.

    Used only for segments of an older spec (after the partitioning changed), whose rows may
    fall in several partitions of the current one."""

    spec: PartitionSpec
    table_schema: dict[str, Any]
    partitions: frozenset[_PartitionKey]

    def columns(self, schema: pa.Schema) -> list[str] | None:
        return [c for _, c, _ in spec_columns(self.spec, self.table_schema) if c is not None]

    def rows(self, table: pa.Table) -> pa.Array:
        numbers, found = partition_index(table, self.spec, self.table_schema)
        wanted = np.array([part in self.partitions for part in found], dtype=bool)
        return pa.array(wanted[numbers] if len(found) else np.zeros(0, dtype=bool), pa.bool_())


# -- 4. the plan -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScopeRequest:
    """What the caller asked a scoped push to replace.

    ``predicate`` (``replace_where``) with its text for people, or ``dynamic``; ``data`` the
    rows it writes when known before the push starts (the Python API; Spark's tasks write
    them later)."""

    predicate: pc.Expression | None = None
    predicate_text: str | None = None
    dynamic: bool = False
    data: pa.Table | None = field(default=None, compare=False, repr=False)
    # the partitions (default spec, JSON form) the data writes, when known from its segments
    # rather than its rows (a Spark dynamic overwrite, planned once the tasks ran)
    written: tuple[_PartitionKey, ...] | None = None

    @property
    def deferred(self) -> bool:
        """A dynamic overwrite whose partitions are not known yet: planned and committed at its end."""
        return self.dynamic and self.data is None and self.written is None


@dataclass(frozen=True)
class ScopedPlan:
    """What a scoped push replaces, decided at its read snapshot.

    ``replaced`` go whole; ``rewritten`` go too, but their live rows that ``match`` leaves
    alone move to new segments of the push (``write_kept``); ``dvs`` are the rewritten
    segments' deletion vectors at the read (a delete on one since is a conflict)."""

    scope: PushScope
    replaced: tuple[str, ...] = ()
    rewritten: tuple[str, ...] = ()
    dvs: dict[str, DeletionVectorRef | None] = field(default_factory=dict)
    match: RowMatch | None = None
    probed: int = 0  # segments whose rows were read to decide
    check: pc.Expression | None = None  # replace_where: every written row must satisfy it (checked by write_data)

    @property
    def segments_from(self) -> tuple[str, ...]:
        return (*self.replaced, *self.rewritten)

    def parameters(self) -> dict[str, Any]:
        """What the push's commits record of its scope (``history()``, ``mvtable history``)."""
        s = self.scope
        return {
            **({"replaceWhere": s.predicate} if s.predicate is not None else {}),
            **({"partitionOverwriteMode": DYNAMIC} if s.dynamic else {}),
            "partitions": list(s.labels[:20]) + ([f"… {len(s.labels) - 20} more"] if len(s.labels) > 20 else []),
            "replacedSegments": len(self.replaced),
            "rewrittenSegments": len(self.rewritten),
            "probedSegments": self.probed,
        }


def plan_scoped(io: FileIO, snapshot: Snapshot, request: ScopeRequest) -> ScopedPlan:
    """Which segments of ``snapshot`` a scoped push replaces or rewrites, and its scope (phases 2 to 4).

    Raises:
        InvalidFilterError: the predicate does not fit the table's schema."""
    schema = schema_from_json(snapshot.table_schema) if snapshot.exists else None
    spec = default_spec(snapshot)
    if request.data is not None and schema is not None:
        written = data_partitions(request.data, spec, snapshot.table_schema)
    else:
        written = list(request.written or ())
    if not snapshot.exists or schema is None:
        return ScopedPlan(scope=_scope(snapshot, spec, written, request), check=request.predicate)
    match: RowMatch
    decide: Callable[[SegmentState], str]
    if request.dynamic:
        wanted = set(written)
        match = PartitionMatch(spec, snapshot.table_schema, frozenset(wanted))

        def decide(seg: SegmentState) -> str:
            spec_id, partition = segment_partition(seg)
            if spec_id == spec.spec_id:
                return REPLACE if partition in wanted else KEEP
            return PROBE  # an older grain: its rows of the data's partitions are found by reading

    else:
        assert request.predicate is not None
        check_filter(request.predicate, schema, what="replace_where")
        match = PredicateMatch(request.predicate)
        terms = conjuncts(request.predicate, schema)
        cache: dict[tuple[int, _PartitionKey | None], Any] = {}

        def decide(seg: SegmentState) -> str:
            return classify(snapshot, seg, terms, schema, cache=cache)

    replaced: list[str] = []
    rewritten: list[str] = []
    probed = 0
    for seg in snapshot.visible_segments():
        kind = decide(seg)
        if kind == PROBE:
            probed += 1
            kind = probe(io, snapshot, seg, match, schema).kind
        if kind == REPLACE:
            replaced.append(seg.id)
        elif kind != KEEP:
            rewritten.append(seg.id)
    touched = [snapshot.segments[sid] for sid in (*replaced, *rewritten)]
    return ScopedPlan(
        scope=scope_of(snapshot, spec, written, touched, request),
        replaced=tuple(replaced),
        rewritten=tuple(rewritten),
        dvs={sid: snapshot.dvs.get(sid) for sid in rewritten},
        match=match,
        probed=probed,
        check=request.predicate,
    )


def scope_of(
    snapshot: Snapshot,
    spec: PartitionSpec,
    written: Sequence[_PartitionKey],
    touched: Sequence[SegmentState],
    request: ScopeRequest,
) -> PushScope:
    """The push's scope: the partitions the data writes and those of every segment it replaces or rewrites."""
    keys: dict[_PartitionKey, None] = dict.fromkeys(written)
    for seg in touched:
        spec_id, partition = segment_partition(seg)
        if spec_id == spec.spec_id:
            keys[partition] = None
        # a segment of an older grain is named by no partition of this spec: a push that
        # wants its rows too probes it, finds them and holds the same segment, which blocks
    return _scope(snapshot, spec, list(keys), request)


def _scope(snapshot: Snapshot, spec: PartitionSpec, keys: Sequence[_PartitionKey], request: ScopeRequest) -> PushScope:
    arrow = schema_from_json(snapshot.table_schema) if spec.fields else None
    keys = [k for k in keys if len(k) == len(spec.fields)]
    return PushScope(
        spec_id=spec.spec_id,
        partitions=tuple(keys),
        labels=tuple(partition_label(spec, snapshot.table_schema, k, arrow=arrow) for k in keys),
        predicate=_shown(request.predicate_text if request.predicate_text is not None else request.predicate),
        dynamic=request.dynamic,
    )


def _shown(predicate: object) -> str | None:
    """A predicate as the lineage entry keeps it for people: its text, cut short if it is very long."""
    if predicate is None:
        return None
    text = str(predicate)
    return text if len(text) <= _PREDICATE_CHARS else text[: _PREDICATE_CHARS - 1] + "…"


# -- 5. after the push started: the rows rewritten segments keep -------------------------------


def write_kept(
    io: FileIO,
    snapshot: Snapshot,
    plan: ScopedPlan,
    *,
    write: Callable[[pa.Table], list[SegmentFile]],
) -> list[SegmentFile]:
    """Copy-on-write: each rewritten segment's live rows that the push does not replace, written by ``write``.

    They join the push's segments, so readers see them exactly when the push's own rows."""
    if not plan.rewritten:
        return []
    assert plan.match is not None
    schema = schema_from_json(snapshot.table_schema)
    out: list[SegmentFile] = []
    try:
        for sid in plan.rewritten:
            seg = snapshot.segments[sid]
            task = ScanTask(seg.file, tuple(range(len(seg.file.row_groups))), plan.dvs.get(sid))
            kept = []
            for table in read_task(io, task, columns=None, use_threads=True, read_rows=1 << 20, schema=schema):
                keep = pc.invert(plan.match.rows(table))
                kept.append(table.filter(keep))
            rows = pa.concat_tables(kept) if kept else schema.empty_table()
            if rows.num_rows:
                out.extend(write(rows))
    except BaseException:
        io.delete([s.path for s in out])
        raise
    return out


# -- keys ----------------------------------------------------------------------------------------


def check_keys(io: FileIO, read: Snapshot, plan: ScopedPlan, rows: KeyedRows, kept: Sequence[SegmentFile]) -> KeyedRows:
    """The keys a scoped push on a keyed table makes visible, checked: the data's and those of the rows it keeps.

    They must repeat neither among themselves (a new row with the key of a row a rewritten
    segment keeps) nor in the segments it leaves alone. Keys of the rows it replaces are free.

    ``rows`` may already hold every key (a writer that read them back from all of its
    segments, kept ones included: ``kept`` is then empty); they are checked for repeats
    either way.

    Raises:
        DuplicateKeyError: a key repeats, or is in a segment the push does not replace."""
    keys = rows.keys
    if kept:
        keys = pa.concat_tables([keys, segment_keys(io, kept, rows.columns).keys.cast(keys.schema)])
    rows = keyed_rows(keys.schema, rows.columns, keys)
    replaced = set(plan.segments_from)
    check_absent(io, read, rows, segment_ids=[sid for sid in read.visible_segment_ids() if sid not in replaced])
    return rows
