"""The work that follows a commit: one pipeline, its steps chosen per table.

A table asks for work after its commits through its properties: ``icebergCompat`` (add the
version to the Iceberg metadata) and ``autoCompact`` (compact what a write made worse).
Both must happen whichever writer landed the commit (``Table``, the Spark data source's
commit, a streaming micro-batch, a distributed delete or compaction), and none may be
switched on merely because some module happened to be imported. So the steps are a fixed
list here, each chosen at run time from the committed version's properties and operation,
and they run in one place.

That place is the commit log: ``open_log`` is the connector's one way to open a table's
``CommitLog``, and it hands the log ``run`` as its ``after_commit``, which the log calls
after every commit it lands. A commit path cannot skip the pipeline without opening a log
of its own (``tests/connector/test_post_commit.py`` checks that no connector module does).

Which commits trigger which step:

* ``icebergCompat`` export: every commit, whatever its operation (the Iceberg metadata
  mirrors each version);
* ``autoCompact``: only a commit that wrote data (``DATA_WRITES``), bounded to the segments
  it added or deleted from; never a ``COMPACT`` commit, so a compaction never triggers
  another.

Steps run in that order, so the metadata has the write's version before the compaction's.
The commit is durable before any step starts: a step that fails is logged, the next step
still runs, and the commit stands.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from mvtable.conf import TableProperties
from mvtable.lineage.enums import Operation
from mvtable.lineage.log import CommitLog, CommitResult
from mvtable.storage import FileIO

from .compaction.auto import compact_touched, touched_segments
from .export.iceberg import export_iceberg

__all__ = ["DATA_WRITES", "STEPS", "Step", "open_log", "run", "steps_for"]

logger = logging.getLogger("mvtable.post_commit")

# Commits that wrote rows (added segments or deleted rows of them): what auto-compaction
# follows. A staged push's segments are not visible yet, and lifecycle, retention and
# compaction commits move no user data.
DATA_WRITES = frozenset(
    {
        Operation.CREATE,
        Operation.APPEND,
        Operation.OVERWRITE,
        Operation.CONSISTENT_PUSH,
        Operation.UPSERT,
        Operation.DELETE,
        Operation.DELETE_BY_KEY,
        Operation.STREAM_APPEND,
        Operation.STREAM_COMPLETE,
    }
)


@dataclass(frozen=True)
class Step:
    """One kind of work after a commit: when it applies, and what it does."""

    name: str
    applies: Callable[[TableProperties, CommitResult], bool]
    run: Callable[[CommitLog, CommitResult], object]


def _export_iceberg(commit_log: CommitLog, result: CommitResult) -> None:
    export_iceberg(commit_log.io, [result.snapshot])


def _auto_compact(commit_log: CommitLog, result: CommitResult) -> None:
    compact_touched(commit_log, result.snapshot, touched_segments(result.commit))


STEPS: tuple[Step, ...] = (
    Step("icebergCompat export", lambda props, result: props.iceberg_compat, _export_iceberg),
    Step(
        "autoCompact",
        lambda props, result: props.auto_compact and result.commit.operation in DATA_WRITES,
        _auto_compact,
    ),
)


def steps_for(result: CommitResult) -> list[Step]:
    """The steps the committed version asks for, in the order they run.

    Read leniently: the commit has landed, so a property this version does not know or
    cannot parse falls back to its default here (the table's writers report it)."""
    props, _ = TableProperties.tolerant(result.snapshot.properties)
    return [step for step in STEPS if step.applies(props, result)]


def run(commit_log: CommitLog, result: CommitResult) -> None:
    """Run the steps ``result``'s version asks for.

    A step that raises is logged and the next one runs: the commit stands whatever a step does."""
    for step in steps_for(result):
        try:
            step.run(commit_log, result)
        except Exception:
            logger.warning(
                "post-commit step %s failed after version %s of %s; the commit stands",
                step.name,
                result.commit.version,
                commit_log.io.uri,
                exc_info=True,
            )


def open_log(io: FileIO) -> CommitLog:
    """The commit log of the table at ``io``, running the post-commit pipeline after every commit it lands.

    The connector opens its logs only here."""
    return CommitLog(io, after_commit=run)
