"""Paths stored in metadata are relative to the table root and may not escape it.

A path that could point outside the table (``..``, an absolute path, another scheme) would
let a hostile log make vacuum delete, or a reader read, someone else's files, so such a path
is rejected wherever metadata is parsed: the pydantic models (``safe_path_value``), the
checkpoint's vectorised checks and GC's light parser (``path_problem``)."""

from __future__ import annotations

import pathlib

from .errors import UnsafePathError

# the table's folder of segments (and their key indexes): named here, below every layer, because
# both the segment writer and the write intents that name its files need it
DATA_DIR = "data"


def check_relative_path(path: str, *, source: str = "metadata") -> str:
    """Return ``path`` if it is a safe table-relative path.

    Raises:
        UnsafePathError: ``path`` is absolute, escapes the table root, or is otherwise unsafe."""
    problem = path_problem(path)
    if problem:
        raise UnsafePathError(source, f"unsafe path {path!r}: {problem}")
    return path


def safe_path_value(path: str) -> str:
    """The pydantic-validator form of the path check.

    Pydantic turns only ``ValueError`` into a validation error
    (``actions.validation_error`` maps it back to ``UnsafePathError``)."""
    problem = path_problem(path)
    if problem:
        raise ValueError(f"unsafe path {path!r}: {problem}")
    return path


def path_problem(path: object) -> str | None:
    """Why ``path`` is not a safe table-relative path, or ``None``."""
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


def location_uri(root: str, path: str = "") -> str:
    """The absolute location of ``path`` under the table root ``root``.

    It is what other formats' metadata (Iceberg manifests, the Puffin footers of DV files)
    names files by.

    A local path becomes ``file://`` followed by the absolute path as it is, not
    percent-encoded: that is what pyiceberg writes and what it opens (it does not decode
    ``%20``), so a table under ``/data/my table`` must be named ``file:///data/my table``.
    A path with ``?`` or ``#`` stays a plain absolute path: in a URI those start a query or
    fragment, which pyiceberg would cut off, while it opens a path without a scheme as a
    local file whole. Every caller has to agree, as a DV file's footer is matched against
    the export's locations by string."""
    base = root.rstrip("/")
    if "://" not in base:
        absolute = pathlib.Path(base).absolute().as_posix()
        if not absolute.startswith("/"):
            absolute = "/" + absolute  # a Windows drive: file:///C:/...
        base = absolute if "?" in absolute or "#" in absolute else "file://" + absolute
    return f"{base}/{path}" if path else base
