"""A table's partition specs and each segment's partition values as Iceberg and Delta write them.

The log keeps a partition as JSON scalars in the statistics' encoding
(``connector.partitions.values``); Iceberg wants each value in its partition type's own
representation (a ``day`` as a date, i.e. days as an Avro ``int``; an identity timestamp as
microseconds; a decimal as its unscaled two's complement in a ``fixed``), typed by an Avro
``partition`` record per spec in every manifest, and bounds per field in the manifest list.
Delta knows identity partitions only, each value as a string (``partitionValues``).

Every spec a snapshot has is exported with the field ids the log gave it: Iceberg readers
match a data file's partition to the spec its manifest names, and an evolved table's old
files keep the spec they were written under.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pyarrow as pa

from mvtable.errors import ExportError
from mvtable.lineage.partitioning import PartitionField, PartitionSpec
from mvtable.lineage.schema_ids import field_id, with_ids

from ..partitions.transforms import Transform, parse_transform
from ..partitions.values import decode_value
from ..schema import schema_from_json
from .types import iceberg_type

__all__ = [
    "DeltaPartitioning",
    "IcebergSpec",
    "delta_partitioning",
    "iceberg_specs",
    "last_partition_id",
    "spec_json",
]

_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_AVRO_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NO_PARTITION_FIELDS = 999  # Iceberg's last-partition-id of a table that never had a partition field


@dataclass(frozen=True)
class _Source:
    """A partition field's source column under the exported schema."""

    name: str
    spark_type: Any  # the stored StructType JSON type
    arrow: pa.DataType


@dataclass(frozen=True)
class _Field:
    spec_field: PartitionField
    transform: Transform
    source: _Source
    iceberg: str  # the partition value's Iceberg type
    avro_name: str


class IcebergSpec:
    """One partition spec as Iceberg manifests hold it: the Avro ``partition`` record and each file's values."""

    def __init__(self, spec: PartitionSpec, sources: dict[int, _Source]) -> None:
        self.spec_id = spec.spec_id
        self.fields = [_field(f, sources, spec.spec_id) for f in spec.fields]
        self.json = spec_json(spec)

    def avro_record(self) -> dict[str, Any]:
        """The manifest's ``partition`` struct (field id 102): one optional field per spec field, named for Avro."""
        return {
            "type": "record",
            "name": "r102",
            "fields": [
                {"name": f.avro_name, "type": ["null", _avro_type(f)], "default": None, "field-id": f.spec_field.field_id}
                for f in self.fields
            ],
        }

    def values(self, partition: Sequence[Any] | None, *, where: str) -> list[Any]:
        """A segment's stored partition tuple as Iceberg values, in spec order (dates and timestamps as counts).

        Raises:
            ExportError: the tuple does not have one value per field of the spec.
            CorruptMetadataError: a stored value does not fit its field (``where`` names the segment)."""
        stored = list(partition or ())
        if len(stored) != len(self.fields):
            raise ExportError(
                f"{where} has {len(stored)} partition values, but partition spec {self.spec_id} has {len(self.fields)} fields"
            )
        out = []
        for f, value in zip(self.fields, stored):
            py = decode_value(value, f.transform, f.source.arrow, where=where)
            out.append(_iceberg_value(py, f.iceberg))
        return out

    def record(self, values: Sequence[Any]) -> dict[str, Any]:
        """The ``partition`` record of one data file, each value as the Avro encoder writes it."""
        return {f.avro_name: _avro_value(v, f.iceberg) for f, v in zip(self.fields, values)}

    def summaries(self, partitions: Iterable[Sequence[Any]]) -> list[dict[str, Any]]:
        """The manifest list's ``partitions`` field summaries over the files of one manifest.

        Each field's lower and upper bound in Iceberg's single-value binary form, ignoring nulls and NaN."""
        rows = list(partitions)
        out = []
        for i, f in enumerate(self.fields):
            column = [row[i] for row in rows]
            nan = any(isinstance(v, float) and math.isnan(v) for v in column)
            plain = [v for v in column if v is not None and not (isinstance(v, float) and math.isnan(v))]
            out.append(
                {
                    "contains_null": any(v is None for v in column),
                    "contains_nan": nan if f.iceberg in ("float", "double") else None,
                    "lower_bound": _single_value(min(plain), f.iceberg) if plain else None,
                    "upper_bound": _single_value(max(plain), f.iceberg) if plain else None,
                }
            )
        return out


