"""``DeletionVectorRef``: where one segment's deletion vector lives.

The one descriptor both sides of the lineage/visibility wall use: the log stores it per
segment (``SetDeletionVector``), the visibility package writes and loads DVs through it.
Immutable, so it is also the cache key of a loaded DV.

Exactly one of ``inline`` (base64 of the framed blob, for small DVs that ride in the log)
and ``path`` (a DV file, with the blob at ``offset``/``size``) is set."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .paths import safe_path_value


class DeletionVectorRef(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    cardinality: int = Field(ge=0)
    inline: str | None = None
    path: str | None = None
    offset: int = Field(default=0, ge=0)
    size: int = Field(default=0, ge=0)

    @field_validator("path")
    @classmethod
    def _safe(cls, v: str | None) -> str | None:
        return None if v is None else safe_path_value(v)

    @model_validator(mode="after")
    def _one_location(self) -> DeletionVectorRef:
        if (self.inline is None) == (self.path is None):
            raise ValueError("a deletion vector needs exactly one of 'inline' and 'path'")
        return self
