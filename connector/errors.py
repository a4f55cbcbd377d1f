"""Errors of the connector: bad input from a user, as opposed to log or storage trouble
(``mvtable.lineage.errors``) or a damaged deletion vector (``mvtable.visibility.errors``).
All of them derive from ``MvTableError`` so one ``except`` catches the family."""

from __future__ import annotations

from mvtable.lineage.errors import MvTableError


class ConnectorError(MvTableError):
    """Base of the connector's own errors."""


class InvalidOptionError(ConnectorError, ValueError):
    """An option or argument that is unknown, malformed, or conflicts with another."""


class SchemaMismatchError(ConnectorError, ValueError):
    """Data whose columns do not match the table's. The message names the columns."""


class UnsupportedTypeError(ConnectorError, TypeError):
    """An Arrow type that Spark SQL cannot hold (unsigned ints, float16, time, …)."""


class InvalidRowAddressError(ConnectorError, ValueError):
    """A delete addressed a row that does not exist (unknown segment, position past the end)."""


class FilesMissingError(ConnectorError):
    """Files a version needs are gone (vacuumed or deleted by hand)."""


class RetentionTooShortError(ConnectorError, ValueError):
    """A vacuum retention shorter than the table's, without ``force``."""


class CorruptSegmentError(ConnectorError, ValueError):
    """A data file disagrees with what the log says about it (row counts, row groups): it
    was replaced or damaged outside mvtable. The message names the file."""
