"""Reader pins: lifecycle, expiry, and conservative handling of unreadable pin files."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass

import pytest

from mvtable.errors import CorruptPinError, PinError, PinExpiredError, PinNotFoundError
from mvtable.visibility import pins
from mvtable.visibility.pins import PIN_DIR

NOW = 1_700_000_000_000  # ms


@dataclass(frozen=True)
class Info:
    name: str
    size: int
    mtime: float | None


class MemoryStore:
    """The duck-typed store pins need, with modification times the test controls."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.mtimes: dict[str, float | None] = {}
        self.clock_s = NOW / 1000

    def read(self, path: str) -> bytes:
        try:
            return self.files[path]
        except KeyError:
            raise FileNotFoundError(path) from None

    def write(self, path: str, data: bytes) -> None:
        self.files[path] = bytes(data)
        self.mtimes[path] = self.clock_s

    def exists(self, path: str) -> bool:
        return path in self.files

    def list(self, folder: str) -> list[Info]:
        prefix = folder.rstrip("/") + "/"
        return [
            Info(p[len(prefix) :], len(d), self.mtimes[p])
            for p, d in self.files.items()
            if p.startswith(prefix) and "/" not in p[len(prefix) :]
        ]

    def delete(self, paths) -> None:
        for p in paths:
            self.files.pop(p, None)
            self.mtimes.pop(p, None)


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


def test_pin_writes_a_validated_file_and_release_removes_it(store):
    pin_id = pins.pin(store, 7, ttl_s=60, owner="reader-1", now_ms=NOW)
    doc = json.loads(store.read(f"{PIN_DIR}/{pin_id}.json"))
    assert doc == {"format": 1, "version": 7, "created_ms": NOW, "expires_ms": NOW + 60_000, "owner": "reader-1"}
    p = pins.read_pin(store, pin_id)
    assert (p.id, p.version, p.expires_ms, p.owner, p.readable) == (pin_id, 7, NOW + 60_000, "reader-1", True)
    assert [x.id for x in pins.live_pins(store, now_ms=NOW)] == [pin_id]
    pins.release(store, pin_id)
    assert pins.live_pins(store, now_ms=NOW) == []
    pins.release(store, pin_id)  # releasing twice is fine
    with pytest.raises(PinNotFoundError):
        pins.read_pin(store, pin_id)


def test_live_pins_are_ordered_by_version_and_expire(store):
    a = pins.pin(store, 9, ttl_s=10, now_ms=NOW)
    b = pins.pin(store, 3, ttl_s=100, now_ms=NOW)
    assert [p.version for p in pins.live_pins(store, now_ms=NOW)] == [3, 9]
    assert pins.scan_pins(store, now_ms=NOW).min_version == 3
    # a expires at NOW+10s exactly: expired at that instant
    assert [p.id for p in pins.live_pins(store, now_ms=NOW + 10_000)] == [b]
    assert pins.expired_pins(store, now_ms=NOW + 10_000) == [f"{PIN_DIR}/{a}.json"]
    assert sorted(pins.expired_pins(store, now_ms=NOW + 100_000)) == sorted([f"{PIN_DIR}/{a}.json", f"{PIN_DIR}/{b}.json"])
    assert pins.scan_pins(store, now_ms=NOW + 100_000).min_version is None


def test_extend_moves_expiry_forward_but_never_back(store):
    pin_id = pins.pin(store, 1, ttl_s=60, now_ms=NOW)
    p = pins.extend(store, pin_id, 120, now_ms=NOW + 30_000)
    assert p.expires_ms == NOW + 150_000
    assert pins.read_pin(store, pin_id).expires_ms == NOW + 150_000
    assert pins.read_pin(store, pin_id).created_ms == NOW
    p = pins.extend(store, pin_id, 1, now_ms=NOW + 40_000)  # would shorten: kept
    assert p.expires_ms == NOW + 150_000


def test_shorten_moves_expiry_back_but_never_forward(store):
    pid = pins.pin(store, 3, ttl_s=3600, owner="spark", now_ms=1_000)
    cut = pins.shorten(store, pid, 60, now_ms=2_000)
    assert cut is not None and cut.expires_ms == 62_000 and cut.owner == "spark" and cut.version == 3
    assert pins.shorten(store, pid, 600, now_ms=3_000).expires_ms == 62_000  # never later than it was
    assert pins.extend(store, pid, 3600, now_ms=4_000).expires_ms == 3_604_000  # extend undoes a cut
    assert pins.shorten(store, pid, 1, now_ms=4_000_000) is None  # expired: nothing to shorten
    pins.release(store, pid)
    assert pins.shorten(store, pid, 1) is None  # gone: nothing to shorten


def test_an_expired_or_missing_pin_cannot_be_extended(store):
    pin_id = pins.pin(store, 1, ttl_s=1, now_ms=NOW)
    with pytest.raises(PinExpiredError):
        pins.extend(store, pin_id, 60, now_ms=NOW + 1_000)
    with pytest.raises(PinNotFoundError):
        pins.extend(store, "0123abcd", 60, now_ms=NOW)


