"""Schema evolution by field id: add, rename, drop and widen columns without rewriting a data file.

Every column and nested struct field has an id that never changes and is never reused (the stored
schema keeps it in the ``StructField`` metadata under ``parquet.field.id``, the log keeps the
highest id ever assigned); segments carry the ids as Parquet ``field_id``. Reads resolve columns
by id (``projection``), so a rename changes no file, a dropped column's values never come back,
and an added column reads null in older segments. Tables stored before field ids get them by
position, the same way for their schema and their files, with no rewrite.

The parts, each usable alone:

* ``field_ids``: ids on Arrow schemas (written to and read from Parquet);
* ``widening``: the type changes allowed (pure);
* ``projection``: which physical column feeds each output column (pure);
* ``changes``: the schema change rules applied to a stored schema (pure);
* ``update``: ``UpdateSchema``, the ``with t.update_schema() as u:`` builder, one commit per block;
* ``merge``: ``merge_schema`` for writes (Delta's ``mergeSchema``).
"""

from __future__ import annotations

from .field_ids import arrow_field_id, arrow_with_ids, fresh_ids
from .projection import ReadProjection, resolve

__all__ = ["ReadProjection", "arrow_field_id", "arrow_with_ids", "fresh_ids", "resolve"]
