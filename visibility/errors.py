"""Errors of the visibility layer.

Kept apart from ``mvtable.lineage.errors`` on purpose: visibility must not import lineage.
Its root ``VisibilityError`` derives from the shared ``mvtable.conf.errors.MvTableError``,
so one ``except MvTableError`` still catches everything.
"""

from __future__ import annotations

from mvtable.conf.errors import MvTableError


class VisibilityError(MvTableError):
    """Base of every error raised by ``mvtable.visibility``."""


class CorruptDeletionVectorError(VisibilityError):
    """A deletion vector (or the descriptor pointing at it) is not what we wrote.

    Raised instead of returning a guess: a DV that decodes "almost" right would silently
    resurrect or hide rows, which is worse than failing the read.
    """

    def __init__(self, source: str, problem: str) -> None:
        super().__init__(f"{source}: {problem}")
        self.source = source
        self.problem = problem


class DeletionVectorNotFoundError(VisibilityError):
    """The DV file a descriptor names does not exist (e.g. removed by an over-eager vacuum)."""

    def __init__(self, path: str, detail: str = "") -> None:
        super().__init__(f"{path}: deletion vector file not found" + (f" ({detail})" if detail else ""))
        self.path = path
        self.detail = detail
