"""Read-only snapshots: what ``Table.snapshot()`` and ``Table.pin()`` hand out.

A ``Table`` keeps the newest snapshot it has seen and advances it by replaying new commits
onto a copy. Handing that object itself to a caller let ``t.snapshot().segments.clear()``
change what the same ``Table`` reads next. A view shares the snapshot's mappings behind
``MappingProxyType`` (not copied: segments can number in the hundreds of thousands) and
gives the caller its own copy of the small parts that could be changed in place: the
lineage entries, the schema document and the history (a list, so that a view still equals
the snapshot it shows). Segment states and deletion-vector references are never changed
after they are made, so they are shared as they are. A new view is made per call, so one
caller's changes to its copies never reach another's.

Every function that takes a ``Snapshot`` takes a view: they read it, and those that
advance one (``replay``, a commit's retry) copy it first, which turns the proxies back into
dicts."""

from __future__ import annotations

import dataclasses
import json
from types import MappingProxyType
from typing import Any, cast

from mvtable.lineage.snapshot import Snapshot

__all__ = ["is_read_only", "read_only"]


def read_only(snapshot: Snapshot) -> Snapshot:
    """``snapshot`` behind read-only containers.

    Its mappings refuse changes, and the parts that could be changed in place are the view's own
    copies."""
    if is_read_only(snapshot):
        return snapshot
    return Snapshot(
        version=snapshot.version,
        timestamp_ms=snapshot.timestamp_ms,
        table_id=snapshot.table_id,
        table_schema=json.loads(json.dumps(snapshot.table_schema)),  # JSON from the log; faster than deepcopy
        properties=_proxy(snapshot.properties),
        primary_key=snapshot.primary_key,
        segments=_proxy(snapshot.segments),
        lineage=_proxy({k: dataclasses.replace(v) for k, v in snapshot.lineage.items()}),
        dvs=_proxy(snapshot.dvs),
        history=list(snapshot.history),
        transactions=_proxy(snapshot.transactions),
        schema_id=snapshot.schema_id,
        last_field_id=snapshot.last_field_id,
        schema_break_version=snapshot.schema_break_version,
        transaction_times=_proxy(snapshot.transaction_times),
        partition_specs=_proxy(snapshot.partition_specs),
        default_spec_id=snapshot.default_spec_id,
    )


def is_read_only(snapshot: Snapshot) -> bool:
    return isinstance(cast(Any, snapshot.segments), MappingProxyType)


def _proxy(mapping: dict[Any, Any]) -> Any:
    # typed as the dict it stands for: readers index, iterate and compare it like one
    return MappingProxyType(mapping)
