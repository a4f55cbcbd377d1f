"""The command line's arguments: one subparser per command, typed argument checks."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn, TypeVar

from mvtable import checks
from mvtable.errors import InvalidOptionError

from ..partitions.timeline_html import DEFAULT_MAX_PARTITIONS
from .output import PROG

# options whose values may start with '-' (``--retention -1d``): argparse would take such a
# value for an option and say "expected one argument" instead of letting the period parser
# say what is wrong with it
_DASH_VALUE_OPTIONS = ("--retention",)
T = TypeVar("T")
N = TypeVar("N", int, float)


class UsageExit(SystemExit):
    """argparse's exit 2 on a usage error, carrying its message so that ``main`` can also report it as JSON.

    Not an mvtable error: still the ``SystemExit`` argparse raises, so code that calls the
    parser directly sees argparse's behaviour."""

    def __init__(self, prog: str, message: str) -> None:
        super().__init__(2)
        self.prog = prog
        self.message = message


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise UsageExit(self.prog, message)


def join_dash_values(argv: Sequence[str]) -> list[str]:
    """``--retention -1d`` as ``--retention=-1d``.

    Then the period parser (not argparse) says what is wrong with the value."""
    out: list[str] = []
    it = iter(argv)
    for arg in it:
        if arg in _DASH_VALUE_OPTIONS:
            value = next(it, None)
            if value is not None and value.startswith("-") and value != "--":
                out.append(f"{arg}={value}")
                continue
            out.append(arg)
            if value is not None:
                out.append(value)
            continue
        out.append(arg)
    return out


