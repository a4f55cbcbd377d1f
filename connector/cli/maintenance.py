"""The maintenance commands: vacuum, gc, compact (with progress bars on a terminal)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from ..holds import Hold, describe, format_duration
from .output import EXIT_OK, as_text, open_table, print_json, progress_bars, stdout_console


def _list_paths(out, title: str, paths: Sequence[str], limit: int = 50) -> None:
    if not paths:
        return
    out.print(as_text(title))
    for p in paths[:limit]:
        out.print(as_text(f"  {p}"))
    if len(paths) > limit:
        out.print(as_text(f"  … and {len(paths) - limit} more (--json lists all)"))


def cmd_vacuum(args: argparse.Namespace) -> int:
    from ..describe import vacuum_summary

    t = open_table(args)
    with progress_bars(args) as progress:
        report = t.vacuum(
            retention=args.retention, dry_run=args.dry_run, force=args.force, time_budget_s=args.time_budget, progress=progress
        )
    if args.json:
        print_json([report])
        return EXIT_OK
    out = stdout_console()
    out.print(as_text(vacuum_summary(report)))
    out.print(
        as_text(
            f"safe version {report.safe_version}, retention {format_duration(report.retention_s)}, {report.batches} batch(es)"
        )
    )
    _print_holds(out, report.held_back)
    if report.dry_run:
        _list_paths(out, "would delete:", list(report.files))
    return EXIT_OK


def _print_holds(out, holds: Sequence[Hold]) -> None:
    """What kept files: every run says it, so that "nothing to do" is never a riddle."""
    lines = describe(holds)
    if lines:
        out.print(as_text("kept because:"))
        for line in lines:
            out.print(as_text(f"  {line}"))
    if any(h.kind == "pin" for h in holds):
        out.print(as_text("  (a reader that is gone: mvtable pins URI --release OWNER)"))


def cmd_compact(args: argparse.Namespace) -> int:
    t = open_table(args)
    with progress_bars(args) as progress:
        report = t.compact(
            target_file_size=args.target_size,
            min_input_files=args.min_input_files,
            delete_ratio=args.delete_ratio,
            max_bytes_per_commit=args.max_bytes_per_commit,
            dry_run=args.dry_run,
            progress=progress,
        )
    if args.json:
        print_json([report.as_dict()])
        return EXIT_OK
    out = stdout_console()
    out.print(as_text(report.summary()))
    for dropped in report.dropped:
        out.print(as_text(f"  dropped: {dropped.reason}"))
    return EXIT_OK


def cmd_gc(args: argparse.Namespace) -> int:
    from ..describe import gc_summary

    t = open_table(args)
    with progress_bars(args) as progress:
        report = t.collect_garbage(dry_run=args.dry_run, time_budget_s=args.time_budget, progress=progress, force=args.force)
    if args.json:
        print_json([report])
        return EXIT_OK
    out = stdout_console()
    out.print(as_text(gc_summary(report)))
    details = f"safe version {report.safe_version}, {report.batches} batch(es)"
    if report.dv_files_in_grace:
        details += f", {report.dv_files_in_grace} unreferenced deletion-vector file(s) kept in their grace period"
    out.print(as_text(details))
    _print_holds(out, report.held_back)
    if report.dry_run:
        _list_paths(out, "would delete:", list(report.deleted))
    return EXIT_OK
