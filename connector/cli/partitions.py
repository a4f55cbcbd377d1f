"""``mvtable partitions``: one row per partition, its segments, rows, deletes, bytes and last change."""

from __future__ import annotations

import argparse
import datetime as dt
from typing import Any

from .output import EXIT_OK, as_text, fmt_size, open_table, print_json, stdout_console


def cmd_partitions(args: argparse.Namespace) -> int:
    table = open_table(args)
    parts = table.partitions(version=args.version)
    records = [{k: _plain(v) for k, v in row.items()} for row in parts.to_pylist()]
    if args.json:
        print_json(records)
        return EXIT_OK
    from rich.table import Table as Grid

    version = args.version if args.version is not None else table.version
    grid = Grid(title=as_text(f"partitions of {args.table} at version {version}"), title_justify="left")
    for name in parts.column_names:
        grid.add_column(name, justify="left" if name not in ("segments", "rows", "deleted_rows", "bytes") else "right")
    for row in records:
        grid.add_row(
            *(
                as_text(fmt_size(v) if k == "bytes" else "null" if v is None else f"v{v}" if k == "last_modified_version" else v)
                for k, v in row.items()
            )
        )
    stdout_console().print(grid)
    return EXIT_OK


def _plain(value: Any) -> Any:
    """A partition value as JSON and a table cell show it: dates and times in ISO form."""
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    if hasattr(value, "as_tuple"):  # Decimal
        return str(value)
    return value
