"""How the command line prints: tables for people, ``--json`` for scripts, progress bars on a terminal.

rich is imported lazily, so a call pays only for what it prints."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

PROG = "mvtable"
# exit codes (see the package docstring)
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_CONFLICT = 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it


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


def print_json(items: Sequence[Any]) -> None:
    records = [dataclasses.asdict(i) if dataclasses.is_dataclass(i) and not isinstance(i, type) else i for i in items]
    sys.stdout.write(json.dumps(records, indent=2, default=_jsonable, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def print_error_json(message: str, *, kind: str, hint: str | None, exit_code: int) -> None:
    """A failure under ``--json``: one object on stdout, where the script reads.

    The text for people still goes to stderr. ``type`` is the error's class name, e.g.
    ``TableNotFoundError``; ``exit_code`` repeats the process's."""
    record = {"error": message, "type": kind, "hint": hint, "exit_code": exit_code}
    sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def stdout_console():
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


def stderr_console():
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)


def fmt_time(value: dt.datetime | None) -> str:
    if value is None:
        return "-"
    return value.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def fmt_size(n: int | float) -> str:
    from ..describe import size_text

    return size_text(n)


def fmt_pct(fraction: float) -> str:
    return f"{fraction * 100:.1f}%"


def fmt_compact(d: dict[str, Any], drop: Sequence[str] = ()) -> str:
    return ", ".join(f"{k}={v}" for k, v in d.items() if k not in drop)


def as_text(value: Any):
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
def progress_bars(args: argparse.Namespace) -> Iterator[Callable[[int, int, str], None] | None]:
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
        console=stderr_console(),
        transient=False,
    ) as bar:
        tasks: dict[str, Any] = {}

        def update(done: int, total: int, what: str) -> None:
            if what not in tasks:
                tasks[what] = bar.add_task(f"{args.command}: {_PHASES.get(what, what)}", total=max(int(total), 0))
            bar.update(tasks[what], completed=int(done), total=max(int(total), int(done)))

        yield update


def open_table(args: argparse.Namespace):
    """The table a command names (``args.table``), opened with its ``--storage-option``s.

    Raises:
        TableNotFoundError: There is no mvtable table at the URI.
        StorageLocationError: The URI cannot hold a table (an empty path, a file, an unknown protocol).
        StorageError: The store refused or failed the listing of the log (permissions, network).
    """
    from ..table import Table

    return Table.open(args.table, storage_options=dict(args.storage_options))
