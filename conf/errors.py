"""The root of every mvtable error. It lives in the one package every other package may
import (``lineage`` and ``visibility`` may not import each other), so that a single
``except MvTableError`` catches log, deletion-vector, settings and connector errors alike."""


class MvTableError(Exception):
    """Base of every mvtable error."""
