"""SQL on an mvtable snapshot at Spark's native Parquet speed: ``create_view``.

A Python data source gets no column pruning from Spark 4.3 and filter pushdown only with a
flag, so ``CREATE TEMPORARY VIEW v USING mvtable`` reads every column of every row group,
several times slower than native Parquet on TPC-H. ``create_view`` registers a
temporary view over ``read_native`` instead: Spark's own Parquet scan, which prunes columns,
pushes filters and skips row groups, with the deletion vectors applied in the JVM.

A view shows one version. It is pinned (``mvtable.connector.pinning``, once: the DataFrame
under the view is built on that pinned snapshot) while the view exists in this driver process: a daemon thread renews the pin well before it
expires, ``refresh_view`` moves the view (and its pin) to the newest version, and
``drop_view`` (or the end of the process; an abandoned pin then just expires) releases it.
Views made with an explicit ``version``/``timestamp`` stay on that version on refresh.

Names are case-insensitive, as Spark's session catalog treats temporary views: ``drop_view(
spark, "V")`` drops the view made as ``"v"``. A view dropped behind mvtable's back (``DROP
VIEW v`` in SQL, ``spark.catalog.dropTempView``, or its session gone) would otherwise keep its
pin, and so its version, from GC and vacuum for the life of the driver; so each renewal round
first asks the session's catalog whether the view still exists (``tableExists``, a cheap call) and
releases the pin of one that does not. (A permanent table of the same name counts as existing:
that pin lasts until the process ends, as before.)
"""

from __future__ import annotations

import atexit
import logging
import re
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mvtable import checks
from mvtable.errors import InvalidOptionError, MvTableError, PinError
from mvtable.storage import open_file_io

from ..pinning import PinnedSnapshot, pin_snapshot, pin_ttl_s
from ..post_commit import open_log
from .native import Filter, native_frame

logger = logging.getLogger("mvtable.connector")

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


@dataclass
class View:
    """A temporary view over one pinned version of an mvtable table."""

    name: str
    path: str
    version: int
    follows_latest: bool
    options: dict[str, Any] = field(default_factory=dict)
    pinned: PinnedSnapshot | None = field(default=None, repr=False)
    # the session the view lives in, weakly: the renewer must not keep a session alive
    session: weakref.ReferenceType[Any] | None = field(default=None, repr=False, compare=False)

    @property
    def pin_id(self) -> str | None:
        """The id of the pin that holds the view's version (None once released)."""
        return None if self.pinned is None or self.pinned.released else self.pinned.pin.pin_id


_views: dict[tuple[int, str], View] = {}
_lock = threading.Lock()
_renewer: threading.Thread | None = None
_wake = threading.Event()


