"""The schema change rules, applied to a stored (JSON) schema with field ids — pure functions.

Each change returns a new schema and never changes its input; a change that breaks a rule is a
``SchemaEvolutionError`` naming the column and the rule. ``UpdateSchema`` and ``merge_schema``
apply them; the log only ever sees the resulting schema.

Paths are dotted (``address.city``): each part names a struct field, matched case-insensitively
as Spark matches column names. A field inside an array or map of structs is reached through the
element, key or value (``items.element.price``, ``attrs.value.unit``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from mvtable.errors import SchemaEvolutionError
from mvtable.lineage.schema_ids import FIELD_ID_KEY, field_id, highest_id, with_ids

from .widening import can_widen, widening_rule

__all__ = ["EvolvingSchema"]

RESERVED_PREFIX = "_mv_"
COMMENT_KEY = "comment"  # Spark's key for a column's doc


@dataclass
class EvolvingSchema:
    """A schema being changed: the document, the highest field id assigned, the primary key, and what changed."""

    doc: dict[str, Any]
    last_field_id: int
    primary_key: tuple[str, ...] = ()
    changes: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, doc: dict[str, Any], *, last_field_id: int, primary_key: tuple[str, ...]) -> EvolvingSchema:
        """Start from a stored schema (ids by position for one stored before ids)."""
        numbered = copy.deepcopy(with_ids(doc))
        return cls(numbered, max(last_field_id, highest_id(numbered)), tuple(primary_key))

    # -- finding fields ---------------------------------------------------------------------
    def _locate(self, path: str) -> tuple[dict[str, Any], int, list[str]]:
        """(the struct holding the field at ``path``, its index there, the path's parts in the schema's spelling).

        Raises:
            SchemaEvolutionError: no such field."""
        parts = _split(path)
        struct: dict[str, Any] = self.doc
        spelled: list[str] = []
        k = 0
        while True:
            i = _index(struct, parts[k])
            if i is None:
                where = f"struct {'.'.join(spelled)}" if spelled else "the table"
                raise SchemaEvolutionError(f"column {path!r}: {where} has no field {parts[k]!r} (rule: the column must exist)")
            spelled.append(struct["fields"][i]["name"])
            k += 1
            if k == len(parts):
                return struct, i, spelled
            struct, k = _descend(struct["fields"][i]["type"], parts, k, path, spelled)

    def _struct_at(self, parts: list[str], path: str) -> dict[str, Any]:
        """The struct that ``parts`` name (the table itself for none), through array elements and map keys/values.

        Raises:
            SchemaEvolutionError: a part names no field, or the path ends on something other than a struct."""
        struct: dict[str, Any] = self.doc
        spelled: list[str] = []
        k = 0
        while k < len(parts):
            i = _index(struct, parts[k])
            if i is None:
                where = f"struct {'.'.join(spelled)}" if spelled else "the table"
                raise SchemaEvolutionError(f"column {path!r}: {where} has no field {parts[k]!r} (rule: the column must exist)")
            spelled.append(struct["fields"][i]["name"])
            t, k = _step_over_containers(struct["fields"][i]["type"], parts, k + 1, spelled)
            struct = _struct_of(t, path)
        return struct

    def _is_key(self, spelled: list[str]) -> bool:
        return len(spelled) == 1 and spelled[0].lower() in {k.lower() for k in self.primary_key}

    # -- changes ------------------------------------------------------------------------------
    def add_column(self, path: str, type_json: Any, *, doc: str | None = None) -> None:
        """Add a nullable field at ``path`` (a dotted path adds to a struct); old rows read null.

        Raises:
            SchemaEvolutionError: the name is taken or reserved, or the parent is no struct."""
        parts = _split(path)
        name = parts[-1]
        parent = self._struct_at(parts[:-1], path)
        if len(parts) == 1:
            _check_not_reserved(name, path)
        if _index(parent, name) is not None:
            raise SchemaEvolutionError(
                f"column {path!r}: a field named {parent['fields'][_index(parent, name)]['name']!r} exists already "
                "(rule: names are unique, case-insensitively); rename or drop it first"
            )
        metadata: dict[str, Any] = {FIELD_ID_KEY: self._next_id()}
        if doc is not None:
            metadata[COMMENT_KEY] = doc
        parent["fields"].append({"name": name, "type": self._number(type_json), "nullable": True, "metadata": metadata})
        self.changes.append(f"add {path}")

    def rename_column(self, path: str, new_name: str) -> None:
        """Give the field at ``path`` the name ``new_name`` (its id, and so its data, stay); a key column renames the key.

        Raises:
            SchemaEvolutionError: no such field, or the new name is taken, reserved or dotted."""
        if not isinstance(new_name, str) or not new_name or "." in new_name:
            raise SchemaEvolutionError(
                f"column {path!r}: new name {new_name!r} must be a non-empty name without dots (rule: a rename keeps the field where it is)"
            )
        struct, i, spelled = self._locate(path)
        if struct is self.doc:
            _check_not_reserved(new_name, path)
        clash = _index(struct, new_name)
        if clash is not None and clash != i:
            raise SchemaEvolutionError(
                f"column {path!r}: cannot rename to {new_name!r}, a field named {struct['fields'][clash]['name']!r} exists "
                "(rule: names are unique, case-insensitively)"
            )
        old = struct["fields"][i]["name"]
        struct["fields"][i] = {**struct["fields"][i], "name": new_name}
        if self._is_key(spelled):
            self.primary_key = tuple(new_name if k.lower() == old.lower() else k for k in self.primary_key)
        self.changes.append(f"rename {'.'.join(spelled)} to {new_name}")

    def drop_column(self, path: str) -> None:
        """Remove the field at ``path``; its id is never used again, so its values never come back.

        Raises:
            SchemaEvolutionError: no such field, a key column, or the last field of the table or of a struct."""
        struct, i, spelled = self._locate(path)
        if self._is_key(spelled):
            raise SchemaEvolutionError(f"column {path!r} is a primary-key column (rule: key columns cannot be dropped)")
        if len(struct["fields"]) == 1:
            what = "the table" if struct is self.doc else f"struct {'.'.join(spelled[:-1])}"
            raise SchemaEvolutionError(f"column {path!r} is the last field of {what} (rule: a struct keeps at least one field)")
        del struct["fields"][i]
        self.changes.append(f"drop {'.'.join(spelled)}")

    def update_column(self, path: str, type_json: Any) -> None:
        """Widen the field at ``path`` to ``type_json``.

        Raises:
            SchemaEvolutionError: no such field, a key column, or a change that is no widening."""
        struct, i, spelled = self._locate(path)
        f = struct["fields"][i]
        if f["type"] == type_json:
            return
        if self._is_key(spelled):
            raise SchemaEvolutionError(f"column {path!r} is a primary-key column (rule: key columns keep their type)")
        if not can_widen(f["type"], type_json):
            raise SchemaEvolutionError(
                f"column {path!r}: cannot change {_name(f['type'])} to {_name(type_json)} (rule: {widening_rule()})"
            )
        struct["fields"][i] = {**f, "type": type_json}
        self.changes.append(f"widen {'.'.join(spelled)} to {_name(type_json)}")

    def make_optional(self, path: str) -> None:
        """Let the field at ``path`` hold nulls.

        Raises:
            SchemaEvolutionError: no such field, or a key column (keys are never null)."""
        struct, i, spelled = self._locate(path)
        if self._is_key(spelled):
            raise SchemaEvolutionError(f"column {path!r} is a primary-key column (rule: key columns are never null)")
        if not struct["fields"][i].get("nullable", True):
            struct["fields"][i] = {**struct["fields"][i], "nullable": True}
            self.changes.append(f"make {'.'.join(spelled)} optional")

    # -- ids ----------------------------------------------------------------------------------
    def _next_id(self) -> int:
        self.last_field_id += 1
        return self.last_field_id

    def _number(self, t: Any) -> Any:
        """A new field's type with fresh ids on every struct field in it."""
        if not isinstance(t, dict):
            return t
        kind = t.get("type")
        if kind == "struct":
            fields = []
            for f in t["fields"]:
                meta = {k: v for k, v in (f.get("metadata") or {}).items() if k != FIELD_ID_KEY}
                fields.append({**f, "nullable": True, "metadata": {**meta, FIELD_ID_KEY: self._next_id()}})
            return {**t, "fields": [{**f, "type": self._number(f["type"])} for f in fields]}
        if kind == "array":
            return {**t, "elementType": self._number(t["elementType"])}
        if kind == "map":
            return {**t, "keyType": self._number(t["keyType"]), "valueType": self._number(t["valueType"])}
        return t


