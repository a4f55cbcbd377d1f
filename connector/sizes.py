"""Byte counts as people read them, for reports, the CLI and the timeline page.

Its own module so that what shows a size depends on nothing else: ``describe`` imports the
exports (``inspect`` reports them), and the exports import ``partitions``.
"""

from __future__ import annotations

__all__ = ["size_text"]


def size_text(n: int | float) -> str:
    """``1536`` -> ``"1.5 KiB"``."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # pragma: no cover
