"""What a scoped consistent push replaces, and when two pushes are in each other's way (Druid's time-chunk locks).

A consistent push without a scope replaces the whole table. A *scoped* push (``replace_where``,
dynamic partition overwrite) replaces the rows of some partitions only; its lineage entry
records those partitions as a ``PushScope``: the spec they follow, their partition tuples
(the log's JSON scalars, as segments record them), a label per partition for people
(``ts_day=2024-01-05``) and the predicate as the user wrote it. Two pushes may run at the
same time when their scopes are disjoint, as Druid's locks on disjoint intervals do.

The rule (``scopes_overlap``) is conservative where it cannot be exact: no scope is the whole
table and overlaps everything; scopes under different specs (a table whose partitioning
evolved between them) overlap, because a partition of one spec may hold rows of any
partition of the other. Pure: the labels are made by the connector, which knows the
transforms; this module only compares and prints them.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["ScopeValue", "PushScope", "scopes_overlap", "shared_partitions", "describe_scope"]

ScopeValue = str | int | float | bool | None  # a partition value as the log stores it (a JSON scalar)

_SHOWN = 5  # partitions a message lists before it says how many more there are


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PushScope(_Model):
    """The partitions a scoped push replaces or writes, under spec ``spec_id``.

    ``labels`` (one per partition, same order) and ``predicate`` are for people only;
    ``dynamic`` says the partitions came from the data (``partition_overwrite="dynamic"``)."""

    spec_id: int = Field(ge=0)
    partitions: tuple[tuple[ScopeValue, ...], ...] = ()
    labels: tuple[str, ...] = ()
    predicate: str | None = Field(default=None, max_length=10_000)
    dynamic: bool = False

    @field_validator("partitions", mode="before")
    @classmethod
    def _scalars(cls, v: object) -> object:
        if not isinstance(v, (list, tuple)):
            raise ValueError("a scope's partitions are a list of partition tuples")
        for part in v:
            if not isinstance(part, (list, tuple)):
                raise ValueError(f"a partition is a list of values, not {type(part).__name__}")
            for value in part:
                if value is not None and type(value) not in (str, int, float, bool):
                    raise ValueError(f"partition value {value!r} is not a JSON scalar")
        return tuple(tuple(p) for p in v)

    @model_validator(mode="after")
    def _labels_match(self) -> PushScope:
        if self.labels and len(self.labels) != len(self.partitions):
            raise ValueError(f"a scope has {len(self.partitions)} partitions but {len(self.labels)} labels")
        if len(set(self.partitions)) != len(self.partitions):
            raise ValueError("a scope names a partition twice")
        return self

    def label(self, index: int) -> str:
        """Partition ``index`` for people: its label, else its raw values."""
        if self.labels:
            return self.labels[index]
        return "(" + ", ".join(repr(v) for v in self.partitions[index]) + ")"


def scopes_overlap(a: PushScope | None, b: PushScope | None) -> bool:
    """Whether two pushes may replace the same rows.

    No scope is the whole table; one spec compares partition tuples; two specs overlap."""
    if a is None or b is None or a.spec_id != b.spec_id:
        return True
    return not set(a.partitions).isdisjoint(b.partitions)


def shared_partitions(ours: PushScope | None, theirs: PushScope | None) -> list[str]:
    """The partitions both scopes hold, for people (``theirs``' labels); empty when they share none or either is the whole table."""
    if ours is None or theirs is None or ours.spec_id != theirs.spec_id:
        return []
    wanted = set(ours.partitions)
    return [theirs.label(i) for i, p in enumerate(theirs.partitions) if p in wanted]


def describe_scope(scope: PushScope | None, *, only: Sequence[str] | None = None) -> str:
    """A scope in a sentence: ``partitions ts_day=2024-01-05, ts_day=2024-01-06``, ``the whole table``.

    ``only`` narrows it to some labels (the ones two pushes share)."""
    if scope is None:
        return "the whole table"
    if scope.partitions == ((),):
        return "the whole table (unpartitioned)"
    labels = list(only) if only is not None else [scope.label(i) for i in range(len(scope.partitions))]
    if not labels:
        return f"no partition yet (spec {scope.spec_id})"
    shown = ", ".join(labels[:_SHOWN])
    more = f" and {len(labels) - _SHOWN} more" if len(labels) > _SHOWN else ""
    word = "partition" if len(labels) == 1 else "partitions"
    return f"{word} {shown}{more}"
