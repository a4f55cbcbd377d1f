"""Reader and writer options, parsed once and validated with typed errors.

Spark hands options as a case-insensitive map of strings; the same models serve the
``Table`` API's keyword arguments. Unknown options are errors (a typo such as
``versionAsof=3`` silently reading the newest version would be a wrong answer)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from mvtable.conf import TableProperties, connector_settings, on_disk_name, parse_period
from mvtable.errors import InvalidOptionError, SettingsError

from .partitions.spec import parse_partition_field
from .timeparse import parse_timestamp_ms

STORAGE_PREFIX = "storage."
PROPERTY_PREFIX = "property."


# Options Spark and SQL users write that only a catalog table carries (CREATE TABLE … USING
# mvtable [LOCATION …]): mvtable keeps no catalog entries, so these mean such a statement.
_CATALOG_KEYS = frozenset({"owner", "location", "provider"})
_NO_CATALOG = (
    "catalog tables are not supported: mvtable tables live at a path, not in Spark's catalog. "
    "Query one with CREATE TEMPORARY VIEW v USING mvtable OPTIONS (path '…') or mvtable.create_view(spark, 'v', path); "
    "create one with df.write.format('mvtable').mode('append').save(path)"
)


def _bool(value: Any, name: str) -> bool:
    """Exactly true or false (any case), as Spark's own boolean options.

    ``"1"`` or ``"yes"`` are more likely a slip than a choice, and the error says what to write."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise InvalidOptionError(f"option {name}: {value!r} is not a boolean; use true or false")