def spec_json(spec: PartitionSpec) -> dict[str, Any]:
    """A spec as Iceberg's table metadata and manifests write it."""
    return {
        "spec-id": spec.spec_id,
        "fields": [
            {"source-id": f.source_id, "field-id": f.field_id, "name": f.name, "transform": f.transform} for f in spec.fields
        ],
    }


def iceberg_specs(specs: dict[int, PartitionSpec], table_schema: dict[str, Any]) -> dict[int, IcebergSpec]:
    """Every spec of a snapshot, checked against its schema (spec 0, unpartitioned, always).

    Raises:
        ExportError: a spec partitions by a column the table no longer has.
        UnsupportedExportTypeError: a partition value's type has no Iceberg equivalent."""
    sources = _sources(table_schema)
    out = {spec_id: IcebergSpec(spec, sources) for spec_id, spec in specs.items()}
    out.setdefault(0, IcebergSpec(PartitionSpec(spec_id=0), sources))
    return dict(sorted(out.items()))


def last_partition_id(specs: Iterable[PartitionSpec]) -> int:
    """Iceberg's ``last-partition-id``: the highest partition field id (999 with none)."""
    return max((f.field_id for spec in specs for f in spec.fields), default=_NO_PARTITION_FIELDS)


def _sources(table_schema: dict[str, Any]) -> dict[int, _Source]:
    arrow = schema_from_json(table_schema)
    out = {}
    for f in with_ids(table_schema).get("fields", ()):
        out[field_id(f) or 0] = _Source(f["name"], f["type"], arrow.field(f["name"]).type)
    return out


def _field(spec_field: PartitionField, sources: dict[int, _Source], spec_id: int) -> _Field:
    source = sources.get(spec_field.source_id)
    if source is None:
        raise ExportError(
            f"partition spec {spec_id} partitions by {spec_field.transform} of column id {spec_field.source_id} "
            f"({spec_field.name!r}), which the table no longer has; neither Iceberg nor mvtable can type its values"
        )
    transform = parse_transform(spec_field.transform)
    if transform.name in ("identity", "truncate"):
        iceberg = iceberg_type(source.spark_type, column=source.name)
    else:
        iceberg = "date" if transform.name == "day" else "int"
    return _Field(spec_field, transform, source, iceberg, _avro_name(spec_field.name))


def _avro_name(name: str) -> str:
    """``name`` as an Avro field name, the way Iceberg makes one (``_x`` + hex for each character Avro refuses)."""
    if _AVRO_NAME.match(name):
        return name
    out = []
    for i, ch in enumerate(name):
        ok = ch.isascii() and (ch.isalpha() or ch == "_" or (i > 0 and ch.isdigit()))
        out.append(ch if ok else (f"_{ch}" if i == 0 and ch.isdigit() else f"_x{ord(ch):X}"))
    return "".join(out)


def _decimal_shape(iceberg: str) -> tuple[int, int]:
    m = re.match(r"decimal\((\d+),\s*(\d+)\)", iceberg)
    assert m is not None  # iceberg_type writes exactly this
    return int(m.group(1)), int(m.group(2))


def _decimal_bytes(precision: int) -> int:
    """Bytes of the ``fixed`` that holds any unscaled value of ``precision`` digits (Iceberg's rule)."""
    n = 1
    while 2 ** (8 * n - 1) - 1 < 10**precision - 1:
        n += 1
    return n


def _avro_type(f: _Field) -> Any:
    t = f.iceberg
    if t in ("boolean", "int", "long", "float", "double", "string"):
        return t
    if t == "binary":
        return "bytes"
    if t == "date":
        return {"type": "int", "logicalType": "date"}
    if t in ("timestamp", "timestamptz"):
        return {"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": t == "timestamptz"}
    precision, scale = _decimal_shape(t)
    return {
        "type": "fixed",
        "name": f"fixed_{f.spec_field.field_id}",
        "size": _decimal_bytes(precision),
        "logicalType": "decimal",
        "precision": precision,
        "scale": scale,
    }


def _iceberg_value(value: Any, iceberg: str) -> Any:
    """A partition value (as ``decode_value`` gives it) as Iceberg represents it, comparable for bounds.

    Dates and timestamps become their integer counts; a decimal stays a ``Decimal`` until encoded."""
    if value is None:
        return None
    if iceberg == "date":
        return (value - _EPOCH_DATE).days
    if iceberg in ("timestamp", "timestamptz"):
        stamp = value if value.tzinfo is not None else value.replace(tzinfo=dt.timezone.utc)
        return (stamp - _EPOCH) // dt.timedelta(microseconds=1)
    return value


