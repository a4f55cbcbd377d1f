"""Typed settings: the shipped defaults (``defaults.toml``) and table properties.

Table properties are stored in the log as strings (like Delta's ``delta.*`` properties);
``TableProperties.from_strings`` turns them into typed values, so a bad value is reported
once, with its name, instead of failing somewhere deep in a vacuum.
"""

from __future__ import annotations

import math
import numbers
import re
import sys
import warnings
from collections.abc import Mapping
from functools import lru_cache
from importlib import resources
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from mvtable import checks
from mvtable.errors import SettingsError

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI
    import tomli as tomllib

_PERIOD = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)\s*$")
_UNIT_S = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]i?b?|b)?\s*$", re.IGNORECASE)
_UNIT_B = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_period(text: str | int | float, *, name: str = "period") -> float:
    """Seconds in a human period such as ``4h``, ``7d``, ``0s``, ``250ms``, or a number of seconds.

    Every period is finite and non-negative: NaN compares false with any minimum (a NaN
    retention would pass the too-short check) and infinity overflows the clock.

    Raises:
        SettingsError: ``value`` is not such a period."""
    if isinstance(text, (int, float, numbers.Real)) and not isinstance(text, bool):
        return checks.seconds(text, name=name, error=SettingsError)
    if not isinstance(text, str):
        raise SettingsError(f"{name}: {text!r} is not a period; use a number and a unit, e.g. 30m, 4h, 7d, 0s")
    match = _PERIOD.match(text)
    if not match:
        raise SettingsError(f"{name}: {text!r} is not a period; use a number and a unit, e.g. 30m, 4h, 7d, 0s")
    # a string of 400 digits is a float too large for the clock (inf): refused as above
    return checks.seconds(float(match.group(1)) * _UNIT_S[match.group(2)], name=f"{name} {text!r}", error=SettingsError)


def parse_size(text: str | int, *, name: str = "size") -> int:
    """Bytes in a size such as ``128MiB``, ``1g``, ``512k`` or a plain number of bytes.

    Units are binary: ``MB`` and ``MiB`` both mean 2**20, as in Spark's settings. A plain
    number must be whole (``1.5`` bytes is a mistake, not one byte); with a unit a fraction
    is fine (``1.5g``).

    Raises:
        SettingsError: ``value`` is not such a size."""
    if isinstance(text, numbers.Integral) and not isinstance(text, bool):
        value = int(text)
    elif not isinstance(text, str):
        raise SettingsError(f"{name}: {text!r} is not a size; use whole bytes or a number and a unit, e.g. 134217728, 128MiB, 1g")
    else:
        match = _SIZE.match(text)
        unit = ((match.group(2) if match else None) or "b")[0].lower()
        if not match or (unit == "b" and not match.group(1).isdigit()):
            raise SettingsError(
                f"{name}: {text!r} is not a size; use whole bytes or a number and a unit, e.g. 134217728, 128MiB, 1g"
            )
        value = int(float(match.group(1)) * _UNIT_B.get(unit, 1))
    if value < 1:
        raise SettingsError(f"{name}: a size must be at least one byte, not {text!r}")
    return value


def property_strings(properties: object) -> dict[str, str]:
    """Table properties as the log stores them (strings), from what a Python caller is likely to write.

    ``{"rowGroupRows": 100, "autoCompact": True}`` becomes
    ``{"rowGroupRows": "100", "autoCompact": "true"}`` and a number for a period means
    seconds (``"3600s"``).

    Raises:
        SettingsError: A value of any other type; the message names the property."""
    if properties is None:
        return {}
    if not isinstance(properties, Mapping):
        raise SettingsError(
            f"properties must be a mapping of property name to value, e.g. {{'rowGroupRows': '100000'}}, "
            f"not {type(properties).__name__}"
        )
    out: dict[str, str] = {}
    for name, value in properties.items():
        if not isinstance(name, str):
            raise SettingsError(f"table property names are strings, not {name!r}")
        stored = on_disk_name(name)
        out[stored] = _property_string(stored, value)
    return out


def _property_string(name: str, value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, numbers.Integral):
        text = str(int(value))
    elif isinstance(value, numbers.Real) and math.isfinite(float(value)):
        text = repr(float(value))
    else:
        raise SettingsError(f"{name}: {value!r} is not a property value; give a string, a number or a bool")
    return f"{text}s" if name.endswith("Period") else text