def split_partition_by(value: Any) -> tuple[str, ...] | None:
    """The fields of a ``partitionBy`` option: ``"day(ts), region, bucket(16, id)"`` → three items.

    Commas inside parentheses belong to their field."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return tuple(str(v).strip() for v in value)
    items: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in str(value):
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            items.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    items.append("".join(current).strip())
    if any(not item for item in items):
        raise ValueError(f"{value!r} has an empty field; write e.g. 'day(ts),region'")
    return tuple(items)


def _fields_of(items: tuple[str, ...]) -> list[tuple[str, str]]:
    """``(transform, column)`` of each ``partitionBy`` item, the column folded as Spark folds names.

    Raises:
        PartitionSpecError: an item is not a column or a transform of one."""
    out = []
    for item in items:
        transform, column = parse_partition_field(item)
        out.append((transform.text, column.lower()))
    return out


def json_columns(v: Any) -> tuple[str, ...] | None:
    """The ``writerPartitionBy`` option: a JSON list of column names (``mvtable.spark_save`` writes it)."""
    if v is None or isinstance(v, (list, tuple)):
        return None if v is None else tuple(str(c) for c in v)
    try:
        columns = json.loads(v)
    except ValueError:
        columns = None
    if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
        raise ValueError(f"{v!r} is not a JSON list of column names")
    return tuple(columns)


def one_partitioning(opts: _PartitionedWrite) -> Any:
    """``df.write.partitionBy("region", …)``: identity fields, as the ``partitionBy`` option's ``"region"``.

    Given both, they must say the same."""
    if not opts.writer_partition_by:
        return opts
    identity = tuple(f"`{c}`" for c in opts.writer_partition_by)
    if opts.partition_by is not None and _fields_of(opts.partition_by) != _fields_of(identity):
        raise ValueError(
            f"partitionBy({', '.join(map(repr, opts.writer_partition_by))}) and the partitionBy option "
            f"{','.join(opts.partition_by)!r} differ; give the partitioning once (the option also takes "
            "transforms: .option('partitionBy', 'day(ts),region'))"
        )
    if opts.partition_by is None:
        return opts.model_copy(update={"partition_by": identity})
    return opts


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str = Field(min_length=1)
    storage_options: dict[str, Any] = Field(default_factory=dict)


class _PartitionedWrite(_Options):
    """The partitioning a write (batch or stream) gives the table it creates."""

    # the spec: "day(ts),region" (see partitions.spec)
    partition_by: tuple[str, ...] | None = None
    # the columns of Spark's own df.write(Stream).partitionBy(…), a JSON list (set by mvtable.spark_save)
    writer_partition_by: tuple[str, ...] | None = None

    @field_validator("partition_by", mode="before")
    @classmethod
    def _fields(cls, v: Any) -> tuple[str, ...] | None:
        return split_partition_by(v)

    @field_validator("writer_partition_by", mode="before")
    @classmethod
    def _columns(cls, v: Any) -> tuple[str, ...] | None:
        return json_columns(v)

    @model_validator(mode="after")
    def _one_partitioning(self) -> _PartitionedWrite:
        return one_partitioning(self)


class ReadOptions(_Options):
    version_as_of: int | None = Field(default=None, ge=0)
    timestamp_as_of: str | None = None
    columns: tuple[str, ...] | None = None
    max_partition_bytes: int = Field(default_factory=lambda: connector_settings().max_partition_bytes, ge=1)
    min_partitions: int | None = Field(default=None, ge=1)
    with_row_address: bool = False
    lineage_entry: str | None = None
    # how long a Spark read's pin outlives its last query (the JVM route; see native_plan)
    pin_idle_ttl: str = Field(default_factory=lambda: connector_settings().pin_idle_ttl)
    # change feed and streaming reads (see mvtable.connector.streaming)
    read_change_feed: bool = False
    starting_version: str | None = None  # a version number, or "latest" (streams only)
    starting_timestamp: str | None = None
    ending_version: int | None = Field(default=None, ge=0)
    max_rows_per_trigger: int | None = Field(default=None, ge=1)
    max_bytes_per_trigger: int | None = Field(default=None, ge=1)
    skip_change_commits: bool = False

    @field_validator("starting_version")
    @classmethod
    def _start(cls, v: str | None) -> str | None:
        if v is not None and v.strip().lower() != "latest" and not (v.strip().isdigit() and v.strip().isascii()):
            raise ValueError(f"{v!r} is neither a version number nor 'latest'")
        return None if v is None else v.strip().lower()

    @property
    def starting_version_number(self) -> int | None:
        return int(self.starting_version) if self.starting_version not in (None, "latest") else None

    @field_validator("pin_idle_ttl")
    @classmethod
    def _idle(cls, v: str) -> str:
        try:
            seconds = parse_period(v, name="pinIdleTtl")
        except SettingsError as exc:
            raise ValueError(exc.message) from None
        if seconds <= 0:
            raise ValueError(f"{v!r} is no time at all; give a positive period such as 5m")
        return v

    @property
    def pin_idle_ttl_s(self) -> float:
        return parse_period(self.pin_idle_ttl, name="pinIdleTtl")

    @field_validator("columns")
    @classmethod
    def _cols(cls, v: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if v is not None and not v:
            raise ValueError("names no column")
        return v

    @model_validator(mode="after")
    def _one_version(self) -> ReadOptions:
        if self.version_as_of is not None and self.timestamp_as_of is not None:
            raise ValueError("versionAsOf and timestampAsOf cannot be used together; pick one")
        if self.lineage_entry is not None and (self.version_as_of is not None or self.timestamp_as_of is not None):
            raise ValueError("lineageEntry reads the staged snapshot of the newest version; drop versionAsOf/timestampAsOf")
        if self.starting_version is not None and self.starting_timestamp is not None:
            raise ValueError("startingVersion and startingTimestamp cannot be used together; pick one")
        return self

    def for_batch(self) -> ReadOptions:
        """Check the options of ``spark.read``: the change feed needs a start; the per-trigger options belong to streams.

        Raises:
            InvalidOptionError: A stream-only or change-feed-only option, or a change feed without a start."""
        stream_only = {"max_rows_per_trigger", "max_bytes_per_trigger", "skip_change_commits"} & self.model_fields_set
        if stream_only:
            raise InvalidOptionError(f"{_names(stream_only)}: for spark.readStream only, not spark.read")
        if not self.read_change_feed:
            feed_only = {"starting_version", "starting_timestamp", "ending_version"} & self.model_fields_set
            if feed_only:
                raise InvalidOptionError(f"{_names(feed_only)} need readChangeFeed=true in a batch read (or spark.readStream)")
            return self
        if self.starting_version is None and self.starting_timestamp is None:
            raise InvalidOptionError("readChangeFeed in a batch read needs startingVersion or startingTimestamp")
        if self.starting_version == "latest":
            raise InvalidOptionError("startingVersion 'latest' only applies to spark.readStream; give a version number")
        return self._no_snapshot_options("readChangeFeed")

    def for_stream(self) -> ReadOptions:
        """Check the options of ``spark.readStream``.

        Raises:
            InvalidOptionError: ``endingVersion`` was given to a stream."""
        if self.ending_version is not None:
            raise InvalidOptionError("endingVersion does not apply to spark.readStream, which follows the table's new versions")
        return self._no_snapshot_options("spark.readStream")

    def _no_snapshot_options(self, what: str) -> ReadOptions:
        fixed = {"version_as_of", "timestamp_as_of", "lineage_entry", "with_row_address"} & self.model_fields_set
        if fixed:
            raise InvalidOptionError(f"{_names(fixed)} cannot be used with {what}, which reads versions one after another")
        return self


class WriteOptions(_PartitionedWrite):
    consistent_push: bool = False
    publish: bool = True
    merge_schema: bool = False  # add the data's new columns (and widen types) in the write's commit
    overwrite_schema: bool = False  # an overwrite replaces the schema with the data's
    operation: Literal["write", "delete", "upsert"] = "write"  # what a DataFrame write does
    read_version: int | None = Field(default=None, ge=0)
    tag: str | None = Field(default=None, max_length=200)
    primary_key: str | None = Field(default=None, min_length=1)  # comma-separated key columns of a new table
    properties: dict[str, str] = Field(default_factory=dict)
    # Spark's save mode where Spark does not hand it to a Python source (set by mvtable.spark_save)
    save_mode: Literal["errorifexists", "ignore"] | None = None
    # a scoped consistent push (docs/partitions.md): the SQL predicate of the rows it replaces,
    # or "dynamic" (the partitions the data holds; "static", Spark's default, is the whole table)
    replace_where: str | None = Field(default=None, max_length=10_000)
    partition_overwrite_mode: Literal["static", "dynamic"] | None = None

    @field_validator("partition_overwrite_mode", mode="before")
    @classmethod
    def _overwrite_mode(cls, v: str | None) -> str | None:
        text = None if v is None else str(v).strip().lower()
        if text in (None, "static", "dynamic"):
            return text
        raise ValueError(f"{v!r} is not a partition overwrite mode; use dynamic (the partitions the data holds) or static")

    @field_validator("save_mode", mode="before")
    @classmethod
    def _save_mode(cls, v: str | None) -> str | None:
        text = None if v is None else str(v).strip().lower()
        if text in ("error", "errorifexists", "default"):
            return "errorifexists"
        if text in (None, "ignore"):
            return text
        raise ValueError(
            f"{v!r} is not a save mode this option takes; use errorIfExists or ignore (append and overwrite are .mode(…))"
        )

    @field_validator("operation", mode="before")
    @classmethod
    def _op(cls, v: str) -> str:
        if v not in ("write", "delete", "upsert"):
            raise ValueError(f"unknown operation {v!r}; use 'write' (default), 'upsert' or 'delete'")
        return v

    @model_validator(mode="after")
    def _upsert_alone(self) -> WriteOptions:
        if self.operation == "upsert" and self.consistent_push:
            raise ValueError("operation=upsert changes rows in place of the table: it cannot be a consistentPush")
        return self


class StreamWriteOptions(_PartitionedWrite):
    """``df.writeStream`` options.

    The query's checkpoint (its id names the application whose batches land exactly once) or an
    explicit ``txnAppId``."""

    checkpoint_location: str | None = None
    txn_app_id: str | None = None
    merge_schema: bool = False  # a batch with new columns adds them (and widens types) in its commit
    properties: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _identity(self) -> StreamWriteOptions:
        if self.checkpoint_location is None and self.txn_app_id is None:
            raise ValueError(
                "a streaming write needs .option('checkpointLocation', …) (its query id makes each batch land "
                "exactly once) or .option('txnAppId', …)"
            )
        return self


# option name as users write it -> model field
_READ_NAMES = {
    "path": "path",
    "versionAsOf": "version_as_of",
    "timestampAsOf": "timestamp_as_of",
    "columns": "columns",
    "maxPartitionBytes": "max_partition_bytes",
    "minPartitions": "min_partitions",
    "withRowAddress": "with_row_address",
    "lineageEntry": "lineage_entry",
    "pinIdleTtl": "pin_idle_ttl",
    "readChangeFeed": "read_change_feed",
    "startingVersion": "starting_version",
    "startingTimestamp": "starting_timestamp",
    "endingVersion": "ending_version",
    "maxRowsPerTrigger": "max_rows_per_trigger",
    "maxBytesPerTrigger": "max_bytes_per_trigger",
    "skipChangeCommits": "skip_change_commits",
}
_WRITE_NAMES = {
    "path": "path",
    "consistentPush": "consistent_push",
    "publish": "publish",
    "operation": "operation",
    "readVersion": "read_version",
    "tag": "tag",
    "primaryKey": "primary_key",
    "saveMode": "save_mode",
    "mergeSchema": "merge_schema",
    "overwriteSchema": "overwrite_schema",
    "replaceWhere": "replace_where",
    "partitionOverwriteMode": "partition_overwrite_mode",
    "partitionBy": "partition_by",
    "writerPartitionBy": "writer_partition_by",
}
_STREAM_WRITE_NAMES = {
    "path": "path",
    "checkpointLocation": "checkpoint_location",
    "txnAppId": "txn_app_id",
    "mergeSchema": "merge_schema",
    "partitionBy": "partition_by",
    "writerPartitionBy": "writer_partition_by",
}
_READ_KEYS = {k.lower(): v for k, v in _READ_NAMES.items()}
_STREAM_WRITE_KEYS = {k.lower(): v for k, v in _STREAM_WRITE_NAMES.items()}
_WRITE_KEYS = {k.lower(): v for k, v in _WRITE_NAMES.items()}
_DISPLAY = {v: k for k, v in {**_READ_NAMES, **_WRITE_NAMES, **_STREAM_WRITE_NAMES}.items()}
# Spark lower-cases option keys: either spelling of a property, lower-cased, to its stored name.
_PROPERTY_NAMES = {
    spelling.lower(): on_disk_name(name) for name in TableProperties.model_fields for spelling in (name, on_disk_name(name))
}
_BOOLS = {
    "with_row_address",
    "consistent_push",
    "publish",
    "read_change_feed",
    "skip_change_commits",
    "merge_schema",
    "overwrite_schema",
}


def _names(fields: set[str]) -> str:
    return ", ".join(sorted(_DISPLAY[f] for f in fields))


def option_names(fields: Iterable[str]) -> list[str]:
    """The options' names as users write them (``version_as_of`` -> ``versionAsOf``)."""
    return [_DISPLAY[f] for f in fields]


