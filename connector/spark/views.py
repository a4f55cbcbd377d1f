"""SQL on an mvtable snapshot at Spark's native Parquet speed: ``create_view``.

A Python data source gets no column pruning from Spark 4.3 and filter pushdown only with a
flag, so ``CREATE TEMPORARY VIEW v USING mvtable`` reads every column of every row group
(TPC-H Q6 on lineitem: ~7× the native Parquet time). ``create_view`` registers a
temporary view over ``read_native`` instead: Spark's own Parquet scan, which prunes columns,
pushes filters and skips row groups, with the deletion vectors applied in the JVM.

A view shows one version. It is pinned (reader pin, ``mvtable.visibility.pins``) while the
view exists in this driver process: a daemon thread renews the pin well before it
expires, ``refresh_view`` moves the view (and its pin) to the newest version, and
``drop_view`` (or the end of the process; an abandoned pin then just expires) releases it.
Views made with an explicit ``version``/``timestamp`` stay on that version on refresh.
"""

from __future__ import annotations

import atexit
import logging
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mvtable.conf import connector_settings, parse_period
from mvtable.errors import InvalidOptionError, PinError
from mvtable.storage import FileIO, open_file_io
from mvtable.visibility import pins

from .native import Filter, read_native

log = logging.getLogger("mvtable.connector")

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


@dataclass
class View:
    """A temporary view over one pinned version of an mvtable table."""

    name: str
    path: str
    version: int
    follows_latest: bool
    options: dict[str, Any] = field(default_factory=dict)
    pin_id: str | None = None
    io: FileIO | None = field(default=None, repr=False)


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
) -> View:
    """Register ``name`` as a temporary view of the table at ``path`` (newest version unless
    ``version``/``timestamp``), read by Spark's native Parquet reader; replaces a view of
    the same name. Returns the ``View`` (its ``version`` says what it shows)."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidOptionError(f"create_view: {name!r} is not a view name (letters, digits, underscores)")
    options: dict[str, Any] = {
        "columns": list(columns) if columns is not None else None,
        "filters": list(filters),
        "storage_options": dict(storage_options or {}),
        "spark_uri": spark_uri,
    }
    if version is not None and timestamp is not None:
        raise InvalidOptionError("create_view: pass a version or a timestamp, not both")
    io = open_file_io(path, options["storage_options"])
    ttl_s = parse_period(connector_settings().pinTtl, name="pinTtl")
    resolved = _resolve(io, version, timestamp)
    pin_id = pins.pin(io, resolved, ttl_s=ttl_s, owner=f"mvtable view {name}")  # before planning reads it
    try:
        df = read_native(spark, path, version=resolved, **options)
        df.createOrReplaceTempView(name)
    except BaseException:
        pins.release(io, pin_id)
        raise
    view = View(name, path, resolved, version is None and timestamp is None, options, pin_id, io)
    with _lock:
        old = _views.pop((id(spark), name), None)
        _views[(id(spark), name)] = view
    if old is not None:
        _release(old)
    _ensure_renewer(ttl_s)
    log.info("mvtable view %s shows %s at version %s", name, path, resolved)
    return view


def refresh_view(spark: Any, name: str) -> View:
    """Move a view made by ``create_view`` to the table's newest version (a view of an
    explicit version stays where it is, re-pinned)."""
    view = _get(spark, name)
    version = None if view.follows_latest else view.version
    new = create_view(spark, name, view.path, version=version, **view.options)
    new.follows_latest = view.follows_latest
    return new


def drop_view(spark: Any, name: str) -> None:
    """Drop the temporary view and release its pin."""
    with _lock:
        view = _views.pop((id(spark), name), None)
    spark.catalog.dropTempView(name)
    if view is not None:
        _release(view)


def views() -> list[View]:
    """The views this process holds (name, table, version, pin)."""
    with _lock:
        return list(_views.values())


def _get(spark: Any, name: str) -> View:
    with _lock:
        view = _views.get((id(spark), name))
    if view is None:
        raise InvalidOptionError(f"no mvtable view {name!r} in this session; create it with mvtable.create_view")
    return view


def _resolve(io: FileIO, version: int | None, timestamp: str | None) -> int:
    from mvtable.lineage.log import CommitLog

    from ..timeparse import parse_timestamp_ms

    log_ = CommitLog(io)
    if timestamp is not None:
        return log_.version_at(parse_timestamp_ms(timestamp))
    if version is not None:
        return version
    latest = log_.latest_version()
    if latest < 0:
        from mvtable.errors import TableNotFoundError

        raise TableNotFoundError(f"no mvtable table at {io.uri}")
    return latest


def _release(view: View) -> None:
    if view.pin_id is not None and view.io is not None:
        try:
            pins.release(view.io, view.pin_id)
        except PinError as exc:
            log.warning("could not release the pin of view %s: %s", view.name, exc)
        view.pin_id = None


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
        for view in views():
            if view.pin_id is None or view.io is None:
                continue
            try:
                pins.extend(view.io, view.pin_id, ttl_s=ttl_s)
            except PinError as exc:  # expired (a suspended process): the view may be stale
                log.warning("view %s lost its pin on version %s: %s; refresh_view re-pins it", view.name, view.version, exc)


@atexit.register
def _release_all() -> None:
    _wake.set()
    for view in views():
        _release(view)
