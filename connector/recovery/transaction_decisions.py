"""The decision object of a multi-table transaction: the one place it commits or aborts.

It lives in the **coordinator** table (the first table the transaction touched), at
``_mvtable/transactions/<transaction id>.json``, and is created put-if-absent: on local
disk by ``os.link``, on S3 by a conditional ``PutObject`` — the same primitive every commit
of the log uses, so a transaction needs no store the tables do not already need. Whoever
writes it first decides: the owner writing COMMITTED and a recoverer writing ABORTED for an
owner it believes dead race on one key, and both read back the winner.

Why the coordinator table rather than a separate shared root: every participant's prepared
entry records the coordinator's URI (``TransactionPrepare.decision_uri``), and a reader of
any participant can reach it with the storage options it already holds for its tables (or
the ones passed for the coordinator); a separate root would be one more location every
reader must be configured for, and could be vacuumed by nobody who owns it. Storage
options are never written to the log (they may hold credentials): the reader brings them.

A rollback of a committed transaction is decided the same way, by a second object
``<id>.rollback.json`` (ROLLED_BACK), so a rollback that dies half-way is finished by the
next one who looks. Both are sealed with a CRC-32 like a commit, and validated on read.
"""

from __future__ import annotations

import json
import time
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mvtable.errors import CorruptMetadataError
from mvtable.ids import Id
from mvtable.lineage.actions import seal, unseal
from mvtable.lineage.log import writer_identity
from mvtable.lineage.transactions import Outcome
from mvtable.storage import FileIO

__all__ = [
    "DECISION_DIR",
    "DECISION_FORMAT",
    "Decision",
    "decide",
    "decision_path",
    "read_decision",
    "rollback_path",
]

DECISION_DIR = "_mvtable/transactions"
DECISION_FORMAT = 1


class Decision(BaseModel):
    """The content of a decision object."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: Literal[1] = 1
    transaction_id: Id
    outcome: Outcome
    participants: tuple[str, ...] = ()
    timestamp_ms: int = Field(ge=0)
    writer: str = Field(default="", max_length=1000)
    reason: str | None = Field(default=None, max_length=1000)


def decision_path(transaction_id: str) -> str:
    return f"{DECISION_DIR}/{transaction_id}.json"


def rollback_path(transaction_id: str) -> str:
    return f"{DECISION_DIR}/{transaction_id}.rollback.json"


def _path(transaction_id: str, outcome: Outcome) -> str:
    return rollback_path(transaction_id) if outcome == Outcome.ROLLED_BACK else decision_path(transaction_id)


def read_decision(io: FileIO, transaction_id: str, *, rollback: bool = False) -> Decision | None:
    """The decision (or, with ``rollback``, the rollback decision) of a transaction; None while there is none.

    Raises:
        CorruptMetadataError: The object is damaged or not a decision of this transaction."""
    path = rollback_path(transaction_id) if rollback else decision_path(transaction_id)
    try:
        raw = io.read(path)
    except FileNotFoundError:
        return None
    source = f"{io.uri}/{path}"
    body, checked = unseal(raw, source=source)
    if not checked:
        raise CorruptMetadataError(source, "a transaction decision without its checksum: damaged or edited by hand")
    try:
        decision = Decision.model_validate_json(body, strict=False)
    except (ValidationError, ValueError) as exc:
        raise CorruptMetadataError(source, f"not a transaction decision ({str(exc).splitlines()[0]})") from None
    if decision.transaction_id != transaction_id or (decision.outcome == Outcome.ROLLED_BACK) != rollback:
        raise CorruptMetadataError(source, f"holds {decision.outcome} of transaction {decision.transaction_id}")
    return decision


def decide(
    io: FileIO, transaction_id: str, outcome: Outcome, *, participants: tuple[str, ...] = (), reason: str | None = None
) -> Decision:
    """Write ``outcome`` put-if-absent and return the decision that stands (ours, or the one that won the race).

    Raises:
        CorruptMetadataError: The object that won is damaged.
        StorageError: The store refused the write."""
    doc = Decision(
        transaction_id=transaction_id,
        outcome=outcome,
        participants=participants,
        timestamp_ms=int(time.time() * 1000),
        writer=writer_identity(),
        reason=reason,
    )
    io.put_if_absent(_path(transaction_id, outcome), seal(json.dumps(doc.model_dump(mode="json")).encode()))
    standing = read_decision(io, transaction_id, rollback=outcome == Outcome.ROLLED_BACK)
    if standing is None:  # pragma: no cover - a put that returned must be readable
        raise CorruptMetadataError(f"{io.uri}/{_path(transaction_id, outcome)}", "the decision vanished right after its write")
    return standing