def _storage_value(value: Any) -> Any:
    """Spark options are strings.

    Fsspec wants e.g. ``client_kwargs`` as a dict, so a value written as a JSON object is decoded."""
    if isinstance(value, str) and value.strip().startswith("{"):
        try:
            return json.loads(value)
        except ValueError:
            raise InvalidOptionError(f"storage option value {value!r} looks like JSON but does not parse") from None
    return value


def _collect(options: Mapping[str, Any], keys: dict[str, str], *, allow_properties: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    storage: dict[str, Any] = {}
    properties: dict[str, str] = {}
    for raw_key, value in options.items():
        key = raw_key.lower()
        if key in _CATALOG_KEYS:
            raise InvalidOptionError(f"{_NO_CATALOG} (Spark passed the catalog option {raw_key!r})")
        if key == "paths":  # Spark's name for the paths of .load([p1, p2, …])
            raise InvalidOptionError(f"mvtable reads one table per read; give the path once, e.g. .load(path), not {value}")
        if key.startswith(STORAGE_PREFIX):
            storage[raw_key[len(STORAGE_PREFIX) :]] = _storage_value(value)
        elif allow_properties and key.startswith(PROPERTY_PREFIX):
            # Spark lower-cases option keys; table properties are camelCase.
            name = raw_key[len(PROPERTY_PREFIX) :]
            properties[_PROPERTY_NAMES.get(name.lower(), name)] = str(value)
        elif key in keys:
            field = keys[key]
            if field in _BOOLS:
                value = _bool(value, raw_key)
            elif field == "columns" and isinstance(value, str):
                value = tuple(c.strip() for c in value.split(",") if c.strip())
            out[field] = value
        else:
            known = sorted(_DISPLAY[v] for v in keys.values() if v != "path")
            raise InvalidOptionError(
                f"unknown option {raw_key!r}; mvtable knows {known} and the prefixes {STORAGE_PREFIX!r}"
                + (f", {PROPERTY_PREFIX!r}" if allow_properties else "")
            )
    if "path" not in out:
        # CREATE TABLE … USING mvtable AS SELECT reaches a writer with no options at all
        raise InvalidOptionError(f"no table path: use .load(path) / .save(path) or .option('path', …). SQL {_NO_CATALOG}")
    out["storage_options"] = storage
    if allow_properties:
        out["properties"] = properties
    return out


def _validate(model: type[_Options], raw: dict[str, Any]) -> Any:
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(_DISPLAY.get(str(p), str(p)) for p in e['loc']) or 'options'}: {e['msg']}" for e in exc.errors()
        )
        raise InvalidOptionError(f"invalid options: {problems}") from None