class _Settings(BaseModel):
    """Settings read in Python by snake_case name; stored and written by their camelCase alias.

    The log, ``defaults.toml``, Spark options (``property.rowGroupRows``) and every table
    already written spell them in camelCase, so that stays the on-disk name; either
    spelling is accepted on the way in (``on_disk_name``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True)

    def __getattr__(self, name: str) -> Any:
        # the camelCase attribute names of earlier releases, for one more release
        for field_name, info in type(self).model_fields.items():
            if info.alias == name:
                warnings.warn(
                    f"{type(self).__name__}.{name} is deprecated and goes away in the next release; "
                    f"use .{field_name} (the stored name stays {name})",
                    DeprecationWarning,
                    stacklevel=2,
                )
                return getattr(self, field_name)
        return super().__getattr__(name)  # type: ignore[misc]


class TableProperties(_Settings):
    checkpoint_interval: int = Field(ge=1)
    replaced_segments_retention_period: str
    lineage_entry_cleanup_retention_period: str
    version_retention_period: str
    orphan_grace_period: str
    row_group_rows: int = Field(ge=1)
    dv_inline_max_bytes: int = Field(ge=0)
    iceberg_compat: bool
    push_lease_period: str
    streaming_app_retention_period: str
    compact_target_file_size: int = Field(ge=1)
    compact_min_input_files: int = Field(ge=1)
    compact_delete_ratio: float = Field(gt=0, le=1)
    compact_max_bytes_per_commit: int = Field(ge=1)
    auto_compact: bool
    commit_durability: Literal["fsync", "os"]
    partition_retention: str

    @field_validator("commit_durability", mode="before")
    @classmethod
    def _durability(cls, v: Any) -> Any:
        if v not in ("fsync", "os"):
            raise SettingsError(
                f"commitDurability: {v!r} is not a durability; use 'fsync' (the default: a commit file and its folder "
                "reach the disk before the commit counts) or 'os' (the OS writes them back later, as Lance and delta-rs "
                "do: a commit survives a crash of the process, not a power loss)"
            )
        return v

    @field_validator("partition_retention")
    @classmethod
    def _retention(cls, v: str) -> str:
        if v.strip():
            parse_period(v, name="partitionRetention")
        return v

    @property
    def partition_retention_s(self) -> float | None:
        """How old a partition's time range must end to be dropped by vacuum; None: never."""
        return parse_period(self.partition_retention, name="partitionRetention") if self.partition_retention.strip() else None

    @property
    def commit_fsync(self) -> bool:
        """Whether commit and checkpoint files are flushed to disk before they count."""
        return self.commit_durability == "fsync"

    @field_validator("compact_target_file_size", "compact_max_bytes_per_commit", mode="before")
    @classmethod
    def _size(cls, v: Any, info: Any) -> int:
        return parse_size(v, name=to_camel(info.field_name))

    @field_validator(
        "replaced_segments_retention_period",
        "lineage_entry_cleanup_retention_period",
        "version_retention_period",
        "orphan_grace_period",
        "push_lease_period",
        "streaming_app_retention_period",
    )
    @classmethod
    def _period(cls, v: str, info: Any) -> str:
        parse_period(v, name=to_camel(info.field_name))
        return v

    # Periods are stored as the text the user wrote (``7d``); code reads them in seconds.
    @property
    def version_retention_s(self) -> float:
        return parse_period(self.version_retention_period, name="versionRetentionPeriod")

    @property
    def replaced_segments_retention_s(self) -> float:
        return parse_period(self.replaced_segments_retention_period, name="replacedSegmentsRetentionPeriod")

    @property
    def lineage_entry_retention_s(self) -> float:
        return parse_period(self.lineage_entry_cleanup_retention_period, name="lineageEntryCleanupRetentionPeriod")

    @property
    def orphan_grace_s(self) -> float:
        return parse_period(self.orphan_grace_period, name="orphanGracePeriod")

    @property
    def push_lease_ms(self) -> int:
        return int(parse_period(self.push_lease_period, name="pushLeasePeriod") * 1000)

    @property
    def streaming_app_retention_s(self) -> float:
        return parse_period(self.streaming_app_retention_period, name="streamingAppRetentionPeriod")

    @classmethod
    def from_strings(cls, stored: Mapping[str, str]) -> TableProperties:
        """The properties a table stores (or a writer asks for), over the shipped defaults.

        Raises:
            SettingsError: An unknown name or a bad value; the message names the property."""
        return _strict(tuple(sorted(stored.items())))

    @classmethod
    def of(cls, properties: Mapping[str, str], overrides: Mapping[str, str] | None = None) -> TableProperties:
        """A table's stored ``properties`` with a writer's ``overrides`` on top.

        Plain mappings, not a snapshot: every layer reads a table's properties (the log, the
        writers, GC), and settings import none of them.

        Raises:
            SettingsError: an unknown name or a bad value, naming the property (an
                ``InvalidOptionError``).
        """
        return cls.from_strings({**properties, **(overrides or {})})

    @classmethod
    def tolerant(cls, stored: Mapping[str, str]) -> tuple[TableProperties, dict[str, str]]:
        """The properties a table stores, read so that nothing in them can fail.

        For code that runs after a commit landed (it must not make the commit look failed):
        names this version does not know are ignored, bad values fall back to the defaults.
        Returns the properties and {property name: what was wrong with it}."""
        return _tolerant(tuple(sorted(stored.items())))


