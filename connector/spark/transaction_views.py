"""SQL views of several tables at versions that show every multi-table transaction whole.

``create_view`` pins one table's version; a report that joins views made one by one can
still see a transaction in one table and not in the other (the window between finalize
commits). ``create_views`` picks the versions with ``consistent_versions`` first, then
makes each view at its version, pinned like ``create_view``'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mvtable.errors import InvalidOptionError

from ..transactions.consistent import consistent_versions
from ..transactions.tables import TableRef, resolve

__all__ = ["create_views"]


def create_views(
    spark: Any,
    views: Mapping[str, TableRef | str],
    *,
    storage_options: Mapping[str, Any] | None = None,
    spark_uri: str | None = None,
) -> dict[str, Any]:
    """Register one temporary view per table (view name → ``Table`` or URI), all at consistent versions.

    Returns each view's ``View`` (its ``version``); drop them with ``mvtable.drop_view``.
    ``storage_options`` serve the tables given as URIs; ``spark_uri`` is ``create_view``'s
    (one table root as Spark's filesystem names it, e.g. ``s3a://`` for ``s3://``), so it is
    only allowed for a single view.

    Raises:
        InvalidOptionError: ``views`` is empty or not a mapping, a view name is malformed, or
            ``spark_uri`` with several views.
        TableNotFoundError: A table does not exist.
        TooManyRetriesError: Transactions kept finalizing while the versions were picked.
        StorageError: The store refused a read.
    """
    from ..spark.views import create_view

    if not isinstance(views, Mapping) or not views:
        raise InvalidOptionError("create_views takes a mapping of view names to tables, e.g. {'orders': '/data/orders'}")
    if spark_uri is not None and len(views) > 1:
        raise InvalidOptionError("spark_uri names one table's root; create_views with several views cannot take one")
    refs = {name: resolve(table, storage_options) for name, table in views.items()}
    versions = consistent_versions(list(views.values()), storage_options=storage_options)
    return {
        name: create_view(spark, name, uri, version=versions[uri], storage_options=options, spark_uri=spark_uri)
        for name, (uri, options) in refs.items()
    }