def read_options(options: Mapping[str, Any]) -> ReadOptions:
    opts: ReadOptions = _validate(ReadOptions, _collect(options, _READ_KEYS, allow_properties=False))
    # Timestamps are parsed here, where load() fails, not first when a stream starts.
    for field in ("timestamp_as_of", "starting_timestamp"):
        value = getattr(opts, field)
        if value is not None:
            parse_timestamp_ms(value, option=_DISPLAY[field])
    return opts


def write_options(options: Mapping[str, Any]) -> WriteOptions:
    """The write options of a Spark write, checked before anything is written.

    Raises:
        InvalidOptionError: A delete-only option on another operation, or a timestamp that does
            not parse."""
    opts: WriteOptions = _validate(WriteOptions, _collect(options, _WRITE_KEYS, allow_properties=True))
    delete_only = {"tag", "read_version"} & opts.model_fields_set
    if delete_only and opts.operation != "delete":
        # a writer that ignored them would claim a check (readVersion) or a label (tag) it never made
        raise InvalidOptionError(
            f"{_names(delete_only)} apply to operation=delete only, not operation={opts.operation}; drop them"
        )
    return opts


def stream_write_options(options: Mapping[str, Any]) -> StreamWriteOptions:
    return _validate(StreamWriteOptions, _collect(options, _STREAM_WRITE_KEYS, allow_properties=True))
