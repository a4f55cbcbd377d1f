"""Dispatch, exit codes and error reporting.

Every expected failure is one line naming the problem plus a hint, never a traceback."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Sequence

from .commands import cmd_history, cmd_lineage, cmd_publish, cmd_restore, cmd_rollback, cmd_spark_jar
from .export import cmd_export
from .inspection import cmd_inspect
from .maintenance import cmd_compact, cmd_gc, cmd_vacuum
from .output import (
    EXIT_CONFLICT,
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    PROG,
    as_text,
    print_error_json,
    stderr_console,
)
from .parser import UsageExit, build_parser, join_dash_values
from .partitions import cmd_partitions
from .pins import cmd_pins
from .schema import cmd_schema
from .timeline import cmd_timeline
from .wording import cli_message

__all__ = ["EXIT_CONFLICT", "EXIT_ERROR", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "PROG", "main"]

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
    "pins": cmd_pins,
    "partitions": cmd_partitions,
    "schema": cmd_schema,
    "timeline": cmd_timeline,
    "export": cmd_export,
    "spark-jar": cmd_spark_jar,
}


def _hint(exc: BaseException, args: argparse.Namespace) -> str:
    from mvtable import errors as e

    uri = getattr(args, "table", "URI")
    if isinstance(exc, e.CommitConflictError):
        return "another writer changed the table at the same time and nothing was committed; run the command again (it is idempotent)"
    if isinstance(exc, e.CommitStateUnknownError):
        return "the store did not confirm the commit; run the command again: it is idempotent and reports whether the change is already there"
    if isinstance(exc, e.TableNotFoundError):
        return "check the path or URL" + (
            "" if args.storage_options else ", and pass --storage-option KEY=VALUE for remote stores"
        )
    if isinstance(exc, e.VersionNotFoundError):
        return f"list the versions the log still holds with: {PROG} history {uri}"
    if isinstance(exc, e.FilesMissingError):
        return f"pick a version inside the retention window (see {PROG} history {uri})"
    if isinstance(exc, e.InvalidLineageTransitionError):
        return f"see the lineage entries and their states with: {PROG} lineage {uri}"
    if isinstance(exc, e.RetentionTooShortError):
        return "use a longer --retention, or add --force if no reader or writer needs the older files"
    if isinstance(exc, e.UnsupportedExportTypeError):
        return "the export wrote nothing; export a table whose columns the target can hold"
    if isinstance(exc, e.ForeignExportMetadataError):
        return "move the export folder named above away (rename it) and export again; nothing was written"
    if isinstance(exc, e.ExportError):
        return "the export wrote nothing into data/ or _mvtable/; the mvtable table is unchanged"
    if isinstance(exc, e.StorageFullError):
        return f"free space; {PROG} vacuum {uri} frees what no version needs, even on a full disk"
    if isinstance(exc, e.StorageReadOnlyError):
        return "the storage is read-only: reads work here, write where the table is writable"
    if isinstance(exc, e.CorruptMetadataError):
        return "a metadata file is damaged; do not write to this table until it is repaired"
    if isinstance(exc, (e.InvalidOptionError, ValueError)):
        return f"see: {PROG} {args.command} --help"
    return ""


def _fail(exc: BaseException, args: argparse.Namespace, code: int) -> int:
    err = stderr_console()
    name = type(exc).__name__
    message = cli_message(str(exc))
    err.print(as_text(f"{PROG} {args.command}: {name}: {message}"), style="bold red" if err.is_terminal else None)
    hint = _hint(exc, args)
    if hint:
        err.print(as_text(f"hint: {hint}"))
    if getattr(args, "json", False):
        print_error_json(message, kind=name, hint=hint or None, exit_code=code)
    return code


def _error_types() -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
    """(retryable, other expected errors)."""
    from mvtable.errors import CommitConflictError, CommitStateUnknownError, ExportConflictError, MvTableError

    return (CommitConflictError, CommitStateUnknownError, ExportConflictError), (MvTableError,)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns its exit code.

    With ``--json`` a failure is also one JSON object on stdout (``print_error_json``), so
    that a script reads a single stream.

    It raises no mvtable error: an expected failure (an ``MvTableError``, a store's
    ``OSError``) is one line on stderr and becomes the exit code, ``EXIT_CONFLICT`` for a
    ``CommitConflictError``, ``CommitStateUnknownError`` or ``ExportConflictError`` (run it
    again) and ``EXIT_ERROR`` for the others; bad arguments are ``EXIT_USAGE``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args = parser.parse_args(join_dash_values(argv))
    except UsageExit as exc:  # argparse printed usage and the message on stderr
        if "--json" in argv:
            print_error_json(exc.message, kind="UsageError", hint=f"see: {exc.prog} --help", exit_code=EXIT_USAGE)
        return EXIT_USAGE
    except SystemExit as exc:  # --help (0)
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
        message = f"{PROG} {args.command}: interrupted"
        hint = "run it again to resume (every command is idempotent)"
        stderr_console().print(as_text(f"{message}; {hint}"))
        if args.json:
            print_error_json(message, kind="KeyboardInterrupt", hint=hint, exit_code=EXIT_INTERRUPTED)
        return EXIT_INTERRUPTED