# -- arguments --------------------------------------------------------------------------
def _storage_option(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def _checked(check: Callable[[], T]) -> T:
    """argparse type check through the API's own validation, so that both say the same."""
    try:
        return check()
    except InvalidOptionError as exc:
        raise argparse.ArgumentTypeError(exc.message) from None


def _number(text: str, kind: Callable[[str], N], what: str) -> N:
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, not {text!r}") from None


def _version(text: str) -> int:
    value = _number(text, int, "a version (a non-negative integer)")
    return _checked(lambda: checks.version(value))


def _positive_int(text: str) -> int:
    value = _number(text, int, "a positive integer")
    return _checked(lambda: checks.count(value, name="N"))


def _seconds(text: str) -> float:
    value = _number(text, float, "a number of seconds")
    return _checked(lambda: checks.seconds(value, name="seconds"))


def build_parser() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    common.add_argument("table", metavar="URI", help="table path or fsspec URL (s3://bucket/prefix, …)")
    common.add_argument("--json", action="store_true", help="print a JSON array of objects (for scripts)")
    common.add_argument(
        "--storage-option",
        "-o",
        dest="storage_options",
        metavar="KEY=VALUE",
        action="append",
        type=_storage_option,
        default=[],
        help="storage option passed to fsspec, e.g. endpoint_url=http://127.0.0.1:9000 (repeatable)",
    )
    progress = _Parser(add_help=False)
    progress.add_argument(
        "--progress",
        choices=("auto", "always", "never"),
        default="auto",
        help="progress bars on stderr: auto = only on a terminal and without --json (default)",
    )

    parser = _Parser(
        prog=PROG,
        description="Inspect and maintain mvtable tables.",
        epilog=(
            "exit codes: 0 ok (also when nothing needed changing), 1 mvtable error (message on stderr), "
            "2 usage error, 3 conflict with a concurrent writer or unconfirmed commit (safe to retry), 130 interrupted. "
            "With --json a failure is also one JSON object on stdout: error, type, hint, exit_code"
        ),
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    sub.add_parser("lineage", parents=[common], help="lineage entries (consistent pushes) and their states")

    p = sub.add_parser("history", parents=[common], help="commits, oldest first")
    p.add_argument("--limit", type=_positive_int, metavar="N", help="only the newest N commits")

    p = sub.add_parser("rollback", parents=[common], help="revert one consistent push, or restore a version")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--entry", metavar="ID", help="lineage entry to revert (see `mvtable lineage`)")
    which.add_argument("--version", type=_version, metavar="N", help="restore the table as of version N")
    which.add_argument(
        "--transaction",
        metavar="ID",
        help="roll back a multi-table transaction in every table it wrote (URI is one of them; see `mvtable lineage`)",
    )

    p = sub.add_parser("restore", parents=[common], help="restore the table as of a version (one new commit)")
    p.add_argument("--version", type=_version, metavar="N", required=True, help="version to restore (see `mvtable history`)")

    p = sub.add_parser("publish", parents=[common], help="complete a staged consistent push")
    p.add_argument("--entry", metavar="ID", required=True, help="the IN_PROGRESS lineage entry to publish")

    p = sub.add_parser("vacuum", parents=[common, progress], help="delete files no retained version needs")
    p.add_argument("--dry-run", action="store_true", help="list what would be deleted, delete nothing")
    p.add_argument(
        "--retention",
        metavar="PERIOD",
        help="keep files versions of the last PERIOD need (e.g. 7d, 12h; also --retention=PERIOD); default: the table's",
    )
    p.add_argument(
        "--force", action="store_true", help="allow a retention shorter than the table's, or a very short orphanGracePeriod"
    )
    p.add_argument("--time-budget", type=_seconds, metavar="SECONDS", help="stop after this long (run again to resume)")

    p = sub.add_parser("gc", parents=[common, progress], help="visibility GC: old deletion-vector files, log files, expired pins")
    p.add_argument("--dry-run", action="store_true", help="report what would be deleted, delete nothing")
    p.add_argument("--force", action="store_true", help="run on a table whose orphanGracePeriod is below the safe minimum")
    p.add_argument("--time-budget", type=_seconds, metavar="SECONDS", help="stop after this long (run again to resume)")

    p = sub.add_parser("compact", parents=[common, progress], help="merge small segments, rewrite segments worn by deletes")
    p.add_argument("--dry-run", action="store_true", help="report the bins, rewrite nothing")
    p.add_argument("--target-size", metavar="SIZE", help="output segment size, e.g. 128MiB (default: the table's)")
    p.add_argument("--min-input-files", type=_positive_int, metavar="N", help="merge at least N small segments per bin")
    p.add_argument("--delete-ratio", type=float, metavar="F", help="rewrite segments with at least this fraction deleted")
    p.add_argument("--max-bytes-per-commit", metavar="SIZE", help="commit after this many input bytes, e.g. 512MiB")

    p = sub.add_parser("inspect", parents=[common], help="segments, row groups, delete density, lineage timeline")
    p.add_argument("--version", type=_version, metavar="N", help="inspect version N instead of the newest")
    p.add_argument("--row-groups", action="store_true", help="also list every row group")

    p = sub.add_parser("partitions", parents=[common], help="one row per partition: segments, rows, deleted rows, bytes")
    p.add_argument("--version", type=_version, metavar="N", help="the partitions of version N instead of the newest")

    p = sub.add_parser("timeline", parents=[common], help="per partition: visible, overshadowed and staged segments by version")
    p.add_argument("--version", type=_version, metavar="N", help="the timeline of version N instead of the newest")
    p.add_argument("--html", metavar="FILE", help="also write the timeline as one self-contained HTML page (inline SVG)")
    p.add_argument(
        "--max-partitions",
        type=_positive_int,
        metavar="N",
        default=DEFAULT_MAX_PARTITIONS,
        help=f"draw at most the newest N partitions in --html (default {DEFAULT_MAX_PARTITIONS})",
    )

    p = sub.add_parser("schema", parents=[common], help="the schema with field ids; --history: each schema change")
    p.add_argument("--history", action="store_true", help="every schema change and the version it landed in")
    p.add_argument("--version", type=_version, metavar="N", help="the schema of version N instead of the newest")

    p = sub.add_parser("pins", parents=[common], help="reader pins that keep versions from GC and vacuum")
    p.add_argument(
        "--release",
        metavar="OWNER",
        help="release the live pins of this owner (or the pin with this id): for a reader that is gone",
    )

    p = sub.add_parser("spark-jar", help="build (once per machine) mvtable's JVM Parquet deletion mask and print its path")
    p.add_argument("--json", action="store_true", help="print a JSON array of objects (for scripts)")

    p = sub.add_parser("export", help="write Iceberg or Delta metadata naming the table's own files (no data copied)")
    formats = p.add_subparsers(dest="format", metavar="FORMAT", required=True)
    for name, what in (("iceberg", "Iceberg v3 metadata under metadata/"), ("delta", "a Delta log under _delta_log/")):
        q = formats.add_parser(name, parents=[common], help=what)
        q.add_argument("--all-versions", action="store_true", help="every version the log can still rebuild, not just the newest")
    return parser
