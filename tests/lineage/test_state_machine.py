"""Property test of the segment-lineage state machine (``mvtable.lineage.snapshot``).

A ``RuleBasedStateMachine`` drives random appends, overwrites, consistent pushes (start,
add segments, end), reverts, retention and deliberately invalid operations through
``apply_commit`` (and, in the second machine, through a real ``CommitLog`` on disk) and
compares every step with ``Model``: a deliberately naive re-statement of §5 that shares no
code with ``mvtable.lineage.snapshot``.

Rules of the model that Pinot's design leaves open and that the implementation decides
(the model follows them, so they are pinned here):

* a segment may be in ``segments_from`` of at most one IN_PROGRESS entry;
* a segment belongs to at most one entry's ``segments_to`` (declared in the start or added
  later with ``lineage_entry``), and a start may declare ``segments_to`` it uploads later;
* ``purge`` drops a finished entry once the segments it hides are physically removed.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from mvtable.errors import InvalidLineageTransitionError, SegmentInUseError
from mvtable.lineage.actions import (
    AddSegment,
    Commit,
    LineageEnd,
    LineagePurge,
    LineageRevert,
    LineageStart,
    MetadataAction,
    RemoveSegment,
    SegmentFile,
)
from mvtable.lineage.checkpoint import checkpoint_bytes, parse_checkpoint
from mvtable.lineage.enums import Operation
from mvtable.lineage.log import CommitLog
from mvtable.lineage.snapshot import Snapshot, apply_commit, replay
from mvtable.storage import LocalFileIO

IN_PROGRESS, COMPLETED, REVERTED = "IN_PROGRESS", "COMPLETED", "REVERTED"

# Bounds: the whole file runs in well under 30 s.
MEMORY_SETTINGS = settings(
    max_examples=80,
    stateful_step_count=30,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
LOG_SETTINGS = settings(
    max_examples=20,
    stateful_step_count=25,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


# --------------------------------------------------------------------------------------------
# The model: the lineage rules (README, "How it works") in the most literal form.
# --------------------------------------------------------------------------------------------
class Model:
    def __init__(self) -> None:
        self.removed: dict[str, bool] = {}  # every segment ever added -> physically removed?
        self.entries: dict[str, dict] = {}  # id -> {"from": set, "to": set, "state": str}

    def clone(self) -> Model:
        m = Model()
        m.removed = dict(self.removed)
        m.entries = {k: {"from": set(e["from"]), "to": set(e["to"]), "state": e["state"]} for k, e in self.entries.items()}
        return m

    # "added at or before v, minus from of COMPLETED, minus to of IN_PROGRESS and REVERTED,
    #  minus physically removed"
    def visible(self) -> set[str]:
        out = {sid for sid, gone in self.removed.items() if not gone}
        for e in self.entries.values():
            out -= e["from"] if e["state"] == COMPLETED else e["to"]
        return out

    def present(self) -> set[str]:
        return {sid for sid, gone in self.removed.items() if not gone}

    def held(self) -> set[str]:
        """Segments a live push holds: no other delete path may take them."""
        out: set[str] = set()
        for e in self.entries.values():
            if e["state"] == IN_PROGRESS:
                out |= e["from"] | e["to"]
        return out

    def in_progress_from(self) -> set[str]:
        out: set[str] = set()
        for e in self.entries.values():
            if e["state"] == IN_PROGRESS:
                out |= e["from"]
        return out

    def declared(self) -> set[str]:
        return {sid for e in self.entries.values() for sid in e["to"]}

    def declared_not_uploaded(self) -> dict[str, str]:
        return {sid: eid for eid, e in self.entries.items() for sid in e["to"] if sid not in self.removed}

    # -- validity -----------------------------------------------------------------------
    def can_start(self, frm: set[str], to: set[str]) -> bool:
        return frm <= self.visible() and not (frm & self.in_progress_from()) and not (to & (set(self.removed) | self.declared()))

    def can_end(self, eid: str) -> bool:
        e = self.entries[eid]
        return e["state"] == IN_PROGRESS and e["from"] <= self.visible() and e["to"] <= self.present()

    def can_revert(self, eid: str) -> bool:
        e = self.entries[eid]
        if e["state"] == IN_PROGRESS:
            return True
        if e["state"] == REVERTED:
            return False
        # COMPLETED: its output must still be what readers see and nobody may be replacing
        # it right now; what it replaced must still exist to come back.
        return e["to"] <= self.visible() and not (e["to"] & self.in_progress_from()) and e["from"] <= self.present()

    def can_purge(self, eid: str) -> bool:
        e = self.entries[eid]
        if e["state"] == IN_PROGRESS:
            return False
        hidden = e["from"] if e["state"] == COMPLETED else e["to"]
        return not (hidden & self.present())


def fingerprint(s: Snapshot) -> tuple:
    """Everything apply_commit may touch, as plain values (so a refusal can be shown to change nothing)."""
    return (
        s.version,
        s.timestamp_ms,
        s.table_id,
        repr(s.table_schema),
        tuple(s.properties.items()),
        tuple((sid, seg.file, seg.added_version, seg.removed_version, seg.lineage_entry) for sid, seg in s.segments.items()),
        tuple(tuple(vars(e).items()) for e in s.lineage.values()),
        tuple(s.dvs.items()),
        tuple(s.history),
    )


def model_view(m: Model) -> tuple:
    return (
        frozenset(m.visible()),
        {eid: (frozenset(e["from"]), frozenset(e["to"]), e["state"]) for eid, e in m.entries.items()},
    )


def snapshot_view(s: Snapshot) -> tuple:
    return (
        frozenset(s.visible_segment_ids()),
        {eid: (frozenset(e.segments_from), frozenset(e.segments_to), e.state) for eid, e in s.lineage.items()},
    )


# --------------------------------------------------------------------------------------------
# The machine.
# --------------------------------------------------------------------------------------------
class LineageMachine(RuleBasedStateMachine):
    """Applies commits with ``apply_commit`` on a copy of the current snapshot."""

    properties: dict[str, str] = {}

    def __init__(self) -> None:
        super().__init__()
        self.model = Model()
        self.ids = itertools.count()
        self.ts = 1_000
        self.commits: list[Commit] = []
        self.snap = Snapshot()
        self.views: dict[int, tuple] = {}
        self.steps = {"ok": 0, "refused": 0}
        self.setup_store()
        self.submit(
            [MetadataAction(table_id="t", table_schema={"a": "long"}, properties=self.properties)], Model(), Operation.CREATE
        )

    # -- plumbing -------------------------------------------------------------------------
    def setup_store(self) -> None:
        pass

    def new_id(self, prefix: str = "s") -> str:
        return f"{prefix}{next(self.ids):05d}"

    def seg(self, sid: str) -> SegmentFile:
        return SegmentFile(id=sid, path=f"data/{sid}.parquet", num_rows=10, size_bytes=100)

    def make_commit(self, actions, op: Operation) -> Commit:
        self.ts += 1
        return Commit(
            version=self.snap.version + 1,
            read_version=self.snap.version,
            timestamp_ms=self.ts,
            operation=op,
            actions=tuple(actions),
        )

    def do_commit(self, actions, op: Operation) -> tuple[Snapshot, Commit]:
        """Apply; return the new snapshot and commit, or raise the refusal."""
        commit = self.make_commit(actions, op)
        trial = self.snap.copy()
        apply_commit(trial, commit)
        return trial, commit

    def after_refusal(self) -> None:
        pass

    def submit(
        self,
        actions,
        expected: Model | None,
        op: Operation,
        error: type[Exception] = InvalidLineageTransitionError,
        *,
        label: str | None = None,
    ) -> None:
        """``expected`` is the model after the commit, or ``None`` if the model refuses it.
        ``label`` names the attempt in failure messages (default: the operation)."""
        before = fingerprint(self.snap)
        label = label or op.value
        if expected is None:
            with pytest.raises(InvalidLineageTransitionError) as info:
                self.do_commit(actions, op)
            assert isinstance(info.value, error), f"{label}: expected {error.__name__}, got {info.value!r}"
            assert fingerprint(self.snap) == before, f"refused {label} changed the state"
            self.after_refusal()
            self.steps["refused"] += 1
            return
        self.snap, commit = self.do_commit(actions, op)
        self.commits.append(commit)
        self.model = expected
        self.views[self.snap.version] = model_view(expected)
        self.steps["ok"] += 1
        self.check_durable_forms()

    def check_durable_forms(self) -> None:
        """After every accepted commit (refusals change nothing, see fingerprint): replaying
        the log from scratch and a checkpoint round trip both rebuild exactly this state."""
        assert replay(self.commits) == self.snap
        back = parse_checkpoint(checkpoint_bytes(self.snap), source="checkpoint", expected_version=self.snap.version)
        assert back == self.snap
        assert back.visible_segment_ids() == self.snap.visible_segment_ids()

    def entry_ids(self, states=(IN_PROGRESS, COMPLETED, REVERTED)) -> list[str]:
        return sorted(eid for eid, e in self.model.entries.items() if e["state"] in states)

    def pick_entry(self, data, *preferred: str) -> str:
        """Any entry, but half the time one in the ``preferred`` states (where the rule bites)."""
        favoured = self.entry_ids(preferred)
        if favoured and data.draw(st.booleans(), label="favoured state"):
            return data.draw(st.sampled_from(favoured), label="entry")
        return data.draw(st.sampled_from(self.entry_ids()), label="entry")

    def replaced_completed_entries(self) -> list[str]:
        """COMPLETED entries whose output a later live entry replaces (or is replacing)."""
        out = []
        for eid, e in self.model.entries.items():
            if e["state"] == COMPLETED and any(
                o["state"] in (IN_PROGRESS, COMPLETED) and e["to"] & o["from"]
                for oid, o in self.model.entries.items()
                if oid != eid
            ):
                out.append(eid)
        return sorted(out)

    # -- plain writes ---------------------------------------------------------------------
    @rule(n=st.integers(1, 3))
    def append(self, n: int) -> None:
        new = [self.new_id() for _ in range(n)]
        m = self.model.clone()
        for sid in new:
            m.removed[sid] = False
        self.submit([AddSegment(segment=self.seg(sid)) for sid in new], m, Operation.APPEND)

    @rule(n=st.integers(0, 2))
    def overwrite(self, n: int) -> None:
        old = sorted(self.model.visible())
        new = [self.new_id() for _ in range(n)]
        actions = [RemoveSegment(segment_id=sid) for sid in old] + [AddSegment(segment=self.seg(sid)) for sid in new]
        if set(old) & self.model.held():
            self.submit(actions, None, Operation.OVERWRITE, SegmentInUseError)
            return
        m = self.model.clone()
        for sid in old:
            m.removed[sid] = True
        for sid in new:
            m.removed[sid] = False
        self.submit(actions, m, Operation.OVERWRITE)

    # -- consistent push --------------------------------------------------------------------
    @rule(data=st.data())
    def start(self, data) -> None:
        visible = sorted(self.model.visible())
        if visible and data.draw(st.booleans(), label="whole visible set"):
            frm = set(visible)
        else:
            frm = data.draw(st.sets(st.sampled_from(visible)) if visible else st.just(set()), label="segments_from")
        uploaded = [self.new_id() for _ in range(data.draw(st.integers(0, 2), label="uploaded now"))]
        declared = [self.new_id() for _ in range(data.draw(st.integers(0, 2), label="declared, uploaded later"))]
        eid = self.new_id("e")
        actions = [LineageStart(entry_id=eid, segments_from=tuple(sorted(frm)), segments_to=tuple(declared))]
        actions += [AddSegment(segment=self.seg(sid), lineage_entry=eid) for sid in uploaded]
        if not self.model.can_start(frm, set(declared) | set(uploaded)):
            self.submit(actions, None, Operation.PUSH_START)
            return
        m = self.model.clone()
        m.entries[eid] = {"from": set(frm), "to": set(declared) | set(uploaded), "state": IN_PROGRESS}
        for sid in uploaded:
            m.removed[sid] = False
        self.submit(actions, m, Operation.PUSH_START)

    def completed_outputs(self) -> list[str]:
        taken = self.model.in_progress_from()
        return [
            eid
            for eid in self.entry_ids((COMPLETED,))
            if self.model.entries[eid]["to"] and self.model.entries[eid]["to"] <= self.model.visible() - taken
        ]

    @precondition(lambda self: self.completed_outputs())
    @rule(data=st.data())
    def push_over_completed_output(self, data) -> None:
        """A new push that replaces what an earlier push produced: the case where reverting
        the earlier one alone must be refused while the new one is live."""
        eid = data.draw(st.sampled_from(self.completed_outputs()), label="earlier push")
        visible = sorted(self.model.visible() - self.model.in_progress_from())
        frm = self.model.entries[eid]["to"] | data.draw(st.sets(st.sampled_from(visible)), label="plus visible")
        new, sid = self.new_id("e"), self.new_id()
        actions = [
            LineageStart(entry_id=new, segments_from=tuple(sorted(frm))),
            AddSegment(segment=self.seg(sid), lineage_entry=new),
        ]
        assert self.model.can_start(frm, {sid})
        m = self.model.clone()
        m.entries[new] = {"from": set(frm), "to": {sid}, "state": IN_PROGRESS}
        m.removed[sid] = False
        self.submit(actions, m, Operation.PUSH_START)
        # ... and reverting the earlier push alone is now refused.
        assert not self.model.can_revert(eid)
        self.submit([LineageRevert(entry_id=eid)], None, Operation.ROLLBACK, label="revert replaced push")

    @precondition(lambda self: self.model.entries)
    @rule(data=st.data(), n=st.integers(1, 2))
    def add_to_entry(self, data, n: int) -> None:
        eid = data.draw(st.sampled_from(self.entry_ids()), label="entry")
        new = [self.new_id() for _ in range(n)]
        actions = [AddSegment(segment=self.seg(sid), lineage_entry=eid) for sid in new]
        if self.model.entries[eid]["state"] != IN_PROGRESS:
            self.submit(actions, None, Operation.PUSH_STAGE)
            return
        m = self.model.clone()
        m.entries[eid]["to"] |= set(new)
        for sid in new:
            m.removed[sid] = False
        self.submit(actions, m, Operation.PUSH_STAGE)

    @precondition(lambda self: self.model.declared_not_uploaded())
    @rule(data=st.data())
    def upload_declared(self, data) -> None:
        """Upload a segment a start declared: plainly, naming its entry, or naming another entry."""
        pending = self.model.declared_not_uploaded()
        sid = data.draw(st.sampled_from(sorted(pending)), label="declared segment")
        owner = pending[sid]
        target = data.draw(st.sampled_from([None, *self.entry_ids()]), label="lineage_entry")
        actions = [AddSegment(segment=self.seg(sid), lineage_entry=target)]
        if target is not None and (target != owner or self.model.entries[target]["state"] != IN_PROGRESS):
            self.submit(actions, None, Operation.PUSH_STAGE)
            return
        m = self.model.clone()
        m.removed[sid] = False
        self.submit(actions, m, Operation.PUSH_STAGE)

    @precondition(lambda self: self.model.entries)
    @rule(data=st.data())
    def end(self, data) -> None:
        eid = self.pick_entry(data, IN_PROGRESS)
        m = self.model.clone()
        actions = []
        pending = sorted(sid for sid, owner in m.declared_not_uploaded().items() if owner == eid)
        if pending and data.draw(st.booleans(), label="upload pending segments in the same commit"):
            actions = [AddSegment(segment=self.seg(sid), lineage_entry=eid) for sid in pending]
            for sid in pending:
                m.removed[sid] = False
            if m.entries[eid]["state"] != IN_PROGRESS:
                self.submit(actions + [LineageEnd(entry_id=eid)], None, Operation.PUBLISH)
                return
        actions.append(LineageEnd(entry_id=eid))
        if not m.can_end(eid):
            self.submit(actions, None, Operation.PUBLISH)
            return
        m.entries[eid]["state"] = COMPLETED
        self.submit(actions, m, Operation.PUBLISH)

    @precondition(lambda self: self.model.entries)
    @rule(data=st.data())
    def revert(self, data) -> None:
        eid = self.pick_entry(data, IN_PROGRESS, COMPLETED)
        if not self.model.can_revert(eid):
            self.submit([LineageRevert(entry_id=eid)], None, Operation.ROLLBACK)
            return
        m = self.model.clone()
        m.entries[eid]["state"] = REVERTED
        self.submit([LineageRevert(entry_id=eid)], m, Operation.ROLLBACK)

    # -- operations that are always refused (one rule, so they do not crowd out the rest) --
    @rule(data=st.data())
    def invalid_operation(self, data) -> None:
        # Rarest situations first: hypothesis favours the front of sampled_from.
        kinds = []
        if self.replaced_completed_entries():
            kinds.append("revert a COMPLETED entry whose output a live entry replaced")
        if self.model.held() & self.model.present():
            kinds.append("remove a segment held by an IN_PROGRESS entry")
        if self.entry_ids((REVERTED, COMPLETED)):
            kinds.append("end an entry that is not IN_PROGRESS")
        if any(self.model.removed.values()):
            kinds.append("remove a removed segment")
        if set(self.model.removed) | self.model.declared():
            kinds.append("start reusing segments_to")
        kinds += ["start with invisible segments_from", "lineage action on an unknown entry"]
        kind = data.draw(st.sampled_from(kinds), label="invalid operation")
        error: type[Exception] = InvalidLineageTransitionError
        if kind == "start with invisible segments_from":
            # removed, hidden (replaced, reverted, pushed but not ended) or never added
            invisible = sorted(set(self.model.removed) - self.model.visible())
            choice = data.draw(st.sampled_from(invisible + ["never-added"]), label="invisible segment")
            visible = sorted(self.model.visible())
            extra = data.draw(st.sets(st.sampled_from(visible)) if visible else st.just(set()), label="plus visible")
            actions = [LineageStart(entry_id=self.new_id("e"), segments_from=tuple(sorted(extra | {choice})))]
        elif kind == "lineage action on an unknown entry":
            actions = [
                data.draw(
                    st.sampled_from([LineageEnd(entry_id="nope"), LineageRevert(entry_id="nope"), LineagePurge(entry_id="nope")])
                )
            ]
        elif kind == "start reusing segments_to":
            # segments_to must be new: not added before, not declared by another entry
            sid = data.draw(st.sampled_from(sorted(set(self.model.removed) | self.model.declared())), label="taken segment")
            eid = self.new_id("e")
            if data.draw(st.booleans(), label="declare it"):
                actions = [LineageStart(entry_id=eid, segments_to=(sid,))]
            else:
                actions = [LineageStart(entry_id=eid), AddSegment(segment=self.seg(sid), lineage_entry=eid)]
        elif kind == "remove a segment held by an IN_PROGRESS entry":
            sid = data.draw(st.sampled_from(sorted(self.model.held() & self.model.present())), label="held segment")
            actions, error = [RemoveSegment(segment_id=sid)], SegmentInUseError
        elif kind == "end an entry that is not IN_PROGRESS":
            actions = [LineageEnd(entry_id=data.draw(st.sampled_from(self.entry_ids((REVERTED, COMPLETED))), label="entry"))]
        elif kind == "revert a COMPLETED entry whose output a live entry replaced":
            eid = data.draw(st.sampled_from(self.replaced_completed_entries()), label="entry")
            assert not self.model.can_revert(eid)
            actions = [LineageRevert(entry_id=eid)]
        else:
            gone = sorted(s for s, removed in self.model.removed.items() if removed)
            actions = [RemoveSegment(segment_id=data.draw(st.sampled_from(gone), label="removed segment"))]
        self.submit(actions, None, Operation.APPEND, error, label=kind)

    # -- deletes and retention ------------------------------------------------------------
    @precondition(lambda self: self.model.entries)
    @rule(data=st.data(), remove=st.booleans(), purge=st.booleans())
    def retention(self, data, remove: bool, purge: bool) -> None:
        """Physically remove what a finished entry hides, and/or purge the entry."""
        eid = data.draw(st.sampled_from(self.entry_ids()), label="entry")
        e = self.model.entries[eid]
        hidden = set()
        if remove and e["state"] != IN_PROGRESS:
            hidden = (e["from"] if e["state"] == COMPLETED else e["to"]) & self.model.present()
        actions = [RemoveSegment(segment_id=sid) for sid in sorted(hidden)]
        if purge:
            actions.append(LineagePurge(entry_id=eid))
        if not actions:
            return
        m = self.model.clone()
        for sid in hidden:
            m.removed[sid] = True
        if purge:
            if not m.can_purge(eid):
                self.submit(actions, None, Operation.RETENTION)
                return
            del m.entries[eid]
        self.submit(actions, m, Operation.RETENTION)

    # -- invariants -------------------------------------------------------------------------
    @invariant()
    def visible_set_matches_model(self) -> None:
        assert snapshot_view(self.snap) == model_view(self.model)

    def teardown(self) -> None:
        STEP_COUNTS[type(self).__name__]["runs"] += 1
        STEP_COUNTS[type(self).__name__]["ok"] += self.steps["ok"]
        STEP_COUNTS[type(self).__name__]["refused"] += self.steps["refused"]


class LoggedLineageMachine(LineageMachine):
    """The same rules, committed through a real ``CommitLog`` on local disk; adds time travel."""

    properties = {"checkpointInterval": "4"}

    def setup_store(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="mvtable-sm-")
        self.commit_log = CommitLog(LocalFileIO(self.tmp), check_files=False)

    def do_commit(self, actions, op: Operation) -> tuple[Snapshot, Commit]:
        result = self.commit_log.commit(read=self.snap, operation=op, build=lambda current: list(actions))
        assert result.attempts == 1
        return result.snapshot, result.commit

    def after_refusal(self) -> None:
        # Nothing of a refused commit reaches the log.
        assert self.commit_log.latest_version() == self.snap.version

    @rule(data=st.data())
    def time_travel(self, data) -> None:
        v = data.draw(st.integers(0, self.snap.version), label="version")
        old = self.commit_log.snapshot(v)
        assert old.version == v
        assert snapshot_view(old) == self.views[v]
        if v == self.snap.version:
            assert old == self.snap

    @invariant()
    def log_agrees(self) -> None:
        assert self.commit_log.latest_version() == self.snap.version
        latest = self.commit_log.snapshot()
        assert latest == self.snap

    def teardown(self) -> None:
        super().teardown()
        shutil.rmtree(self.tmp, ignore_errors=True)


STEP_COUNTS = {name: {"runs": 0, "ok": 0, "refused": 0} for name in ("LineageMachine", "LoggedLineageMachine")}

TestLineageStateMachine = LineageMachine.TestCase
TestLineageStateMachine.settings = MEMORY_SETTINGS

TestLoggedLineageStateMachine = LoggedLineageMachine.TestCase
TestLoggedLineageStateMachine.settings = LOG_SETTINGS


def test_machines_exercised_both_outcomes() -> None:
    """Guard against a machine whose rules never fire (runs after the machines above)."""
    for name, counts in STEP_COUNTS.items():
        if counts["runs"]:
            assert counts["ok"] > counts["runs"], (name, counts)
            assert counts["refused"] > 0, (name, counts)