def _unscaled(value: Decimal, iceberg: str) -> int:
    return int(Decimal(value).scaleb(_decimal_shape(iceberg)[1]))


def _avro_value(value: Any, iceberg: str) -> Any:
    """An Iceberg value as the Avro encoder writes it: a decimal as its ``fixed`` two's complement."""
    if value is None or not iceberg.startswith("decimal"):
        return value
    return _unscaled(value, iceberg).to_bytes(_decimal_bytes(_decimal_shape(iceberg)[0]), "big", signed=True)


def _single_value(value: Any, iceberg: str) -> bytes:
    """Iceberg's single-value binary serialization (bounds), of a value as ``_iceberg_value`` gives it."""
    if iceberg == "boolean":
        return b"\x01" if value else b"\x00"
    if iceberg in ("int", "date"):
        return struct.pack("<i", value)
    if iceberg in ("long", "timestamp", "timestamptz"):
        return struct.pack("<q", value)
    if iceberg == "float":
        return struct.pack("<f", value)
    if iceberg == "double":
        return struct.pack("<d", value)
    if iceberg == "string":
        return str(value).encode("utf-8")
    if iceberg == "binary":
        return bytes(value)
    # decimal: the unscaled value's shortest big-endian two's complement
    unscaled = _unscaled(value, iceberg)
    magnitude = unscaled if unscaled >= 0 else ~unscaled
    return unscaled.to_bytes(magnitude.bit_length() // 8 + 1, "big", signed=True)


# --- Delta ------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeltaPartitioning:
    """The identity partition columns a Delta export lists, and where each one's value is in each spec's tuple."""

    columns: tuple[str, ...]  # logical names, in the order of the default spec
    positions: dict[int, tuple[int, ...]]  # spec id -> index in the partition tuple of each column
    arrow: tuple[pa.DataType, ...]

    def values(self, spec_id: int | None, partition: Sequence[Any] | None, *, where: str) -> dict[str, str | None]:
        """``partitionValues`` of one file: each column's value in Delta's string form, null as None."""
        picks = self.positions[spec_id or 0]
        stored = list(partition or ())
        identity = parse_transform("identity")
        out: dict[str, str | None] = {}
        for column, i, arrow in zip(self.columns, picks, self.arrow):
            out[column] = _delta_string(decode_value(stored[i], identity, arrow, where=where), arrow)
        return out


def delta_partitioning(
    specs: dict[int, PartitionSpec], default_spec_id: int, used: Iterable[int | None], table_schema: dict[str, Any]
) -> DeltaPartitioning:
    """The identity columns every file of the snapshot is partitioned by (Delta's ``partitionColumns``).

    Delta has one partitioning and identity values only: a column counts when every spec a visible
    file was written under (``used``; None is unpartitioned) has an identity field on it. Transforms
    (``day(ts)``, ``bucket``) and a table whose files differ in that export unpartitioned. A binary
    column is left out too: Delta spells its value as a string of escaped bytes, which delta-rs reads
    back as that string's UTF-8 bytes (any byte above 0x7f comes back wrong)."""
    sources = _sources(table_schema)
    used_ids = {u or 0 for u in used} or {default_spec_id}
    identity_by_spec: dict[int, dict[int, int]] = {}
    for spec_id in used_ids:
        spec = specs.get(spec_id, PartitionSpec(spec_id=0)) if spec_id else PartitionSpec(spec_id=0)
        identity_by_spec[spec_id] = {f.source_id: i for i, f in enumerate(spec.fields) if f.transform == "identity"}
    default = specs.get(default_spec_id, PartitionSpec(spec_id=0))
    order = [f.source_id for f in default.fields if f.transform == "identity"]
    order += sorted({sid for ids in identity_by_spec.values() for sid in ids} - set(order))
    common = [
        sid
        for sid in order
        if sid in sources and not _binary(sources[sid].arrow) and all(sid in ids for ids in identity_by_spec.values())
    ]
    return DeltaPartitioning(
        columns=tuple(sources[sid].name for sid in common),
        positions={spec_id: tuple(ids[sid] for sid in common) for spec_id, ids in identity_by_spec.items()},
        arrow=tuple(sources[sid].arrow for sid in common),
    )


def _binary(t: pa.DataType) -> bool:
    return bool(pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t))


def _delta_string(value: Any, arrow: pa.DataType) -> str | None:
    """A partition value as Delta's ``partitionValues`` spell it (Delta protocol, "Partition Value Serialization")."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:  # a timestamp with a time zone: its UTC instant
            return value.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else repr(value)
    return str(value)
