"""What ``mvtable inspect`` shows.

Segments, row groups, delete density, the lineage as a timeline, and how far each Iceberg or Delta
export lags behind, as one plain ``dict`` (so the CLI, a notebook or a future UDTF can use it).

``inspect_table`` only reads: the snapshot, for the timeline the log files of the versions
at which the lineage entries changed state, and each export's newest metadata file.
Timestamps are ``datetime`` (UTC); the CLI turns them into ISO-8601 for ``--json``.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from mvtable.errors import CorruptMetadataError, VersionNotFoundError
from mvtable.lineage.actions import LineageEnd, LineagePurge, LineageRevert, LineageStart
from mvtable.lineage.enums import LineageState
from mvtable.lineage.log import CommitLog
from mvtable.lineage.snapshot import Snapshot

from .export import export_status
from .sizes import size_text

# Segment status: what a reader of this version sees of it.
VISIBLE = "visible"
STAGED = "staged"  # segments_to of an IN_PROGRESS entry: written, not yet published
REPLACED = "replaced"  # segments_from of a COMPLETED entry: kept so the push can be rolled back
REVERTED_SEGMENT = "reverted"  # segments_to of a REVERTED entry: kept until retention removes them
HIDDEN = "hidden"

# A lineage entry's steps: its states, and the purge that drops it from the lineage.
PURGED = "PURGED"
_ENTRY_ACTIONS = (LineageStart, LineageEnd, LineageRevert, LineagePurge)
_TRANSITION: dict[type, str] = {
    LineageStart: LineageState.IN_PROGRESS,
    LineageEnd: LineageState.COMPLETED,
    LineageRevert: LineageState.REVERTED,
    LineagePurge: PURGED,
}


def _utc(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc)


def _density(deleted: int, rows: int) -> float:
    return deleted / rows if rows else 0.0


def _segment_status(snapshot: Snapshot, visible: set[str]) -> dict[str, tuple[str, str | None]]:
    """segment id -> (status, lineage entry that explains it)."""
    out: dict[str, tuple[str, str | None]] = {}
    for entry in snapshot.lineage.values():
        if entry.state == LineageState.COMPLETED:
            for sid in entry.segments_from:
                out.setdefault(sid, (REPLACED, entry.id))
        elif entry.state == LineageState.IN_PROGRESS:
            for sid in entry.segments_to:
                out.setdefault(sid, (STAGED, entry.id))
        elif entry.state == LineageState.REVERTED:
            for sid in entry.segments_to:
                out.setdefault(sid, (REVERTED_SEGMENT, entry.id))
    for sid in visible:
        out[sid] = (VISIBLE, snapshot.segments[sid].lineage_entry)
    return out


def _segment(snapshot: Snapshot, sid: str, status: str, entry: str | None) -> dict[str, Any]:
    seg = snapshot.segments[sid]
    f = seg.file
    dv = snapshot.dvs.get(sid)
    deleted = dv.cardinality if dv is not None else 0
    return {
        "id": f.id,
        "path": f.path,
        "status": status,
        "spec_id": f.spec_id,
        "partition": list(f.partition) if f.partition is not None else None,
        "lineage_entry": entry,
        "added_version": seg.added_version,
        "num_rows": f.num_rows,
        "size_bytes": f.size_bytes,
        "row_groups": [
            {"num_rows": rg.num_rows, "first_row": rg.first_row, "total_byte_size": rg.total_byte_size} for rg in f.row_groups
        ],
        "deleted_rows": deleted,
        "live_rows": f.num_rows - deleted,
        "delete_density": _density(deleted, f.num_rows),
        "dv": None
        if dv is None
        else {
            "cardinality": dv.cardinality,
            "location": "inline" if dv.inline is not None else "file",
            "path": dv.path,
            "offset": dv.offset,
            "size": dv.size,
        },
    }


def _totals(segments: list[dict[str, Any]]) -> dict[str, Any]:
    rows = sum(s["num_rows"] for s in segments)
    deleted = sum(s["deleted_rows"] for s in segments)
    return {
        "segments": len(segments),
        "num_rows": rows,
        "row_groups": sum(len(s["row_groups"]) for s in segments),
        "size_bytes": sum(s["size_bytes"] for s in segments),
        "deleted_rows": deleted,
        "live_rows": rows - deleted,
        "delete_density": _density(deleted, rows),
    }


def _timeline(commit_log: CommitLog, snapshot: Snapshot) -> list[dict[str, Any]]:
    """Each lineage entry with its state transitions, ordered by ``started_version``.

    An entry changes state only at versions from ``started_version`` to ``state_version``,
    so only those log files are read. When one is gone (garbage-collected), the entry's
    transitions fall back to what the snapshot knows: its start and its current state."""
    entries = sorted(snapshot.lineage.values(), key=lambda e: (e.started_version, e.id))
    wanted: set[int] = set()
    for e in entries:
        wanted.update(range(e.started_version, min(e.state_version, snapshot.version) + 1))
    transitions: dict[str, list[dict[str, Any]]] = {e.id: [] for e in entries}
    for v in sorted(wanted):
        try:
            commit = commit_log.read_commit(v)
        except (VersionNotFoundError, CorruptMetadataError):
            continue
        for action in commit.actions:
            state = _TRANSITION.get(type(action))
            if state is not None and isinstance(action, _ENTRY_ACTIONS) and action.entry_id in transitions:
                transitions[action.entry_id].append(
                    {
                        "version": commit.version,
                        "state": state,
                        "timestamp": _utc(commit.timestamp_ms),
                        "operation": commit.operation,
                    }
                )
    out = []
    for e in entries:
        steps = transitions[e.id]
        # Log files that are gone leave gaps: the snapshot still knows the start and the
        # current state (without the operation, and the start without its time).
        if not steps or steps[0]["version"] != e.started_version:
            steps.insert(
                0, {"version": e.started_version, "state": LineageState.IN_PROGRESS, "timestamp": None, "operation": None}
            )
        if (steps[-1]["version"], steps[-1]["state"]) != (e.state_version, e.state):
            steps.append({"version": e.state_version, "state": e.state, "timestamp": _utc(e.timestamp_ms), "operation": None})
        out.append(
            {
                "id": e.id,
                "segments_from": list(e.segments_from),
                "segments_to": list(e.segments_to),
                "state": e.state,
                "timestamp": _utc(e.timestamp_ms),
                "started_version": e.started_version,
                "state_version": e.state_version,
                "transitions": steps,
            }
        )
    return out


def inspect_table(commit_log: CommitLog, snapshot: Snapshot) -> dict[str, Any]:
    """Everything ``mvtable inspect`` shows about the table of ``commit_log`` as of ``snapshot``.

    The log is read only for the lineage timeline.

    Keys: ``uri``, ``version``, ``timestamp``, ``table_id``, ``schema`` (``[{name, type}]``),
    ``primary_key`` (the key columns, ``[]`` without a key), ``properties``, ``segments`` (visible ones first, then staged/replaced/reverted ones
    the log still holds; each with ``id, path, status, spec_id, partition`` (the values the log
    records, None for a segment without one), ``lineage_entry, added_version,
    num_rows, size_bytes, row_groups [{num_rows, first_row, total_byte_size}],
    deleted_rows, live_rows, delete_density`` (0..1) and ``dv``), ``totals`` (of the
    visible segments: what a reader sees), ``retained`` (totals of the others) and
    ``lineage`` (entries oldest first, each with its ``transitions``
    ``[{version, state, timestamp, operation}]``)."""
    from .schema import schema_from_json

    visible_ids = snapshot.visible_segment_ids()
    status = _segment_status(snapshot, set(visible_ids))
    visible = [_segment(snapshot, sid, VISIBLE, status[sid][1]) for sid in visible_ids]
    shown = set(visible_ids)
    retained = []
    for _, sid in sorted((seg.added_version, sid) for sid, seg in snapshot.segments.items() if sid not in shown):
        seg = snapshot.segments[sid]
        if seg.removed_version is not None:
            continue
        st, entry = status.get(sid, (HIDDEN, seg.lineage_entry))
        retained.append(_segment(snapshot, sid, st, entry))
    try:
        schema = [
            {"name": f.name, "type": str(f.type), "id": int(f.metadata[b"PARQUET:field_id"]) if f.metadata else None}
            for f in schema_from_json(snapshot.table_schema)
        ]
    except Exception:  # an unreadable schema must not hide the rest of the picture
        schema = []
    return {
        "uri": commit_log.io.uri,
        "version": snapshot.version,
        "timestamp": _utc(snapshot.timestamp_ms),
        "table_id": snapshot.table_id,
        "schema_id": snapshot.schema_id,
        "schema": schema,
        "primary_key": list(snapshot.primary_key),
        "properties": dict(snapshot.properties),
        "segments": visible + retained,
        "totals": _totals(visible),
        "retained": _totals(retained),
        "lineage": _timeline(commit_log, snapshot),
        "exports": [s.to_json() for s in export_status(commit_log.io, commit_log.listing())],
    }


# -- maintenance reports (shared by the CLI and the SQL procedures) ---------------------
def vacuum_changed(report: Any) -> bool:
    return not report.dry_run and bool(report.files or report.segments_expired or report.entries_purged)


def vacuum_summary(report: Any) -> str:
    files, expired, purged = len(report.files), int(report.segments_expired), int(report.entries_purged)
    dropped = list(getattr(report, "partitions_dropped", ()))
    if not (files or expired or purged or dropped):
        text = "nothing to vacuum"
    else:
        verb = "would delete" if report.dry_run else "deleted"
        text = (
            f"{verb} {files} file(s), {size_text(report.bytes)}; {expired} segment(s) expired, "
            f"{purged} lineage entr{'y' if purged == 1 else 'ies'} purged"
        )
    if dropped:
        shown = ", ".join(dropped[:5]) + (f" and {len(dropped) - 5} more" if len(dropped) > 5 else "")
        text += f"; {'would drop' if report.dry_run else 'dropped'} {len(dropped)} partition(s) past partitionRetention: {shown}"
    return _decorate(text, report, command="vacuum")


def _decorate(text: str, report: Any, *, command: str) -> str:
    if report.dry_run:
        text = "dry run: " + text
    if not report.complete:
        text += f"; stopped early, run {command} again to finish"
    return text


def gc_files(report: Any) -> int:
    return int(report.dv_files_deleted + report.log_files_deleted + report.pins_expired)


def gc_changed(report: Any) -> bool:
    return not report.dry_run and gc_files(report) > 0


def gc_summary(report: Any) -> str:
    if not gc_files(report):
        text = "nothing to collect"
    else:
        verb = "would delete" if report.dry_run else "deleted"
        text = (
            f"{verb} {report.dv_files_deleted} deletion-vector file(s), {report.log_files_deleted} log file(s), "
            f"{report.pins_expired} expired pin(s), {size_text(report.bytes_freed)}"
        )
    return _decorate(text, report, command="gc")
