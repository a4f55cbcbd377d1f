"""Why vacuum and GC kept what they kept.

The pins, the retention window, the grace period for unreferenced files, the log's checkpoints.

A maintenance run that frees nothing is indistinguishable from a broken one unless it says
what held it back, and the usual answer (a reader's pin that outlives the reader) has a
remedy only its owner's name makes possible (``mvtable pins PATH --release OWNER``). The
functions here only describe: they take what the run already planned with."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

from mvtable.visibility.pins import Pin


@dataclass(frozen=True)
class Hold:
    """One thing that kept a version's files.

    ``kind`` is ``pin``, ``retention``, ``grace`` or ``checkpoint``; a pin's hold also names it
    (``pin_id``, ``owner``, ``version``, ``expires_ms``)."""

    kind: str
    reason: str
    pin_id: str | None = None
    owner: str | None = None
    version: int | None = None
    expires_ms: int | None = None


def format_duration(seconds: float) -> str:
    """A duration as people write it (``7d``, ``1h 30m``, ``45s``, ``0s``).

    These are the units table properties and ``--retention`` take."""
    total = int(round(max(0.0, seconds)))
    if total == 0:
        return "0s" if seconds <= 0 else f"{seconds:.3g}s"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if total >= size:
            parts.append(f"{total // size}{unit}")
            total %= size
    return " ".join(parts[:2])


def _when(ms: int, now_ms: int) -> str:
    at = dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"{at}, in {format_duration((ms - now_ms) / 1000)}"


def pin_hold(pin: Pin, *, now_ms: int) -> Hold:
    owner = pin.owner or "an unnamed reader"
    return Hold(
        kind="pin",
        reason=f"pin {pin.id} of {owner!r} holds version {pin.version} until {_when(pin.expires_ms, now_ms)}",
        pin_id=pin.id,
        owner=pin.owner,
        version=pin.version,
        expires_ms=pin.expires_ms,
    )


def version_holds(pins: Iterable[Pin], *, retention_version: int, latest: int, retention_s: float, now_ms: int) -> list[Hold]:
    """The pins below the version retention alone would keep, and the retention window.

    The pins come each one, oldest first; the window only when it keeps more than the newest
    version."""
    holds = [
        pin_hold(p, now_ms=now_ms) for p in sorted(pins, key=lambda p: (p.version, p.expires_ms)) if p.version < retention_version
    ]
    if 0 <= retention_version < latest:
        holds.append(
            Hold(
                kind="retention",
                reason=f"versions {retention_version} to {latest} are inside the retention window "
                f"({format_duration(retention_s)}): the files they need stay",
                version=retention_version,
            )
        )
    return holds


def grace_hold(count: int, *, what: str, grace_s: float) -> list[Hold]:
    if not count:
        return []
    return [
        Hold(
            kind="grace",
            reason=f"{count} {what} that no commit names are younger than orphanGracePeriod "
            f"({format_duration(grace_s)}): a write may still be committing them",
        )
    ]


def checkpoint_hold(*, safe_version: int, checkpoint: int | None, interval: int) -> list[Hold]:
    if checkpoint is not None or safe_version < 0:
        return []
    return [
        Hold(
            kind="checkpoint",
            reason=f"the log keeps its files: no checkpoint at or below the safe version {safe_version} yet "
            f"(one is written every checkpointInterval={interval} commits)",
        )
    ]


def describe(holds: Iterable[Hold], *, limit: int = 10) -> list[str]:
    """Lines for people: each hold, pins of one owner folded after ``limit`` lines."""
    holds = list(holds)
    lines = [h.reason for h in holds[:limit]]
    if len(holds) > limit:
        lines.append(f"… and {len(holds) - limit} more (--json lists all; `mvtable pins PATH` lists the pins)")
    return lines
