"""The ``mvtable`` command line: look at a table and run its lifecycle operations.

::

    mvtable lineage  URI                       lineage entries (consistent pushes)
    mvtable history  URI [--limit N]           commits, oldest first
    mvtable rollback URI (--entry ID | --version N)
    mvtable restore  URI --version N
    mvtable publish  URI --entry ID
    mvtable vacuum   URI [--dry-run] [--retention 7d] [--force] [--time-budget S]
    mvtable gc       URI [--dry-run] [--time-budget S]
    mvtable compact  URI [--dry-run] [--target-size 128MiB] [--min-input-files N] [--delete-ratio F]
    mvtable inspect  URI [--version N] [--row-groups]
    mvtable export   (iceberg | delta) URI [--all-versions]

Every subcommand takes ``--json`` (a JSON array of objects whose field names are those of
the Python API; timestamps in ISO-8601) and ``--storage-option KEY=VALUE`` (repeatable;
fsspec / s3fs options such as ``key``, ``secret``, ``endpoint_url``).

Exit codes (:data:`EXIT_OK` …):

* 0 — done, including an idempotent no-op ("nothing changed");
* 1 — an mvtable error (no table, unknown version or entry, a forbidden lineage
  transition, files missing, damaged metadata, a storage failure): the problem and what to
  do are on stderr, and nothing was committed;
* 2 — usage error (bad or missing arguments);
* 3 — retryable: another writer committed something incompatible at the same time
  (``CommitConflictError``), or the store did not confirm the commit
  (``CommitStateUnknownError``). Nothing conflicting landed; every command is idempotent,
  so running it again is safe and reports whether the change is there.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # rich is imported lazily: a CLI call pays only for what it prints
    from rich.console import JustifyMethod

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_CONFLICT = 3

PROG = "mvtable"


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


# -- output helpers ---------------------------------------------------------------------
def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dt.datetime):
        return obj.isoformat()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json")
    return str(obj)


def _print_json(items: Sequence[Any]) -> None:
    records = [dataclasses.asdict(i) if dataclasses.is_dataclass(i) and not isinstance(i, type) else i for i in items]
    sys.stdout.write(json.dumps(records, indent=2, default=_jsonable, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def _stdout_console():
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # rich exits 1 here; a reader that stopped reading (`| head`) is no error:
            # let main() handle it like any other closed pipe.
            self.quiet = True
            raise BrokenPipeError

    if sys.stdout.isatty():
        return _Console(highlight=False)
    # Piped: no colours, and wide enough that ids are never folded across lines.
    width = int(os.environ.get("COLUMNS", "0") or 0) or 200
    return _Console(highlight=False, width=max(width, 120), no_color=True, soft_wrap=False)


def _stderr_console():
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)


def _ts(value: dt.datetime | None) -> str:
    if value is None:
        return "-"
    return value.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _size(n: int | float) -> str:
    from .describe import size_text

    return size_text(n)


def _pct(fraction: float) -> str:
    return f"{fraction * 100:.1f}%"


def _compact(d: dict[str, Any], drop: Sequence[str] = ()) -> str:
    return ", ".join(f"{k}={v}" for k, v in d.items() if k not in drop)


def _text(value: Any):
    from rich.text import Text

    return Text("" if value is None else str(value))


# -- progress ---------------------------------------------------------------------------
_PHASES = {
    "retention": "lineage retention",
    "data": "data files",
    "dv": "deletion-vector files",
    "log": "log files",
    "pins": "expired pins",
}


@contextlib.contextmanager
def _progress(args: argparse.Namespace) -> Iterator[Callable[[int, int, str], None] | None]:
    mode = getattr(args, "progress", "auto")
    enabled = mode == "always" or (mode == "auto" and not args.json and sys.stderr.isatty())
    if not enabled:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=_stderr_console(),
        transient=False,
    ) as bar:
        tasks: dict[str, Any] = {}

        def update(done: int, total: int, what: str) -> None:
            if what not in tasks:
                tasks[what] = bar.add_task(f"{args.command}: {_PHASES.get(what, what)}", total=max(int(total), 0))
            bar.update(tasks[what], completed=int(done), total=max(int(total), int(done)))

        yield update


# -- commands ---------------------------------------------------------------------------
def _open(args: argparse.Namespace):
    from .table import Table

    return Table.open(args.table, storage_options=dict(args.storage_options))


def cmd_lineage(args: argparse.Namespace) -> int:
    entries = _open(args).lineage()
    if args.json:
        _print_json(entries)
        return EXIT_OK
    from rich.table import Table as Grid

    out = _stdout_console()
    if not entries:
        out.print(f"no lineage entries in {args.table} (only consistent pushes create them)")
        return EXIT_OK
    grid = Grid(title=f"lineage of {args.table}", title_justify="left")
    for name in ("id", "state", "segments_from", "segments_to", "started", "changed", "timestamp", "owner / lease"):
        grid.add_column(name, no_wrap=name in ("id", "state", "segments_from", "segments_to"))
    for e in entries:
        grid.add_row(
            _text(e.id),
            _text(e.state),
            _text("\n".join(e.segments_from) or "-"),
            _text("\n".join(e.segments_to) or "-"),
            _text(f"v{e.started_version}"),
            _text(f"v{e.state_version}"),
            _text(_ts(e.timestamp)),
            _text(_owner_cell(e)),
        )
    out.print(grid)
    return EXIT_OK


def _owner_cell(e: Any) -> str:
    """Who owns an entry, until when its lease runs and what the next push would do with
    it (IN_PROGRESS), or why mvtable reverted it by itself."""
    lines = [e.owner or "-"]
    if e.lease_expires is not None:
        lines.append(f"lease until {_ts(e.lease_expires)}")
    if e.status:
        lines.append(e.status)
    if e.revert_reason:
        lines.append(e.revert_reason)
    return "\n".join(lines)


def cmd_history(args: argparse.Namespace) -> int:
    entries = _open(args).history()
    if args.limit:
        entries = entries[-args.limit :]
    if args.json:
        _print_json(entries)
        return EXIT_OK
    from rich.table import Table as Grid

    grid = Grid(title=f"history of {args.table}", title_justify="left")
    for name in ("version", "timestamp", "operation", "parameters", "metrics"):
        grid.add_column(
            name, justify="right" if name == "version" else "left", no_wrap=name != "parameters" and name != "metrics"
        )
    for h in entries:
        grid.add_row(
            _text(h.version),
            _text(_ts(h.timestamp)),
            _text(h.operation),
            _text(_compact(h.parameters, drop=("txn",))),
            _text(_compact(h.metrics)),
        )
    _stdout_console().print(grid)
    return EXIT_OK


def _report_action(args: argparse.Namespace, result) -> int:
    if args.json:
        _print_json([result])
        return EXIT_OK
    out = _stdout_console()
    if result.changed:
        out.print(_text(f"{result.operation}: {result.message} (committed version {result.version})"))
    else:
        out.print(_text(f"nothing changed: {result.message} (version {result.version})"))
    return EXIT_OK


def cmd_rollback(args: argparse.Namespace) -> int:
    t = _open(args)
    result = t.rollback(entry=args.entry) if args.entry is not None else t.rollback(version=args.version)
    return _report_action(args, result)


def cmd_restore(args: argparse.Namespace) -> int:
    return _report_action(args, _open(args).restore(version=args.version))


def cmd_publish(args: argparse.Namespace) -> int:
    return _report_action(args, _open(args).publish(args.entry))


def _list_paths(out, title: str, paths: Sequence[str], limit: int = 50) -> None:
    if not paths:
        return
    out.print(_text(title))
    for p in paths[:limit]:
        out.print(_text(f"  {p}"))
    if len(paths) > limit:
        out.print(_text(f"  … and {len(paths) - limit} more (--json lists all)"))


def cmd_vacuum(args: argparse.Namespace) -> int:
    from .describe import vacuum_summary

    t = _open(args)
    with _progress(args) as progress:
        report = t.vacuum(
            retention=args.retention, dry_run=args.dry_run, force=args.force, time_budget_s=args.time_budget, progress=progress
        )
    if args.json:
        _print_json([report])
        return EXIT_OK
    out = _stdout_console()
    out.print(_text(vacuum_summary(report)))
    out.print(_text(f"safe version {report.safe_version}, retention {report.retention_s:g}s, {report.batches} batch(es)"))
    if report.dry_run:
        _list_paths(out, "would delete:", list(report.files))
    return EXIT_OK


def cmd_compact(args: argparse.Namespace) -> int:
    t = _open(args)
    with _progress(args) as progress:
        report = t.compact(
            target_file_size=args.target_size,
            min_input_files=args.min_input_files,
            delete_ratio=args.delete_ratio,
            max_bytes_per_commit=args.max_bytes_per_commit,
            dry_run=args.dry_run,
            progress=progress,
        )
    if args.json:
        _print_json([report.as_dict()])
        return EXIT_OK
    out = _stdout_console()
    out.print(_text(report.summary()))
    for dropped in report.dropped:
        out.print(_text(f"  dropped: {dropped.reason}"))
    return EXIT_OK


def cmd_gc(args: argparse.Namespace) -> int:
    from .describe import gc_summary

    t = _open(args)
    with _progress(args) as progress:
        report = t.collect_garbage(dry_run=args.dry_run, time_budget_s=args.time_budget, progress=progress)
    if args.json:
        _print_json([report])
        return EXIT_OK
    out = _stdout_console()
    out.print(_text(gc_summary(report)))
    details = f"safe version {report.safe_version}, {report.batches} batch(es)"
    if report.dv_files_in_grace:
        details += f", {report.dv_files_in_grace} unreferenced deletion-vector file(s) kept in their grace period"
    out.print(_text(details))
    if report.dry_run:
        _list_paths(out, "would delete:", list(report.deleted))
    return EXIT_OK


def cmd_inspect(args: argparse.Namespace) -> int:
    from .describe import inspect_table

    info = inspect_table(_open(args), version=args.version)
    if args.json:
        _print_json([info])
        return EXIT_OK
    _render_inspect(info, row_groups=args.row_groups)
    return EXIT_OK


def _segment_grid(title: str, segments: list[dict[str, Any]], totals: dict[str, Any] | None):
    from rich.table import Table as Grid

    grid = Grid(title=title, title_justify="left", show_footer=totals is not None)
    foot = totals or {}
    columns: list[tuple[str, JustifyMethod, str]] = [  # (local annotations are never evaluated)
        ("segment", "left", f"total ({foot.get('segments', 0)})"),
        ("status", "left", ""),
        ("rows", "right", str(foot.get("num_rows", ""))),
        ("row groups", "right", str(foot.get("row_groups", ""))),
        ("size", "right", _size(foot.get("size_bytes", 0))),
        ("deleted", "right", str(foot.get("deleted_rows", ""))),
        ("delete density", "right", _pct(foot.get("delete_density", 0.0))),
        ("live rows", "right", str(foot.get("live_rows", ""))),
        ("added", "right", ""),
        ("lineage entry", "left", ""),
    ]
    for name, justify, footer in columns:
        grid.add_column(name, justify=justify, footer=footer, no_wrap=True)
    for s in segments:
        grid.add_row(
            _text(s["id"]),
            _text(s["status"]),
            _text(s["num_rows"]),
            _text(len(s["row_groups"])),
            _text(_size(s["size_bytes"])),
            _text(s["deleted_rows"]),
            _text(_pct(s["delete_density"])),
            _text(s["live_rows"]),
            _text(f"v{s['added_version']}"),
            _text(s["lineage_entry"] or "-"),
        )
    return grid


def _render_inspect(info: dict[str, Any], *, row_groups: bool) -> None:
    from rich.table import Table as Grid
    from rich.tree import Tree

    out = _stdout_console()
    out.print(_text(f"table {info['uri']}  version {info['version']}  ({_ts(info['timestamp'])})  id {info['table_id']}"))
    if info["schema"]:
        out.print(_text("columns: " + ", ".join(f"{c['name']} {c['type']}" for c in info["schema"])))
    if info["primary_key"]:
        out.print(_text("primary key: " + ", ".join(info["primary_key"])))
    if info["properties"]:
        out.print(_text("properties: " + _compact(info["properties"])))
    out.print()
    visible = [s for s in info["segments"] if s["status"] == "visible"]
    retained = [s for s in info["segments"] if s["status"] != "visible"]
    out.print(_segment_grid(f"segments visible at version {info['version']}", visible, info["totals"]))
    if retained:
        out.print()
        out.print(_segment_grid("retained segments (not visible: staged, replaced or reverted)", retained, info["retained"]))
    if row_groups:
        out.print()
        grid = Grid(title="row groups", title_justify="left")
        widths: tuple[tuple[str, JustifyMethod], ...] = (
            ("segment", "left"),
            ("#", "right"),
            ("first row", "right"),
            ("rows", "right"),
            ("size", "right"),
        )
        for name, justify in widths:
            grid.add_column(name, justify=justify, no_wrap=True)
        for s in info["segments"]:
            for i, rg in enumerate(s["row_groups"]):
                grid.add_row(
                    _text(s["id"]), _text(i), _text(rg["first_row"]), _text(rg["num_rows"]), _text(_size(rg["total_byte_size"]))
                )
        out.print(grid)
    out.print()
    if not info["lineage"]:
        out.print(_text("lineage: no entries"))
        return
    tree = Tree(_text("lineage timeline (by start version)"))
    for e in info["lineage"]:
        node = tree.add(_text(f"{e['id']}  {e['state']}  ({len(e['segments_from'])} segment(s) → {len(e['segments_to'])})"))
        for step in e["transitions"]:
            op = f"  {step['operation']}" if step.get("operation") else ""
            node.add(_text(f"v{step['version']:<6} {step['state']:<12} {_ts(step['timestamp'])}{op}"))
    out.print(tree)


def cmd_export(args: argparse.Namespace) -> int:
    t = _open(args)
    result = (
        t.export_iceberg(all_versions=args.all_versions)
        if args.format == "iceberg"
        else t.export_delta(all_versions=args.all_versions)
    )
    if args.json:
        _print_json([result.to_json()])
        return EXIT_OK
    out = _stdout_console()
    if not result.versions:
        out.print(_text(f"nothing to export: {args.format} metadata already covers version {t.version}"))
    else:
        versions = ", ".join(map(str, result.versions))
        out.print(
            _text(
                f"exported version(s) {versions} as {args.format}: {result.files_written} metadata files, {_size(result.bytes_written)}"
            )
        )
        out.print(_text(f"read it at {result.metadata}"))
    if result.copied_dv_bytes:
        out.print(_text(f"deletion-vector bytes written again (inline or older DV files): {_size(result.copied_dv_bytes)}"))
    if result.skipped:
        out.print(_text(f"skipped version(s) whose files vacuum removed: {', '.join(map(str, result.skipped))}"))
    return EXIT_OK


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "lineage": cmd_lineage,
    "history": cmd_history,
    "rollback": cmd_rollback,
    "restore": cmd_restore,
    "publish": cmd_publish,
    "vacuum": cmd_vacuum,
    "gc": cmd_gc,
    "compact": cmd_compact,
    "inspect": cmd_inspect,
    "export": cmd_export,
}


# -- errors -----------------------------------------------------------------------------
def _hint(exc: BaseException, args: argparse.Namespace) -> str:
    from mvtable import errors as ce
    from mvtable import errors as le

    uri = getattr(args, "table", "URI")
    if isinstance(exc, le.CommitConflictError):
        return "another writer changed the table at the same time and nothing was committed; run the command again (it is idempotent)"
    if isinstance(exc, le.CommitStateUnknownError):
        return "the store did not confirm the commit; run the command again: it is idempotent and reports whether the change is already there"
    if isinstance(exc, le.TableNotFoundError):
        return "check the path or URL" + (
            "" if args.storage_options else ", and pass --storage-option KEY=VALUE for remote stores"
        )
    if isinstance(exc, le.VersionNotFoundError):
        return f"list the versions the log still holds with: {PROG} history {uri}"
    if isinstance(exc, ce.FilesMissingError):
        return f"pick a version inside the retention window (see {PROG} history {uri})"
    if isinstance(exc, le.InvalidLineageTransitionError):
        return f"see the lineage entries and their states with: {PROG} lineage {uri}"
    if isinstance(exc, ce.RetentionTooShortError):
        return "use a longer --retention, or add --force if no reader or writer needs the older files"
    if isinstance(exc, ce.UnsupportedExportTypeError):
        return "the export wrote nothing; export a table whose columns the target can hold"
    if isinstance(exc, ce.ExportError):
        return "the export wrote nothing into data/ or _mvtable/; the mvtable table is unchanged"
    if isinstance(exc, le.CorruptMetadataError):
        return "a metadata file is damaged; do not write to this table until it is repaired"
    if isinstance(exc, (ce.InvalidOptionError, ValueError)):
        return f"see: {PROG} {args.command} --help"
    return ""


def _fail(exc: BaseException, args: argparse.Namespace, code: int) -> int:
    err = _stderr_console()
    name = type(exc).__name__
    err.print(_text(f"{PROG} {args.command}: {name}: {exc}"), style="bold red" if err.is_terminal else None)
    hint = _hint(exc, args)
    if hint:
        err.print(_text(f"hint: {hint}"))
    return code


def _error_types() -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
    """(retryable, other expected errors)."""
    from mvtable.errors import CommitConflictError, CommitStateUnknownError, ExportConflictError, MvTableError

    return (CommitConflictError, CommitStateUnknownError, ExportConflictError), (MvTableError,)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    retryable, expected = _error_types()
    try:
        return COMMANDS[args.command](args)
    except retryable as exc:
        return _fail(exc, args, EXIT_CONFLICT)
    except expected as exc:
        return _fail(exc, args, EXIT_ERROR)
    except BrokenPipeError:  # e.g. `mvtable history t | head`: not an error (before OSError, its base)
        with contextlib.suppress(OSError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())  # so that the exit-time flush stays quiet
        return EXIT_OK
    except OSError as exc:  # storage trouble: permissions, network, credentials
        return _fail(exc, args, EXIT_ERROR)
    except KeyboardInterrupt:
        _stderr_console().print(
            _text(f"{PROG} {args.command}: interrupted; run it again to resume (every command is idempotent)")
        )
        return 130


if __name__ == "__main__":
    sys.exit(main())
