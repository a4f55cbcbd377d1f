"""Which segments a compaction rewrites, and in which groups (bins).

Pure: a snapshot in, bins out; no I/O (deleted fractions come from the DV descriptors'
cardinalities).

Inputs are the visible segments that are either *small* (below 3/4 of the target file
size, as Iceberg's default ``min-file-size-bytes``: a segment nearly at the target is not
worth rewriting to gain a few rows) or *worn* (a deleted fraction at or above
``delete_ratio``). Segments an IN_PROGRESS lineage
entry holds (a running or staged consistent push) are never inputs. A bin never mixes
origins: the ``segments_to`` of one COMPLETED push, or plain appends; so rolling that push
back after compaction still hides exactly its rows. Within an origin, segments are packed
next-fit in the order they were added, by the bytes their live rows are expected to take,
up to the target; a bin is worth rewriting when it merges at least ``min_input_files``
segments (and at least two: rewriting one segment that is not worn changes nothing) or
holds a worn one.

A bin never mixes partitions either: inputs are grouped by (origin, spec id, partition tuple),
so every output holds the rows of one partition, as every segment of a partitioned table
must (its partition is the inputs', see ``rewrite``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from mvtable.dvref import DeletionVectorRef
from mvtable.lineage.descriptors import SegmentDescriptor
from mvtable.lineage.operations import compaction_candidates
from mvtable.lineage.partitioning import PartitionValue
from mvtable.lineage.snapshot import Snapshot

__all__ = ["Bin", "BinInput", "CompactionOptions", "Regrain", "commit_batches", "plan_bins", "why_no_bins"]


@dataclass(frozen=True)
class CompactionOptions:
    target_file_size: int
    min_input_files: int
    delete_ratio: float
    max_bytes_per_commit: int


@dataclass(frozen=True)
class Regrain:
    """Where an older-spec segment's rows go: one partition of the default spec."""

    spec_id: int
    partition: tuple[PartitionValue, ...] | None  # None: the default spec is unpartitioned


@dataclass(frozen=True)
class BinInput:
    segment: SegmentDescriptor
    dv: DeletionVectorRef | None  # at the read version the bin was planned (or refreshed) at

    @property
    def deleted(self) -> int:
        return self.dv.cardinality if self.dv is not None else 0

    @property
    def live_rows(self) -> int:
        return self.segment.num_rows - self.deleted

    @property
    def live_bytes(self) -> int:
        n = self.segment.num_rows
        return self.segment.size_bytes if n == 0 else self.segment.size_bytes * self.live_rows // n


@dataclass(frozen=True)
class Bin:
    inputs: tuple[BinInput, ...]
    origin: str | None  # the COMPLETED lineage entry whose segments these are, or None
    worn: tuple[str, ...] = field(default=())  # inputs rewritten for their deletes
    # the output's partition (``Regrain``): the default spec's, for inputs written under an older one
    target: Regrain | None = None

    @property
    def segment_ids(self) -> tuple[str, ...]:
        return tuple(i.segment.id for i in self.inputs)

    @property
    def spec_id(self) -> int | None:
        """The partition spec of the output (None: unpartitioned)."""
        if self.target is not None:
            return self.target.spec_id
        return self.inputs[0].segment.spec_id if self.inputs else None

    @property
    def partition(self) -> tuple[PartitionValue, ...] | None:
        """The partition the output holds (None: unpartitioned)."""
        if self.target is not None:
            return self.target.partition
        return self.inputs[0].segment.partition if self.inputs else None

    @property
    def regrained(self) -> tuple[str, ...]:
        """Inputs written under an older partition spec, whose rows move into the default spec's grain."""
        if self.target is None:
            return ()
        return tuple(i.segment.id for i in self.inputs if i.segment.spec_id != self.target.spec_id)

    @property
    def input_bytes(self) -> int:
        return sum(i.segment.size_bytes for i in self.inputs)

    @property
    def rows_dropped(self) -> int:
        return sum(i.deleted for i in self.inputs)


