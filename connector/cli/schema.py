"""``mvtable schema``: the schema with field ids; ``--history``: each schema change and its version."""

from __future__ import annotations

import argparse

from .output import EXIT_OK, as_text, fmt_time, open_table, print_json, stdout_console


def cmd_schema(args: argparse.Namespace) -> int:
    from ..schema_evolution.describe import schema_history, schema_rows
    from ..table import _utc

    table = open_table(args)
    snapshot = table.snapshot(args.version)
    if args.history:
        changes = schema_history(table.commit_log, snapshot)
        if args.json:
            print_json(changes)
            return EXIT_OK
        from rich.table import Table as Grid

        grid = Grid(title=as_text(f"schema changes of {args.table}"), title_justify="left")
        for name in ("version", "timestamp", "operation", "schema id", "changes"):
            grid.add_column(name, justify="right" if name in ("version", "schema id") else "left")
        for c in changes:
            grid.add_row(
                as_text(c["version"]),
                as_text(fmt_time(_utc(c["timestamp_ms"]))),
                as_text(c["operation"]),
                as_text(c["schema_id"]),
                as_text("; ".join(c["changes"])),
            )
        stdout_console().print(grid)
        return EXIT_OK
    rows = schema_rows(snapshot.table_schema)
    if args.json:
        print_json(
            [{"version": snapshot.version, "schema_id": snapshot.schema_id, "key": list(snapshot.primary_key), "fields": rows}]
        )
        return EXIT_OK
    from rich.table import Table as Grid

    grid = Grid(
        title=as_text(f"schema of {args.table} at version {snapshot.version} (schema id {snapshot.schema_id})"),
        title_justify="left",
    )
    for name in ("id", "column", "type", "nullable", "doc"):
        grid.add_column(name, justify="right" if name == "id" else "left")
    key = {k.lower() for k in snapshot.primary_key}
    for r in rows:
        name = r["name"] + (" (key)" if r["name"].lower() in key else "")
        grid.add_row(
            as_text(r["id"]),
            as_text(name),
            as_text(r["type"]),
            as_text("yes" if r["nullable"] else "no"),
            as_text(r["doc"] or ""),
        )
    stdout_console().print(grid)
    return EXIT_OK
