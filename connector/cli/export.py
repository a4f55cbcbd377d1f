"""``mvtable export iceberg|delta``: metadata for other engines over the same files."""

from __future__ import annotations

import argparse

from .output import EXIT_OK, as_text, fmt_size, open_table, print_json, stdout_console


def cmd_export(args: argparse.Namespace) -> int:
    t = open_table(args)
    result = (
        t.export_iceberg(all_versions=args.all_versions)
        if args.format == "iceberg"
        else t.export_delta(all_versions=args.all_versions)
    )
    if args.json:
        print_json([result.to_json()])
        return EXIT_OK
    out = stdout_console()
    if not result.versions:
        out.print(as_text(f"nothing to export: {args.format} metadata already covers version {t.version}"))
    else:
        versions = ", ".join(map(str, result.versions))
        out.print(
            as_text(
                f"exported version(s) {versions} as {args.format}: {result.files_written} metadata files, {fmt_size(result.bytes_written)}"
            )
        )
        out.print(as_text(f"read it at {result.metadata}"))
    if result.copied_dv_bytes:
        out.print(as_text(f"deletion-vector bytes written again (inline or older DV files): {fmt_size(result.copied_dv_bytes)}"))
    if result.skipped:
        out.print(as_text(f"skipped version(s) whose files vacuum removed: {', '.join(map(str, result.skipped))}"))
    return EXIT_OK
