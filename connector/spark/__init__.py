"""The Spark side of mvtable: the data source (reader, writer) and its registration."""

from __future__ import annotations

from typing import Any

from .native import read_native

__all__ = ["ensure_registered", "read_native"]


def ensure_registered(spark: Any) -> None:
    """Register the ``mvtable`` data source with this session.

    A wheel install needs no call (Spark discovers ``pyspark_mvtable``); an editable or
    source-tree install is invisible to that scan, and registering twice is harmless."""
    from .source import MvTableDataSource

    spark.dataSource.register(MvTableDataSource)
