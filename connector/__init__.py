"""mvtable's user-facing side: the ``Table`` API, segment I/O, the Spark data source."""

from .table import HistoryEntry, LineageView, Table, TableScan

__all__ = ["HistoryEntry", "LineageView", "Table", "TableScan"]
