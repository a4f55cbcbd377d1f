"""Deletion vectors: which rows of a segment are deleted, stored so other engines can read them.

Layering: this package never imports ``mvtable.lineage``, ``mvtable.connector`` or pyspark.
What it shares with the log comes from the root package: the storage interface
(``mvtable.storage.FileIO``), the DV descriptor (``mvtable.dvref.DeletionVectorRef``) and
the errors (``mvtable.errors``).
"""

from __future__ import annotations

from .cache import DEFAULT_CACHE_BYTES, DVCache, process_cache, ref_key
from .dv import DV_MAGIC, as_bitmap, bitmap_from_array, decode_dv, encode_dv, positions_array
from .files import DV_DIR, load_dv, load_dv_positions, write_dvs
from .masks import deleted_count, deleted_in_range, fully_deleted, keep_mask

__all__ = [
    # blob format
    "DV_MAGIC",
    "encode_dv",
    "decode_dv",
    "positions_array",
    "bitmap_from_array",
    "as_bitmap",
    # DV files
    "DV_DIR",
    "write_dvs",
    "load_dv",
    "load_dv_positions",
    # masks
    "deleted_in_range",
    "deleted_count",
    "keep_mask",
    "fully_deleted",
    # cache
    "DVCache",
    "DEFAULT_CACHE_BYTES",
    "process_cache",
    "ref_key",
]