@pytest.mark.parametrize("ttl", [0, -1, float("nan"), True, "1h"])
def test_bad_ttl_is_refused(store, ttl):
    with pytest.raises(PinError):
        pins.pin(store, 1, ttl_s=ttl, now_ms=NOW)
    assert store.files == {}


@pytest.mark.parametrize("version", [-1, True, 1.5, None])
def test_bad_version_is_refused(store, version):
    with pytest.raises(PinError):
        pins.pin(store, version, ttl_s=1)


@pytest.mark.parametrize("bad_id", ["../x", "a/b", "", "x.json", "a b", "x" * 200])
def test_pin_ids_cannot_escape_the_pin_folder(store, bad_id):
    with pytest.raises(PinError):
        pins.release(store, bad_id)
    with pytest.raises(PinError):
        pins.read_pin(store, bad_id)


CORRUPT = [
    b"not json",
    b"[1, 2]",
    b'{"format": 2, "version": 1, "created_ms": 1, "expires_ms": 2, "owner": ""}',
    b'{"format": 1, "version": -1, "created_ms": 1, "expires_ms": 2, "owner": ""}',
    b'{"format": 1, "version": true, "created_ms": 1, "expires_ms": 2, "owner": ""}',
    b'{"format": 1, "version": "3", "created_ms": 1, "expires_ms": 2, "owner": ""}',
    b'{"format": 1, "version": 1, "created_ms": 5, "expires_ms": 2, "owner": ""}',
    b'{"format": 1, "version": 1, "created_ms": 1, "expires_ms": 2, "owner": "", "extra": 1}',
    b'{"format": 1, "created_ms": 1, "expires_ms": 2}',
    b"\xff\xfe",
]


@pytest.mark.parametrize("data", CORRUPT)
def test_an_unreadable_pin_pins_version_zero_until_it_is_old(store, data, caplog):
    good = pins.pin(store, 12, ttl_s=10_000, now_ms=NOW)
    store.write(f"{PIN_DIR}/badpin.json", data)
    with pytest.raises(CorruptPinError):
        pins.read_pin(store, "badpin")
    with caplog.at_level(logging.WARNING, logger="mvtable.visibility"):
        live = pins.live_pins(store, now_ms=NOW + 1_000, unreadable_ttl_s=60)
    assert [(p.id, p.version, p.readable) for p in live] == [("badpin", 0, False), (good, 12, True)]
    assert "badpin.json" in caplog.text
    assert pins.expired_pins(store, now_ms=NOW + 1_000, unreadable_ttl_s=60) == []
    # older than the TTL by modification time: it no longer pins anything, and GC may delete it
    later = NOW + 60_000
    assert [p.id for p in pins.live_pins(store, now_ms=later, unreadable_ttl_s=60)] == [good]
    assert pins.expired_pins(store, now_ms=later, unreadable_ttl_s=60) == [f"{PIN_DIR}/badpin.json"]


def test_an_unreadable_pin_without_mtime_never_expires_by_age(store):
    store.write(f"{PIN_DIR}/badpin.json", b"{}")
    store.mtimes[f"{PIN_DIR}/badpin.json"] = None
    far = NOW + 10**12
    assert [p.version for p in pins.live_pins(store, now_ms=far, unreadable_ttl_s=1)] == [0]
    assert pins.expired_pins(store, now_ms=far, unreadable_ttl_s=1) == []


def test_stray_files_pin_nothing_and_are_tidied_when_old(store):
    tmp = f"{PIN_DIR}/abc.json.1234.tmp"
    store.write(tmp, b"half a pin")
    assert pins.live_pins(store, now_ms=NOW) == []
    assert pins.expired_pins(store, now_ms=NOW, unreadable_ttl_s=60) == []
    assert pins.expired_pins(store, now_ms=NOW + 61_000, unreadable_ttl_s=60) == [tmp]


def test_a_pin_released_while_scanning_is_skipped(store):
    pin_id = pins.pin(store, 1, ttl_s=60, now_ms=NOW)

    class Racing(MemoryStore):
        def read(self, path):
            raise FileNotFoundError(path)

    racing = Racing()
    racing.files, racing.mtimes = store.files, store.mtimes
    assert pins.scan_pins(racing, now_ms=NOW).live == []
    assert [p.id for p in pins.live_pins(store, now_ms=NOW)] == [pin_id]


def test_pins_on_local_disk(tmp_path):
    from mvtable.storage import LocalFileIO  # the real FileIO satisfies the duck type

    io = LocalFileIO(str(tmp_path))
    pin_id = pins.pin(io, 4, ttl_s=3600)
    assert os.path.exists(tmp_path / "_mvtable" / "pins" / f"{pin_id}.json")
    assert [p.version for p in pins.live_pins(io)] == [4]
    (tmp_path / "_mvtable" / "pins" / "junk.json").write_bytes(b"oops")
    old = os.path.getmtime(tmp_path / "_mvtable" / "pins" / "junk.json") - 7200
    os.utime(tmp_path / "_mvtable" / "pins" / "junk.json", (old, old))
    assert [p.version for p in pins.live_pins(io, unreadable_ttl_s=3600)] == [4]
    assert pins.expired_pins(io, unreadable_ttl_s=3600) == [f"{PIN_DIR}/junk.json"]
    pins.release(io, pin_id)
    assert pins.live_pins(io) == []