def create_view(
    spark: Any,
    name: str,
    path: str,
    *,
    version: int | None = None,
    timestamp: str | None = None,
    columns: Sequence[str] | None = None,
    filters: Sequence[Filter] = (),
    storage_options: Mapping[str, Any] | None = None,
    spark_uri: str | None = None,
    min_partitions: int | None = None,
) -> View:
    """Register ``name`` as a temporary view of the table at ``path``, read by Spark's native Parquet reader.

    The view shows the newest version unless ``version``/``timestamp``, and replaces a view
    of the same name. Returns the ``View`` (its ``version`` says what it shows).
    ``columns``, ``filters``, ``spark_uri`` and ``min_partitions`` are ``read_native``'s.

    Raises:
        InvalidOptionError: ``name`` is not a view name, both ``version`` and ``timestamp``
            are given, or another option is malformed (as for ``read_native``).
        InvalidFilterError: A filter does not fit the table's schema.
        TableNotFoundError: There is no mvtable table at ``path``.
        VersionNotFoundError: No such version (or no longer), or none at or before ``timestamp``.
        DeletionVectorNotFoundError: The version's deletion vectors were collected before it
            was pinned; show a newer version.
        FilesMissingError: A data file the version needs is gone (vacuumed or deleted by hand).
        CorruptSegmentError: A data file's footer is not the one the log recorded.
        CorruptMetadataError: A log file or checkpoint is damaged; the message names it.
        StorageLocationError: ``path`` cannot hold a table (an empty path, a file, an unknown protocol).
        StorageError: The store refused or failed a read (permissions, network).
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidOptionError(f"create_view: {name!r} is not a view name (letters, digits, underscores)")
    options: dict[str, Any] = {
        # checked as given: list() of a string or of one bare filter tuple would hide the mistake
        "columns": checks.column_names(columns, name="create_view columns"),
        "filters": list(filters) if isinstance(filters, list) else filters,
        "storage_options": dict(storage_options or {}),
        "spark_uri": spark_uri,
        "min_partitions": min_partitions,
    }
    if version is not None and timestamp is not None:
        raise InvalidOptionError("create_view: pass a version or a timestamp, not both")
    io = open_file_io(path, options["storage_options"])
    ttl_s = pin_ttl_s()
    pinned = pin_snapshot(io, open_log(io), version=version, timestamp=timestamp, ttl_s=ttl_s, owner=f"mvtable view {name}")
    try:
        view_options = {k: v for k, v in options.items() if k != "storage_options"}
        native_frame(spark, pinned, **view_options).createOrReplaceTempView(name)
    except BaseException:
        pinned.release()
        raise
    resolved = pinned.version
    view = View(name, path, resolved, version is None and timestamp is None, options, pinned, weakref.ref(spark))
    key = _key(spark, name)
    with _lock:
        old = _views.pop(key, None)
        _views[key] = view
    if old is not None:
        _release(old)
    _ensure_renewer(ttl_s)
    logger.info("mvtable view %s shows %s at version %s", name, path, resolved)
    return view


def refresh_view(spark: Any, name: str) -> View:
    """Move a view made by ``create_view`` to the table's newest version.

    A view of an explicit version stays where it is, re-pinned.

    Raises:
        InvalidOptionError: This session has no mvtable view ``name`` (``create_view`` makes one).
        TableNotFoundError: The view's table is gone from its path.
        VersionNotFoundError: The version a view of an explicit version shows is no longer in the log.
        DeletionVectorNotFoundError: The version's deletion vectors were collected meanwhile.
        FilesMissingError: A data file the version needs is gone (vacuumed or deleted by hand).
        CorruptionError: A log file, checkpoint or data file footer is damaged; the message names it.
        StorageError: The store refused or failed a read (permissions, network).
    """
    view = _get(spark, name)
    version = None if view.follows_latest else view.version
    new = create_view(spark, name, view.path, version=version, **view.options)
    new.follows_latest = view.follows_latest
    return new


def drop_view(spark: Any, name: str) -> None:
    """Drop the temporary view and release its pin.

    Raises:
        InvalidOptionError: ``name`` is not a string.
        StorageError: The store refused or failed to delete the view's pin file; the view is
            dropped already and the pin expires by itself.
    """
    key = _key(spark, name)
    with _lock:
        view = _views.pop(key, None)
    spark.catalog.dropTempView(name)
    if view is not None:
        _release(view)


def views() -> list[View]:
    """The views this process holds (name, table, version, pin)."""
    with _lock:
        return list(_views.values())


def _key(spark: Any, name: str) -> tuple[int, str]:
    """Registry key: the session, and the name folded as Spark's session catalog folds a temporary view's name.

    Names are not folded when ``spark.sql.caseSensitive`` is on."""
    if not isinstance(name, str):
        raise InvalidOptionError(f"{name!r} is not a view name (a string)")
    if str(spark.conf.get("spark.sql.caseSensitive", "false")).lower() == "true":
        return id(spark), name
    return id(spark), name.lower()


def _get(spark: Any, name: str) -> View:
    key = _key(spark, name)
    with _lock:
        view = _views.get(key)
    if view is None:
        raise InvalidOptionError(f"no mvtable view {name!r} in this session; create it with mvtable.create_view")
    return view


def _release(view: View) -> None:
    if view.pinned is not None:
        try:
            view.pinned.release()
        except PinError as exc:
            logger.warning("could not release the pin of view %s: %s", view.name, exc)


def _ensure_renewer(ttl_s: float) -> None:
    """One daemon thread per process renews every live view's pin at a third of its TTL."""
    global _renewer
    with _lock:
        if _renewer is not None and _renewer.is_alive():
            return
        _renewer = threading.Thread(target=_renew_loop, args=(ttl_s,), name="mvtable-view-pins", daemon=True)
        _renewer.start()


def _renew_loop(ttl_s: float) -> None:
    while not _wake.wait(max(1.0, ttl_s / 3)):
        renew_views(ttl_s=ttl_s)


def renew_views(*, ttl_s: float | None = None) -> None:
    """One renewal round (what the daemon thread runs every third of the TTL).

    It releases the pin of every view its session no longer has, and extends the others."""
    ttl = pin_ttl_s(ttl_s)
    with _lock:
        held = list(_views.items())
    for key, view in held:
        if view.pinned is None or view.pinned.released:
            continue
        if not _still_exists(view):
            with _lock:
                if _views.get(key) is view:
                    del _views[key]
            logger.info("mvtable view %s is gone from its session: released its pin on version %s", view.name, view.version)
            _release(view)
            continue
        try:  # extends the pin; one that expired (a suspended process) is made again if the version is whole
            view.pinned.renew(ttl_s=ttl)
        except MvTableError as exc:
            logger.warning("view %s lost its pin on version %s: %s; refresh_view re-pins it", view.name, view.version, exc)


def _still_exists(view: View) -> bool:
    """Whether the view's session still has a view or table of its name.

    A session that was collected or whose catalog cannot answer (stopped) has no views left."""
    if view.session is None:
        return True
    spark = view.session()
    if spark is None:
        return False
    try:
        return bool(spark.catalog.tableExists(view.name))
    except Exception as exc:  # a stopped session: its views went with it
        logger.warning("cannot ask the session of view %s whether it exists (%s): releasing its pin", view.name, exc)
        return False


@atexit.register
def _release_all() -> None:
    _wake.set()
    for view in views():
        _release(view)
