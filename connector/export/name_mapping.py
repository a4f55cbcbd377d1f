"""Iceberg's name mapping (``schema.name-mapping.default``): how a reader finds the columns of a file by name.

Iceberg readers resolve a Parquet file's columns by name, through this mapping, when the file
lacks field ids: mvtable's segments written before field ids carry none, and pyiceberg also maps
by name any file in which some field has no id (segments written before list elements and map
entries carried theirs, ``lineage.schema_ids.collection_id``). The names a file holds are the names the table had when it was written, and a rename
since changes no file, so each field id lists every name its field had in a file: the names of the
oldest files first, then later ones.

A name is listed for one id only at each level, the first that had it. A column dropped and
added again under the same name is a new id: the old files' column of that name is the old
id's (never the new field's, whose old rows must read null), so the later id does not get the
name. Files written after the change carry ids on every field and are read by id, so the new
field's rows read right.

Where the names come from is the files themselves: each file's own names by id (its Parquet
field ids, or for a file written before them the ids by position every mvtable reader gives it,
``schema_evolution.field_ids.arrow_with_ids``). Footers are read only when the schema changed
since the last export, and then only of the files added since: a file added under an unchanged
schema carries the names the mapping has already. A table whose schema never changed has the
names of its only schema, and reads no footer.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from mvtable.lineage.snapshot import Snapshot
from mvtable.storage import FileIO

from ..parallel import ordered_map
from ..schema_evolution.field_ids import arrow_with_ids
from ..segment_checks import read_footer
from ..segments import open_source
from .common import LiveFile
from .types import arrow_name_mapping, iceberg_schema

__all__ = ["NameMapping", "merge_names"]

# footers read at once (storage round trips)
_FOOTER_READERS = 8


class NameMapping:
    """The mapping of one export, grown version by version (oldest first).

    ``stored`` is the mapping an earlier export wrote (its JSON text; None for a first export),
    ``version`` and ``schema_id`` the newest version it exported and that version's schema id."""

    def __init__(self, io: FileIO, stored: str | None, *, version: int, schema_id: int) -> None:
        self.io = io
        self.entries: list[dict[str, Any]] | None = json.loads(stored) if stored else None
        self.version, self.schema_id = version, schema_id

    def add(self, snap: Snapshot, files: Sequence[LiveFile]) -> str:
        """The mapping with the names of ``snap``'s files and schema added; as JSON."""
        entries = self.entries or []
        first = self.entries is None
        if (first and snap.schema_id != 0) or (not first and snap.schema_id != self.schema_id):
            added = [f for f in files if f.added_version > self.version]
            for schema in _file_schemas(self.io, added):
                entries = merge_names(entries, arrow_name_mapping(arrow_with_ids(schema)))
        _, names, _ = iceberg_schema(snap.table_schema, schema_id=snap.schema_id)
        self.entries = merge_names(entries, names)
        self.version, self.schema_id = snap.version, snap.schema_id
        return json.dumps(self.entries)


def merge_names(base: list[dict[str, Any]], extra: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``base`` with the names of ``extra`` added, at every level, where no other field id of that level has them.

    A copy. A field of ``extra`` none of whose names is free is left out, with what it nests: a file
    without ids holding that name holds it for the other id."""
    out = [{**e, "names": list(e["names"])} for e in base]
    by_id = {e["field-id"]: e for e in out}
    owner = {n: e["field-id"] for e in out for n in e["names"]}
    for e in extra:
        fid = e["field-id"]
        free = [n for n in e["names"] if owner.get(n, fid) == fid]
        mine = by_id.get(fid)
        if mine is None:
            if not free:
                continue
            mine = {"field-id": fid, "names": []}
            out.append(mine)
            by_id[fid] = mine
        for n in free:
            if n not in mine["names"]:
                mine["names"].append(n)
                owner[n] = fid
        if "fields" in e:
            mine["fields"] = merge_names(mine.get("fields", []), e["fields"])
    return out


def _file_schemas(io: FileIO, files: Sequence[LiveFile]) -> list[pa.Schema]:
    """The distinct Arrow schemas (field ids included) of ``files``, oldest file first."""
    oldest_first = sorted(files, key=lambda f: (f.added_version, f.path))
    out: dict[bytes, pa.Schema] = {}
    for schema in ordered_map(lambda f: _file_schema(io, f), oldest_first, workers=_FOOTER_READERS):
        out.setdefault(schema.serialize().to_pybytes(), schema)
    return list(out.values())


def _file_schema(io: FileIO, f: LiveFile) -> pa.Schema:
    source, where = open_source(io, f.path)
    with source:
        return read_footer(source, path=where, expected_crc32=f.footer_crc32).schema.to_arrow_schema()
