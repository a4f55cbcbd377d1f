"""Iceberg v3 metadata over mvtable's own files (like Delta UniForm or XTable, nothing copied).

Per exported version: a data manifest per partition spec naming every visible segment's
Parquet file with its partition tuple, a delete manifest per spec naming each segment's
deletion vector as a Puffin ``deletion-vector-v1`` blob (``referenced_data_file``,
``content_offset``, ``content_size_in_bytes``), a manifest list, and then a new ``metadata/vN.metadata.json`` holding every snapshot exported so far
plus ``version-hint.text``. The Iceberg snapshot id of mvtable version ``v`` is ``v + 1``
(ids and sequence numbers start at 1), its sequence number too; the snapshot summary
carries ``mvtable.version``. Where each DV's bytes are is ``deletion_vectors``' business.

Manifests are Avro files written by ``avro`` (pyiceberg 0.12 writes at most format v2).
The table metadata carries every partition spec the table has had (``partitioning``), each file
its partition in its spec's types and the manifest list each manifest's partition bounds, so
Iceberg readers prune files by partition as mvtable does. No column statistics: readers plan
by file, which is what mvtable's own segments are.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable
from typing import Any

from mvtable.errors import ExportConflictError
from mvtable.lineage.snapshot import Snapshot
from mvtable.storage import FileIO

from . import avro
from .common import (
    METADATA_DIR,
    PARSE_ERRORS,
    ExportResult,
    FileSizes,
    LiveFile,
    MetadataWriter,
    newer_versions,
    not_ours,
    table_location,
    table_uuid,
)
from .deletion_vectors import DVPlacer
from .name_mapping import NameMapping
from .partitioning import IcebergSpec, iceberg_specs, last_partition_id, spec_json
from .types import iceberg_schema

__all__ = ["export_iceberg", "METADATA_DIR"]

_HINT = f"{METADATA_DIR}/version-hint.text"
_NAME_MAPPING = "schema.name-mapping.default"
_METADATA_NAME = re.compile(r"v(\d+)\.metadata\.json")


def _data_file(partition: dict[str, Any]) -> dict[str, Any]:
    """The ``data_file`` struct of a manifest whose files follow a spec with ``partition`` (its Avro record)."""
    return avro.record(
        "r2",
        [
            avro.field("content", "int", 134),
            avro.field("file_path", "string", 100),
            avro.field("file_format", "string", 101),
            avro.field("partition", partition, 102),
            avro.field("record_count", "long", 103),
            avro.field("file_size_in_bytes", "long", 104),
            avro.field("lower_bounds", avro.kv_map("k126_v127", "int", 126, "bytes", 127), 125, required=False),
            avro.field("upper_bounds", avro.kv_map("k129_v130", "int", 129, "bytes", 130), 128, required=False),
            avro.field("first_row_id", "long", 142, required=False),
            avro.field("referenced_data_file", "string", 143, required=False),
            avro.field("content_offset", "long", 144, required=False),
            avro.field("content_size_in_bytes", "long", 145, required=False),
        ],
    )


def _manifest_entry(partition: dict[str, Any]) -> dict[str, Any]:
    return avro.record(
        "manifest_entry",
        [
            avro.field("status", "int", 0),
            avro.field("snapshot_id", "long", 1, required=False),
            avro.field("sequence_number", "long", 3, required=False),
            avro.field("file_sequence_number", "long", 4, required=False),
            avro.field("data_file", _data_file(partition), 2),
        ],
    )


_FIELD_SUMMARY = avro.record(
    "r508",
    [
        avro.field("contains_null", "boolean", 509),
        avro.field("contains_nan", "boolean", 518, required=False),
        avro.field("lower_bound", "bytes", 510, required=False),
        avro.field("upper_bound", "bytes", 511, required=False),
    ],
)
_MANIFEST_FILE = avro.record(
    "manifest_file",
    [
        avro.field("manifest_path", "string", 500),
        avro.field("manifest_length", "long", 501),
        avro.field("partition_spec_id", "int", 502),
        avro.field("content", "int", 517),
        avro.field("sequence_number", "long", 515),
        avro.field("min_sequence_number", "long", 516),
        avro.field("added_snapshot_id", "long", 503),
        avro.field("added_files_count", "int", 504),
        avro.field("existing_files_count", "int", 505),
        avro.field("deleted_files_count", "int", 506),
        avro.field("added_rows_count", "long", 512),
        avro.field("existing_rows_count", "long", 513),
        avro.field("deleted_rows_count", "long", 514),
        avro.field("partitions", {"type": "array", "items": _FIELD_SUMMARY, "element-id": 508}, 507, required=False),
        avro.field("first_row_id", "long", 520, required=False),
    ],
)
_ADDED, _EXISTING = 1, 0


def snapshot_id(version: int) -> int:
    return version + 1


def export_iceberg(io: FileIO, snapshots: Iterable[Snapshot]) -> ExportResult:
    """Add one Iceberg snapshot per given mvtable snapshot (oldest first) to the table's Iceberg metadata.

    Versions at or before the newest one exported already are skipped, so the current snapshot
    always stays the newest version. Metadata only.

    Raises:
        ExportConflictError: Another export wrote the same metadata at the same time; run it again."""
    location = table_location(io)
    writer = MetadataWriter(io, location)
    sizes = FileSizes(io)
    placer = DVPlacer(writer, sizes, location)
    skipped: list[int] = []
    try:
        number, previous, last, owner = _read_current(writer)
        meta = previous
        names = NameMapping(
            io,
            (previous or {}).get("properties", {}).get(_NAME_MAPPING),
            version=last,
            schema_id=int((previous or {}).get("current-schema-id", 0)),
        )
        new_versions: list[int] = []
        for snap, files in newer_versions(
            snapshots, after=last, location=location, sizes=sizes, skipped=skipped, owner=owner, folder=METADATA_DIR
        ):
            meta = _OverwriteProducer(writer, meta, snap, files, placer, location, names.add(snap, files)).commit()
            new_versions.append(snap.version)
        current = f"{location}/{METADATA_DIR}/v{number}.metadata.json" if number else ""
        if meta is None or not new_versions:
            return ExportResult("iceberg", current, (), 0, 0, skipped=tuple(skipped))
        path = f"{METADATA_DIR}/v{number + 1}.metadata.json"
        if previous is not None:
            log_entry = {"metadata-file": current, "timestamp-ms": previous["last-updated-ms"]}
            meta["metadata-log"] = [*previous.get("metadata-log", []), log_entry]
        if not writer.write(path, json.dumps(meta, indent=1).encode(), exclusive=True):
            raise ExportConflictError(f"another export wrote {location}/{path} at the same time; run the export again")
        writer.write(_HINT, str(number + 1).encode())
        return ExportResult(
            "iceberg",
            f"{location}/{path}",
            tuple(new_versions),
            len(writer.written),
            writer.bytes,
            placer.copied_bytes,
            skipped=tuple(skipped),
        )
    except BaseException:
        writer.rollback()
        raise


def newest_exported_version(writer: MetadataWriter) -> int | None:
    """The newest mvtable version the Iceberg metadata shows (``None``: never exported)."""
    number, _, last, _ = _read_current(writer)
    return last if number else None


def _read_current(writer: MetadataWriter) -> tuple[int, dict[str, Any] | None, int, str | None]:
    """What the newest ``vN.metadata.json`` says, as a tuple.

    (number, content, last exported mvtable version, ``table_uuid`` of the table it was written
    for); (0, None, -1, None) when there is none. Found by listing rather than from
    ``version-hint.text``, which is written last and so may lag behind after a crash. Anything an
    export would trip on later is checked here, so foreign or damaged metadata is refused before
    anything is written."""
    numbers = [int(m.group(1)) for m in map(_METADATA_NAME.fullmatch, writer.names(METADATA_DIR)) if m]
    if not numbers:
        return 0, None, -1, None
    number = max(numbers)
    path = f"{METADATA_DIR}/v{number}.metadata.json"
    try:
        meta = json.loads(writer.io.read(path))
        last, owner = _check_metadata(meta)
    except PARSE_ERRORS as exc:
        raise not_ours(writer.location, path, METADATA_DIR, exc) from None
    return number, meta, last, owner


def _check_metadata(meta: Any) -> tuple[int, str]:
    """(last exported mvtable version, export owner) of a metadata document this exporter wrote.

    A KeyError, TypeError or ValueError for anything else."""
    if not isinstance(meta, dict):
        raise TypeError("not an Iceberg table metadata document (a JSON object)")
    snapshots = meta["snapshots"]
    if not isinstance(snapshots, list) or not all(isinstance(s, dict) for s in snapshots):
        raise TypeError("'snapshots' is not a list of objects")
    last = max((int(s["summary"]["mvtable.version"]) for s in snapshots), default=-1)
    if not isinstance(meta["snapshot-log"], list) or not isinstance(meta.get("metadata-log", []), list):
        raise TypeError("'snapshot-log' or 'metadata-log' is not a list")
    int(meta["last-updated-ms"])  # the next metadata-log entry's time
    int(meta.get("next-row-id", 0))
    int(meta.get("last-sequence-number", 0))
    table_id = meta["properties"]["mvtable.table-id"]
    if not isinstance(table_id, str):
        raise TypeError("'mvtable.table-id' is not a string")
    return last, table_uuid(table_id)


class _OverwriteProducer:
    """Produces the Iceberg snapshot of one mvtable version (pyiceberg's model: one producer per snapshot operation).

    Every exported version is an ``overwrite`` that names the whole table, so this is the exporter's
    only operation: the manifests, their manifest list, the snapshot entry, and the table metadata
    that adds it, in that order (each file is written before anything that names it)."""

    def __init__(
        self,
        writer: MetadataWriter,
        meta: dict[str, Any] | None,
        snap: Snapshot,
        files: list[LiveFile],
        placer: DVPlacer,
        location: str,
        name_mapping: str,
    ) -> None:
        self.writer, self.meta, self.snap, self.files, self.placer, self.location = writer, meta, snap, files, placer, location
        self.name_mapping = name_mapping  # JSON text (``name_mapping``)
        self.schema, _, self.last_column_id = iceberg_schema(snap.table_schema, schema_id=snap.schema_id)
        self.schema_id = snap.schema_id
        self.sid, self.seq = snapshot_id(snap.version), snap.version + 1
        self.tag = uuid.uuid4().hex  # names this snapshot's files
        self.first_row_id = int((meta or {}).get("next-row-id", 0))
        self.parent = (meta or {}).get("current-snapshot-id")
        self.data_rows = sum(f.num_rows for f in files)
        self.specs = iceberg_specs(snap.partition_specs, snap.table_schema)
        self.partitions: dict[str, list[Any]] = {}  # file location -> its Iceberg partition values

    def commit(self) -> dict[str, Any]:
        """Write the snapshot's files and return the table metadata with the snapshot added.

        The caller writes the metadata, once for all the versions of one export."""
        by_location = {f.location: f for f in self.files}
        data = self._data_manifests()
        dv_entries = self.placer.entries(self.files, self.tag)
        deletes = self._delete_manifests(dv_entries, by_location)
        list_path = self._manifest_list([*data, *deletes])
        return self._table_metadata(self._snapshot(list_path, delete_files=len(dv_entries)))

    def _by_spec(self, files: list[LiveFile]) -> dict[int, list[LiveFile]]:
        """``files`` by the spec they were written under (Iceberg: one manifest per spec), in order of spec id."""
        out: dict[int, list[LiveFile]] = {}
        for f in files:
            out.setdefault(f.spec_id, []).append(f)
        return dict(sorted(out.items()))

    def _values(self, f: LiveFile) -> list[Any]:
        if f.location not in self.partitions:
            self.partitions[f.location] = self.specs[f.spec_id].values(f.partition, where=f"segment {f.segment_id}")
        return self.partitions[f.location]

    def _data_manifests(self) -> list[dict[str, Any]]:
        """Every live segment's Parquet file, one manifest per partition spec (none: the version has no file)."""
        out = []
        first_row_id = self.first_row_id
        for spec_id, files in self._by_spec(self.files).items():
            entries = [_data_entry(f, self.snap.version, self.specs[spec_id].record(self._values(f))) for f in files]
            path = f"{METADATA_DIR}/{self.tag}-m0-{spec_id}.avro"
            out.append(self._manifest(path, entries, spec_id=spec_id, files=files, content=0, first_row_id=first_row_id))
            first_row_id += sum(f.num_rows for f in files)
        return out

    def _delete_manifests(self, dv_entries: list[dict[str, Any]], by_location: dict[str, LiveFile]) -> list[dict[str, Any]]:
        """Each segment's deletion vector as a Puffin blob, in a manifest of its data file's spec, with its partition."""
        if not dv_entries:
            return []
        grouped: dict[int, tuple[list[dict[str, Any]], list[LiveFile]]] = {}
        for entry in dv_entries:
            f = by_location[entry["data_file"]["referenced_data_file"]]
            entry["data_file"]["partition"] = self.specs[f.spec_id].record(self._values(f))
            entries, files = grouped.setdefault(f.spec_id, ([], []))
            entries.append(entry)
            files.append(f)
        return [
            self._manifest(
                f"{METADATA_DIR}/{self.tag}-m1-{spec_id}.avro",
                entries,
                spec_id=spec_id,
                files=files,
                content=1,
                first_row_id=None,
            )
            for spec_id, (entries, files) in sorted(grouped.items())
        ]

    def _manifest(
        self,
        path: str,
        entries: list[dict[str, Any]],
        *,
        spec_id: int,
        files: list[LiveFile],
        content: int,
        first_row_id: int | None,
    ) -> dict[str, Any]:
        spec = self.specs[spec_id]
        return _write_manifest(
            self.writer,
            path,
            entries,
            self.schema,
            spec=spec,
            summaries=spec.summaries(self._values(f) for f in files),
            schema_id=self.schema_id,
            content=content,
            sid=self.sid,
            seq=self.seq,
            first_row_id=first_row_id,
            location=self.location,
        )

    def _manifest_list(self, manifests: list[dict[str, Any]]) -> str:
        """Write the manifest list; its path."""
        list_path = f"{METADATA_DIR}/snap-{self.sid}-{self.tag}.avro"
        metadata = {
            "snapshot-id": str(self.sid),
            "parent-snapshot-id": str(self.parent) if self.parent is not None else "null",
            "sequence-number": str(self.seq),
            "format-version": "3",
            "first-row-id": str(self.first_row_id),
        }
        self.writer.write(list_path, avro.container(_MANIFEST_FILE, manifests, metadata=metadata))
        return list_path

    def _snapshot(self, list_path: str, *, delete_files: int) -> dict[str, Any]:
        """The snapshot entry, its summary carrying ``mvtable.version``."""
        snapshot: dict[str, Any] = {
            "snapshot-id": self.sid,
            "sequence-number": self.seq,
            "timestamp-ms": self.snap.timestamp_ms,
            "manifest-list": f"{self.location}/{list_path}",
            "schema-id": self.schema_id,
            "summary": {
                "operation": "overwrite",
                "mvtable.version": str(self.snap.version),
                "total-records": str(self.data_rows - sum(f.dv.cardinality for f in self.files if f.dv)),
                "total-data-files": str(len(self.files)),
                "total-delete-files": str(delete_files),
            },
            "first-row-id": self.first_row_id,
            "added-rows": self.data_rows,
        }
        if self.parent is not None:
            snapshot["parent-snapshot-id"] = self.parent
        return snapshot

    def _partition_specs(self, base: dict[str, Any]) -> list[dict[str, Any]]:
        """Every spec exported so far and every spec of this version (specs are never changed, only added)."""
        specs = {int(s["spec-id"]): s for s in base.get("partition-specs", [])}
        specs.update({spec_id: spec_json(spec) for spec_id, spec in self.snap.partition_specs.items()})
        specs.setdefault(0, {"spec-id": 0, "fields": []})
        return [specs[k] for k in sorted(specs)]

    def _table_metadata(self, snapshot: dict[str, Any]) -> dict[str, Any]:
        """The metadata so far (or a new table's) with ``snapshot`` current.

        The schema, name mapping and table id are this version's."""
        base = self.meta or {
            "format-version": 3,
            "table-uuid": table_uuid(self.snap.table_id),
            "location": self.location,
            "snapshots": [],
            "snapshot-log": [],
            "metadata-log": [],
        }
        out = dict(base)
        # every schema a snapshot of the export was written under stays, each snapshot naming its
        # own (time travel in Iceberg reads each version with its schema); one id, one schema
        schemas = [s for s in base.get("schemas", []) if s.get("schema-id") != self.schema_id]
        out.update(
            {
                "last-sequence-number": max(self.seq, int(base.get("last-sequence-number", 0))),
                "last-updated-ms": self.snap.timestamp_ms,
                "last-column-id": max(self.last_column_id, int(base.get("last-column-id", 0))),
                "current-schema-id": self.schema_id,
                "schemas": sorted([*schemas, self.schema], key=lambda s: s["schema-id"]),
                "default-spec-id": self.snap.default_spec_id,
                "partition-specs": self._partition_specs(base),
                "last-partition-id": max(
                    last_partition_id(self.snap.partition_specs.values()), int(base.get("last-partition-id", 0))
                ),
                "default-sort-order-id": 0,
                "sort-orders": [{"order-id": 0, "fields": []}],
                "properties": {_NAME_MAPPING: self.name_mapping, "mvtable.table-id": self.snap.table_id},
                "current-snapshot-id": self.sid,
                "refs": {"main": {"snapshot-id": self.sid, "type": "branch"}},
                "snapshots": [*base["snapshots"], snapshot],
                "snapshot-log": [*base["snapshot-log"], {"snapshot-id": self.sid, "timestamp-ms": self.snap.timestamp_ms}],
                "next-row-id": self.first_row_id + self.data_rows,
            }
        )
        return out


def _data_entry(f: LiveFile, version: int, partition: dict[str, Any]) -> dict[str, Any]:
    added = f.added_version == version
    return {
        "status": _ADDED if added else _EXISTING,
        "snapshot_id": snapshot_id(f.added_version),
        "sequence_number": None if added else f.added_version + 1,
        "file_sequence_number": None if added else f.added_version + 1,
        "data_file": {
            "content": 0,
            "file_path": f.location,
            "file_format": "PARQUET",
            "partition": partition,
            "record_count": f.num_rows,
            "file_size_in_bytes": f.size_bytes,
        },
    }


def _write_manifest(
    writer: MetadataWriter,
    path: str,
    entries: list[dict[str, Any]],
    schema: dict[str, Any],
    *,
    spec: IcebergSpec,
    summaries: list[dict[str, Any]],
    schema_id: int = 0,
    content: int,
    sid: int,
    seq: int,
    first_row_id: int | None,
    location: str,
) -> dict[str, Any]:
    for e in entries:
        if e["snapshot_id"] is None:
            e["snapshot_id"] = sid
    data = avro.container(
        _manifest_entry(spec.avro_record()),
        entries,
        metadata={
            "schema": json.dumps(schema),
            "schema-id": str(schema_id),
            "partition-spec": json.dumps(spec.json["fields"]),
            "partition-spec-id": str(spec.spec_id),
            "format-version": "3",
            "content": "deletes" if content else "data",
        },
    )
    writer.write(path, data)
    added = [e for e in entries if e["status"] == _ADDED]
    existing = [e for e in entries if e["status"] == _EXISTING]
    seqs = [e["sequence_number"] for e in existing] + ([seq] if added else [])
    return {
        "manifest_path": f"{location}/{path}",
        "manifest_length": len(data),
        "partition_spec_id": spec.spec_id,
        "content": content,
        "sequence_number": seq,
        "min_sequence_number": min(seqs),
        "added_snapshot_id": sid,
        "added_files_count": len(added),
        "existing_files_count": len(existing),
        "deleted_files_count": 0,
        "added_rows_count": sum(e["data_file"]["record_count"] for e in added),
        "existing_rows_count": sum(e["data_file"]["record_count"] for e in existing),
        "deleted_rows_count": 0,
        "partitions": summaries,
        "first_row_id": first_row_id,
    }
