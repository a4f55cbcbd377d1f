"""Validation of paths stored in metadata.

Every path in the log is relative to the table root. A path that could point outside the
table (``..``, an absolute path, another scheme) would let a hostile log make vacuum delete
or a reader read someone else's files, so such a path is rejected wherever it is parsed.
"""

from __future__ import annotations

from .errors import UnsafePathError


def check_relative_path(path: str, *, source: str = "metadata") -> str:
    """Return ``path`` if it is a safe table-relative path, else raise ``UnsafePathError``."""
    problem = _problem(path)
    if problem:
        raise UnsafePathError(source, f"unsafe path {path!r}: {problem}")
    return path


def _problem(path: str) -> str | None:
    if not isinstance(path, str) or not path:
        return "empty"
    if "\x00" in path:
        return "contains NUL"
    if ":" in path:
        return "looks like a URL or drive (contains ':')"
    if path.startswith(("/", "\\", "~")):
        return "absolute"
    if "\\" in path:
        return "contains a backslash"
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "has an empty, '.' or '..' component"
    return None
