"""The results table (rich, for the terminal; Markdown, for the README) and the JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .common import CaseResult


def fmt(value: float | None, unit: str = "s") -> str:
    if value is None:
        return "—"
    if unit == "MiB":
        return f"{value:.1f} MiB"
    if unit == "files":
        return f"{value:.0f} files"
    if value < 1:
        return f"{value * 1000:.1f} ms"
    return f"{value:.2f} s"


def ratio_text(r: CaseResult) -> str:
    if r.ratio is None:
        return r.details.get("na", "n/a") if isinstance(r.details.get("na"), str) else "n/a"
    return f"{r.ratio:.2f}×"


def rows(results: list[CaseResult]) -> list[list[str]]:
    out = []
    for r in results:
        baseline = f"{r.baseline_name}: {fmt(r.baseline, r.unit)}" if r.baseline is not None else f"{r.baseline_name}: n/a"
        status = r.status if r.check == "ok" else f"WRONG ({r.check})"
        load = f"{r.load:.1f}" if r.load is not None else "—"
        out.append([r.name, fmt(r.mvtable, r.unit), baseline, ratio_text(r), r.target_text or "—", status, load])
    return out


HEADER = ["case", "mvtable", "baseline (same run)", "ratio", "target", "status", "load"]


def print_tables(results: list[CaseResult], metrics: dict[str, Any], meta: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(width=200)
    for title, group in (
        ("mvtable vs native and budgets", lambda r: r.group != "peers"),
        ("mvtable vs peers (mvtable time / peer time)", lambda r: r.group == "peers"),
    ):
        chosen = [r for r in results if group(r)]
        if not chosen:
            continue
        t = Table(title=f"{title} — SF {meta['sf']:g}, medians of {meta['repeat']}", show_lines=False)
        for h in HEADER:
            t.add_column(h, overflow="fold")
        for row, r in zip(rows(chosen), chosen):
            row = [escape(c) for c in row]
            style = {"MISSED": "red", "met": "green", "WRONG": "bold red"}.get(r.status)
            t.add_row(*row, style=style)
        console.print(t)
    dv = metrics.get("dv_bytes")
    if dv:
        t = Table(title="deletion-vector size")
        for h in ("deletes", "deleted rows", "DV bytes", "bytes / deleted row", "inline / in files"):
            t.add_column(h)
        for k, v in dv.items():
            t.add_row(
                k,
                str(v["deleted_rows"]),
                str(v["dv_bytes"]),
                f"{v['bytes_per_deleted_row']:.3f}",
                f"{v['inline_dvs']} / {v['file_dvs']}",
            )
        console.print(t)


def markdown(results: list[CaseResult], metrics: dict[str, Any]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows(results)]
    dv = metrics.get("dv_bytes")
    if dv:
        lines += ["", "| deletes | deleted rows | DV bytes | bytes / deleted row |", "|---|---|---|---|"]
        lines += [f"| {k} | {v['deleted_rows']} | {v['dv_bytes']} | {v['bytes_per_deleted_row']:.3f} |" for k, v in dv.items()]
    return "\n".join(lines)


def write_json(path: Path, results: list[CaseResult], metrics: dict[str, Any], meta: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"meta": meta, "cases": {r.name: r.to_json() for r in results}, "metrics": metrics}
    path.write_text(json.dumps(doc, indent=2, default=str))