def plan_bins(
    snapshot: Snapshot,
    options: CompactionOptions,
    *,
    only: set[str] | None = None,
    within: set[str] | None = None,
    grain: Callable[[SegmentDescriptor], Regrain | None] | None = None,
) -> list[Bin]:
    """The bins worth rewriting at ``snapshot``, in the order their segments were added.

    ``only`` restricts planning to bins holding at least one of these segments (auto compaction
    after a write looks only at what that write made worse); ``within`` to these segments
    (``compact(where=…)``: the partitions a filter may match). ``grain`` says, for a segment
    written under an older partition spec, which partition of the default spec holds all its
    rows (None: they do not share one): such a segment is an input whatever its size, binned
    with that partition's segments, so compaction moves the table to its new grain."""
    small = options.target_file_size * 3 // 4
    by_key: dict[_Key, list[BinInput]] = {}
    targets: dict[_Key, Regrain] = {}
    for sid, origin in compaction_candidates(snapshot).items():
        if within is not None and sid not in within:
            continue
        inp = BinInput(snapshot.segments[sid].file, snapshot.dvs.get(sid))
        seg = inp.segment
        moved = grain(seg) if grain is not None and _old_spec(snapshot, seg) else None
        key: _Key
        if moved is not None:
            key = (origin, moved.spec_id, moved.partition)
            targets[key] = moved
        elif inp.segment.size_bytes < small or _worn(inp, options):
            key = (origin, seg.spec_id or 0, seg.partition)  # spec 0: unpartitioned, with or without the id
        else:
            continue
        by_key.setdefault(key, []).append(inp)
    bins: list[Bin] = []
    for key, inputs in by_key.items():
        target = targets.get(key)
        for group in _next_fit(inputs, options.target_file_size):
            worn = tuple(i.segment.id for i in group if _worn(i, options))
            b = Bin(tuple(group), key[0], worn, target)
            worth = len(group) >= max(2, options.min_input_files) or worn or b.regrained
            if worth and (only is None or only.intersection(b.segment_ids)):
                bins.append(b)
    return bins


_Key = tuple[str | None, int, tuple[PartitionValue, ...] | None]  # origin, spec, partition: one bin's worth


def _old_spec(snapshot: Snapshot, seg: SegmentDescriptor) -> bool:
    """Whether ``seg`` follows another spec than the one new writes use."""
    return (seg.spec_id or 0) != snapshot.default_spec_id


def why_no_bins(snapshot: Snapshot, options: CompactionOptions) -> list[str]:
    """Why ``plan_bins`` found nothing to rewrite at ``snapshot``, so a "nothing to compact" is never a riddle.

    It is said in the words of the table properties that decide it (and the CLI flag that overrides
    each)."""
    visible = snapshot.visible_segment_ids()
    if not visible:
        return ["the table has no visible segments"]
    candidates = compaction_candidates(snapshot)
    reasons = []
    held = len(visible) - len(candidates)
    if held:
        reasons.append(f"{held} segment(s) belong to a consistent push in progress or staged, which compaction leaves alone")
    small_limit = options.target_file_size * 3 // 4
    inputs = [BinInput(snapshot.segments[sid].file, snapshot.dvs.get(sid)) for sid in candidates]
    small: dict[tuple[str | None, int | None, tuple[PartitionValue, ...] | None], int] = {}
    for sid, inp in zip(candidates, inputs):
        if inp.segment.size_bytes < small_limit:
            key = (candidates[sid], inp.segment.spec_id, inp.segment.partition)
            small[key] = small.get(key, 0) + 1
    need = max(2, options.min_input_files)
    if small:
        most = max(small.values())
        groups = " of one origin (plain appends, or one push) and one partition" if len(small) > 1 else ""
        reasons.append(
            f"{sum(small.values())} small segment(s) (under 3/4 of compactTargetFileSize, {_size(small_limit)}), "
            f"at most {most} together{groups}: a bin needs {need} (compactMinInputFiles={options.min_input_files}; "
            "--min-input-files N)"
        )
    large = len(inputs) - sum(small.values())
    if large:
        reasons.append(f"{large} segment(s) are at least 3/4 of compactTargetFileSize ({_size(options.target_file_size)})")
    fractions = [i.deleted / i.segment.num_rows for i in inputs if i.segment.num_rows]
    most_deleted = max(fractions, default=0.0)
    reasons.append(
        f"no segment has compactDeleteRatio={options.delete_ratio:g} or more of its rows deleted "
        f"(the most: {most_deleted:.1%}; --delete-ratio F)"
    )
    return reasons


def _size(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.4g} {unit}"
    return f"{n} B"


def _worn(inp: BinInput, options: CompactionOptions) -> bool:
    return inp.segment.num_rows > 0 and inp.deleted > 0 and inp.deleted / inp.segment.num_rows >= options.delete_ratio


def _next_fit(inputs: Sequence[BinInput], target: int) -> Iterator[list[BinInput]]:
    group: list[BinInput] = []
    size = 0
    for inp in inputs:
        if group and size + inp.live_bytes > target:
            yield group
            group, size = [], 0
        group.append(inp)
        size += inp.live_bytes
    if group:
        yield group


def commit_batches(bins: Sequence[Bin], max_bytes: int) -> list[list[Bin]]:
    """Bins cut into commits of at most ``max_bytes`` of input each (a larger bin alone)."""
    out: list[list[Bin]] = []
    current: list[Bin] = []
    size = 0
    for b in bins:
        if current and size + b.input_bytes > max_bytes:
            out.append(current)
            current, size = [], 0
        current.append(b)
        size += b.input_bytes
    if current:
        out.append(current)
    return out
