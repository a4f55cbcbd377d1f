"""A table's schema as rows with field ids, and its schema changes version by version (``mvtable schema``).

Read-only views for people and scripts; ids by position for a table stored before field ids.
"""

from __future__ import annotations

from typing import Any

from mvtable.errors import VersionNotFoundError
from mvtable.lineage.actions import MetadataAction
from mvtable.lineage.log import CommitLog
from mvtable.lineage.schema_ids import field_id, iter_fields, with_ids
from mvtable.lineage.snapshot import Snapshot

__all__ = ["schema_history", "schema_rows"]


def schema_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Every field (nested ones by dotted path) with its id, type, nullability and doc, in schema order."""
    from ..schema import arrow_type_name

    rows = []
    for path, f in iter_fields(with_ids(doc)):
        rows.append(
            {
                "id": field_id(f),
                "name": ".".join(path),
                "type": arrow_type_name(f["type"]),
                "nullable": bool(f.get("nullable", True)),
                "doc": (f.get("metadata") or {}).get("comment"),
            }
        )
    return rows


def schema_history(commit_log: CommitLog, snapshot: Snapshot) -> list[dict[str, Any]]:
    """Each commit of ``snapshot``'s history that set the schema: its version, time, operation, schema id and changes.

    Versions whose log file GC removed are left out (the checkpoint keeps no schema of theirs)."""
    out: list[dict[str, Any]] = []
    schema_id = 0
    for item in snapshot.history:
        try:
            commit = commit_log.read_commit(item.version)
        except VersionNotFoundError:
            continue
        meta = [a for a in commit.actions if isinstance(a, MetadataAction)]
        if not meta:
            continue
        action = meta[-1]
        schema_id = action.schema_id if action.schema_id is not None else (0 if not out else schema_id + 1)
        changes = commit.parameters.get("changes") or commit.parameters.get("schemaChanges")
        if changes is None:
            changes = ["create"] if not out else ["restore the schema before the push"] if commit.operation == "ROLLBACK" else []
        out.append(
            {
                "version": commit.version,
                "timestamp_ms": commit.timestamp_ms,
                "operation": str(commit.operation),
                "schema_id": schema_id,
                "changes": list(changes),
                "columns": [r["name"] for r in schema_rows(action.table_schema) if "." not in r["name"]],
            }
        )
    return out