def _split(path: str) -> list[str]:
    if not isinstance(path, str) or not path or any(not p for p in path.split(".")):
        raise SchemaEvolutionError(f"column {path!r}: a column is named by a non-empty dotted path such as 'address.city'")
    return path.split(".")


def _index(struct: dict[str, Any], name: str) -> int | None:
    for i, f in enumerate(struct.get("fields", ())):
        if f["name"].lower() == name.lower():
            return i
    return None


def _descend(t: Any, parts: list[str], k: int, path: str, spelled: list[str]) -> tuple[dict[str, Any], int]:
    """The struct ``parts[k:]`` goes on into from a field of type ``t``, stepping over ``element``/``key``/``value`` of arrays and maps."""
    t, k = _step_over_containers(t, parts, k, spelled)
    if not isinstance(t, dict) or t.get("type") != "struct" or k == len(parts):
        raise SchemaEvolutionError(f"column {path!r}: {'.'.join(spelled)} is not a struct (rule: nested fields live in structs)")
    return t, k


def _step_over_containers(t: Any, parts: list[str], k: int, spelled: list[str]) -> tuple[Any, int]:
    """``t`` after the ``element`` / ``key`` / ``value`` steps of ``parts[k:]`` into arrays and maps, and the next part."""
    while isinstance(t, dict) and t.get("type") in ("array", "map") and k < len(parts):
        step = parts[k].lower()
        if t["type"] == "array" and step == "element":
            t = t["elementType"]
        elif t["type"] == "map" and step in ("key", "value"):
            t = t["keyType" if step == "key" else "valueType"]
        else:
            break
        spelled.append(step)
        k += 1
    return t, k


def _struct_of(t: Any, path: str) -> dict[str, Any]:
    if isinstance(t, dict) and t.get("type") == "struct":
        return t
    raise SchemaEvolutionError(
        f"column {path!r}: its parent is not a struct (rule: nested fields live in structs; a struct inside an array or "
        "map is reached through element, key or value, e.g. 'items.element.price')"
    )


def _check_not_reserved(name: str, path: str) -> None:
    if name.lower().startswith(RESERVED_PREFIX):
        raise SchemaEvolutionError(
            f"column {path!r}: the name {name!r} starts with {RESERVED_PREFIX!r}, which mvtable reserves for the columns it "
            "adds to rows (rule: no column takes a reserved name)"
        )


def _name(t: Any) -> str:
    from ..schema import arrow_type_name

    return arrow_type_name(t)


def field_ids_of(doc: dict[str, Any]) -> list[int]:
    """Every field id of a stored schema (for tests and tools)."""
    from mvtable.lineage.schema_ids import iter_fields

    return [fid for _, f in iter_fields(doc) if (fid := field_id(f)) is not None]