@lru_cache(maxsize=256)
def _strict(items: tuple[tuple[str, str], ...]) -> TableProperties:
    """``from_strings``, once per distinct set of properties.

    A write, its commit and its after-commit work each read the table's properties, and the
    model is frozen. Errors are raised, never cached."""
    stored = {on_disk_name(k): v for k, v in items}
    known = _on_disk_names(TableProperties)
    unknown = sorted(set(stored) - known)
    if unknown:
        raise SettingsError(f"unknown table properties {unknown}; known: {sorted(known)}")
    try:
        return TableProperties.model_validate({**defaults()["table"], **stored})
    except ValidationError as exc:
        raise SettingsError(_explain(exc)) from None


@lru_cache(maxsize=256)
def _tolerant(items: tuple[tuple[str, str], ...]) -> tuple[TableProperties, dict[str, str]]:
    known = _on_disk_names(TableProperties)
    named = {on_disk_name(k): v for k, v in items}
    problems = {k: f"unknown table property {k!r} ignored" for k in named if k not in known}
    stored = {k: v for k, v in named.items() if k in known}
    while True:
        try:
            return TableProperties.model_validate({**defaults()["table"], **stored}), problems
        except ValidationError as exc:
            bad = {str(e["loc"][0]) for e in exc.errors() if e["loc"] and e["loc"][0] in stored}
            if not bad:  # the shipped defaults themselves fail: nothing to fall back to
                raise SettingsError(_explain(exc)) from None
            problems.update({k: f"table property {k}={stored.pop(k)!r} is invalid; using the default" for k in sorted(bad)})


class ConnectorSettings(_Settings):
    """Settings of the connector process (shipped in ``defaults.toml`` [connector])."""

    max_partition_bytes: int = Field(ge=1)
    dv_cache_bytes: int = Field(ge=0)
    pin_ttl: str
    pin_idle_ttl: str
    gc_batch_bytes: int = Field(ge=1)
    gc_time_budget: str
    write_intent_ttl: str

    @field_validator("pin_ttl", "pin_idle_ttl", "gc_time_budget", "write_intent_ttl")
    @classmethod
    def _period(cls, v: str, info: Any) -> str:
        parse_period(v, name=to_camel(info.field_name))
        return v

    @property
    def pin_ttl_s(self) -> float:
        return parse_period(self.pin_ttl, name="pinTtl")

    @property
    def pin_idle_ttl_s(self) -> float:
        return parse_period(self.pin_idle_ttl, name="pinIdleTtl")

    @property
    def gc_time_budget_s(self) -> float:
        return parse_period(self.gc_time_budget, name="gcTimeBudget")

    @property
    def write_intent_ttl_s(self) -> float:
        return parse_period(self.write_intent_ttl, name="write_intent_ttl")


def on_disk_name(name: str) -> str:
    """The stored, camelCase name of a setting given in either spelling (``row_group_rows`` → ``rowGroupRows``).

    Names no settings model knows pass through unchanged, for the caller to refuse."""
    snake = set(TableProperties.model_fields) | set(ConnectorSettings.model_fields)
    return to_camel(name) if name in snake else name


def _on_disk_names(model: type[_Settings]) -> set[str]:
    return {to_camel(name) for name in model.model_fields}


@lru_cache(maxsize=1)
def defaults() -> dict[str, dict[str, Any]]:
    with resources.files(__package__).joinpath("defaults.toml").open("rb") as f:
        loaded: dict[str, dict[str, Any]] = tomllib.load(f)
    return loaded


@lru_cache(maxsize=1)
def connector_settings() -> ConnectorSettings:
    """The shipped connector settings.

    Raises:
        SettingsError: A setting has a bad value; the message names it."""
    try:
        return ConnectorSettings.model_validate(defaults()["connector"])
    except ValidationError as exc:
        raise SettingsError(_explain(exc)) from None


def _explain(exc: ValidationError) -> str:
    """One line per bad setting, each starting with its name.

    Our own validators' messages (``parse_period``…) already do; pydantic's get the name put
    in front."""
    parts = []
    for e in exc.errors():
        name = ".".join(map(str, e["loc"]))
        cause = (e.get("ctx") or {}).get("error")
        parts.append(str(cause) if isinstance(cause, SettingsError) else f"{name}: {e['msg']}")
    return "; ".join(parts)
