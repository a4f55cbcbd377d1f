"""The lineage and lifecycle commands (lineage, history, rollback, restore, publish), and ``spark-jar``."""

from __future__ import annotations

import argparse
from typing import Any

from .output import EXIT_OK, as_text, fmt_compact, fmt_time, open_table, print_json, stdout_console


def cmd_lineage(args: argparse.Namespace) -> int:
    entries = open_table(args).lineage()
    if args.json:
        print_json(entries)
        return EXIT_OK
    from rich.table import Table as Grid

    out = stdout_console()
    if not entries:
        out.print(as_text(f"no lineage entries in {args.table} (only consistent pushes create them)"))
        return EXIT_OK
    grid = Grid(title=as_text(f"lineage of {args.table}"), title_justify="left")  # a path is no markup
    for name in ("id", "state", "scope", "segments_from", "segments_to", "started", "changed", "timestamp", "owner / lease"):
        grid.add_column(name, no_wrap=name in ("id", "state", "segments_from", "segments_to"))
    for e in entries:
        grid.add_row(
            as_text(e.id),
            as_text(e.state),
            as_text(_scope_cell(e)),
            as_text("\n".join(e.segments_from) or "-"),
            as_text("\n".join(e.segments_to) or "-"),
            as_text(f"v{e.started_version}"),
            as_text(f"v{e.state_version}"),
            as_text(fmt_time(e.timestamp)),
            as_text(_owner_cell(e)),
        )
    out.print(grid)
    return EXIT_OK


def _scope_cell(e: Any) -> str:
    """What a push replaces: the whole table, or its predicate and the partitions it holds (a few, then how many more)."""
    if e.scope is None:
        return "whole table"
    shown = list(e.partitions[:5]) + ([f"… {len(e.partitions) - 5} more"] if len(e.partitions) > 5 else [])
    return "\n".join([e.scope, *shown])


def _owner_cell(e: Any) -> str:
    """Who owns an entry and until when its lease runs, or why mvtable reverted it by itself.

    For an IN_PROGRESS entry it also says what the next push would do with it."""
    lines = [e.owner or "-"]
    if e.lease_expires is not None:
        lines.append(f"lease until {fmt_time(e.lease_expires)}")
    if e.status:
        lines.append(e.status)
    if e.revert_reason:
        lines.append(e.revert_reason)
    return "\n".join(lines)


def cmd_history(args: argparse.Namespace) -> int:
    entries = open_table(args).history()
    if args.limit:
        entries = entries[-args.limit :]
    if args.json:
        print_json(entries)
        return EXIT_OK
    from rich.table import Table as Grid

    grid = Grid(title=as_text(f"history of {args.table}"), title_justify="left")
    for name in ("version", "timestamp", "operation", "parameters", "metrics"):
        grid.add_column(
            name, justify="right" if name == "version" else "left", no_wrap=name != "parameters" and name != "metrics"
        )
    for h in entries:
        grid.add_row(
            as_text(h.version),
            as_text(fmt_time(h.timestamp)),
            as_text(h.operation),
            as_text(fmt_compact(h.parameters, drop=("txn",))),
            as_text(fmt_compact(h.metrics)),
        )
    stdout_console().print(grid)
    return EXIT_OK


def _report_action(args: argparse.Namespace, result) -> int:
    if args.json:
        print_json([result])
        return EXIT_OK
    out = stdout_console()
    if result.changed:
        out.print(as_text(f"{result.operation}: {result.message} (committed version {result.version})"))
    else:
        out.print(as_text(f"nothing changed: {result.message} (version {result.version})"))
    return EXIT_OK


def cmd_rollback(args: argparse.Namespace) -> int:
    t = open_table(args)
    if getattr(args, "transaction", None) is not None:
        return _report_transaction(args, t)
    result = t.rollback(entry=args.entry) if args.entry is not None else t.rollback(version=args.version)
    return _report_action(args, result)


def _report_transaction(args: argparse.Namespace, table: Any) -> int:
    """Roll back transaction ``args.transaction`` in every table it wrote, ``table`` being one of them."""
    from mvtable.connector.transactions import rollback_transaction

    result = rollback_transaction(args.transaction, tables=[table], storage_options=table.storage_options)
    if args.json:
        print_json([result])
        return EXIT_OK
    out = stdout_console()
    for uri, version in result.versions:
        out.print(as_text(f"{result.outcome}: transaction {result.transaction_id} in {uri} (version {version})"))
    return EXIT_OK


def cmd_restore(args: argparse.Namespace) -> int:
    return _report_action(args, open_table(args).restore(version=args.version))


def cmd_publish(args: argparse.Namespace) -> int:
    return _report_action(args, open_table(args).publish(args.entry))


def cmd_spark_jar(args: argparse.Namespace) -> int:
    """The jar's path alone on stdout, for ``spark-submit --jars "$(mvtable spark-jar)"``."""
    from mvtable.connector.spark.native_jvm import spark_jar

    jar = spark_jar()
    if args.json:
        print_json([{"jar": str(jar)}])
    else:
        print(jar)
    return EXIT_OK
