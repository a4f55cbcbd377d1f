"""The command line's arguments: one subparser per command, typed argument checks."""

from __future__ import annotations

import argparse

from .output import PROG


# -- arguments --------------------------------------------------------------------------
def _storage_option(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def _number(text: str, *, kind: type, minimum: float, what: str):
    """argparse type check: a number of ``kind`` no smaller than ``minimum``."""
    try:
        value = kind(text)
    except ValueError:
        value = None
    if value is None or value < minimum:
        raise argparse.ArgumentTypeError(f"expected {what}, not {text!r}")
    return value


def _version(text: str) -> int:
    return _number(text, kind=int, minimum=0, what="a version (a non-negative integer)")


def _positive_int(text: str) -> int:
    return _number(text, kind=int, minimum=1, what="a positive integer")


def _seconds(text: str) -> float:
    return _number(text, kind=float, minimum=0, what="a number of seconds")


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
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
    progress = argparse.ArgumentParser(add_help=False)
    progress.add_argument(
        "--progress",
        choices=("auto", "always", "never"),
        default="auto",
        help="progress bars on stderr: auto = only on a terminal and without --json (default)",
    )

    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Inspect and maintain mvtable tables.",
        epilog=(
            "exit codes: 0 ok (also when nothing needed changing), 1 mvtable error (message on stderr), "
            "2 usage error, 3 conflict with a concurrent writer or unconfirmed commit (safe to retry)"
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

    p = sub.add_parser("restore", parents=[common], help="restore the table as of a version (one new commit)")
    p.add_argument("--version", type=_version, metavar="N", required=True, help="version to restore (see `mvtable history`)")

    p = sub.add_parser("publish", parents=[common], help="complete a staged consistent push")
    p.add_argument("--entry", metavar="ID", required=True, help="the IN_PROGRESS lineage entry to publish")

    p = sub.add_parser("vacuum", parents=[common, progress], help="delete files no retained version needs")
    p.add_argument("--dry-run", action="store_true", help="list what would be deleted, delete nothing")
    p.add_argument(
        "--retention", metavar="PERIOD", help="keep files versions of the last PERIOD need (e.g. 7d, 12h); default: the table's"
    )
    p.add_argument("--force", action="store_true", help="allow a retention shorter than the table's")
    p.add_argument("--time-budget", type=_seconds, metavar="SECONDS", help="stop after this long (run again to resume)")

    p = sub.add_parser("gc", parents=[common, progress], help="visibility GC: old deletion-vector files, log files, expired pins")
    p.add_argument("--dry-run", action="store_true", help="report what would be deleted, delete nothing")
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

    p = sub.add_parser("export", help="write Iceberg or Delta metadata naming the table's own files (no data copied)")
    formats = p.add_subparsers(dest="format", metavar="FORMAT", required=True)
    for name, what in (("iceberg", "Iceberg v3 metadata under metadata/"), ("delta", "a Delta log under _delta_log/")):
        q = formats.add_parser(name, parents=[common], help=what)
        q.add_argument("--all-versions", action="store_true", help="every version the log can still rebuild, not just the newest")
    return parser
