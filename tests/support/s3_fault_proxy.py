"""An HTTP proxy on loopback that sits in front of an S3 server and injects the faults an
object store shows in production, on a deterministic seeded schedule.

Clients talk to the proxy as if it were the server (path-style URLs; SigV4 still checks
out because the proxy forwards the signed request unchanged except for hop-by-hop
headers, which are not signed). Each request is classified as ``PUT`` / ``GET`` (and
HEAD) / ``LIST`` / ``DELETE`` with its object key (a listing's key is its prefix, and a
``DeleteObjects`` batch, whose keys are in its body, has the empty key), and
the first :class:`FaultRule` that matches decides its fate (``FAULTS``):

* ``error500`` / ``slowdown`` — answered 500 ``InternalError`` / 503 ``SlowDown`` by the
  proxy; nothing reaches the server.
* ``reset`` — the connection is reset; nothing reaches the server.
* ``timeout`` — the proxy holds the connection past the client's read timeout and then
  resets it; nothing reaches the server.
* ``slow`` — the request body trickles to the server over ``slow_s``; the answer arrives.
* ``lost`` — forwarded (it lands), then the connection is reset instead of the answer.
* ``lost500`` — forwarded (it lands), then answered 500 instead of the server's answer.
* ``late`` — held past the client's read timeout, then forwarded (it lands after the
  client gave up on it).

The schedule: a rule either plays a script (the next matching requests get these faults,
in order) or draws from ``random.Random(seed)`` with a rate, optionally only in periodic
outage windows. Requests arrive in whatever order the clients send them, but the sequence
of draws is fixed by the seed.
``stop()`` closes every connection and waits for every handler, so nothing held lands
after it. Standard library only; the tests' fixture is ``s3_fault_proxy``."""

from __future__ import annotations

import collections
import random
import re
import socket
import struct
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO
from urllib.parse import parse_qs, unquote, urlsplit

from .processes import LOOPBACK
from .s3_server import REGION, S3Endpoint

FAULTS = ("error500", "slowdown", "reset", "timeout", "slow", "lost", "lost500", "late")
# faults after which the request has reached the server (it may have been applied)
FORWARDED = frozenset({"slow", "lost", "lost500", "late"})
OPS = frozenset({"PUT", "GET", "LIST", "DELETE", "OTHER"})
_HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "expect", "te", "upgrade"}


@dataclass
class FaultRule:
    """Which requests a rule takes (``ops``, ``key`` regex searched in the object key) and
    what it does to them: the next ``len(script)`` matches get ``script``'s faults in order
    (``None`` entries pass), after that each match gets one of ``kinds`` with probability
    ``rate``. ``window=(period_s, length_s)`` makes it an outage: the rule takes requests
    only during the first ``length_s`` of every ``period_s`` (counted from ``set_rules``)."""

    ops: frozenset[str] = OPS
    key: str = ""
    rate: float = 0.0
    kinds: Sequence[str] = ()
    script: list[str | None] = field(default_factory=list)
    window: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        self.ops = frozenset(o.upper() for o in self.ops)
        bad = [k for k in [*self.kinds, *(s for s in self.script if s)] if k not in FAULTS] + sorted(self.ops - OPS)
        if bad:
            raise ValueError(f"unknown faults/operations {bad}; faults are {FAULTS}, operations {sorted(OPS)}")
        if self.rate and not self.kinds:
            raise ValueError("a rule with a rate needs kinds to draw from")
        self._key = re.compile(self.key)

    def matches(self, op: str, key: str, elapsed_s: float) -> bool:
        if self.window is not None and elapsed_s % self.window[0] >= self.window[1]:
            return False
        return op in self.ops and bool(self._key.search(key))


@dataclass
class Event:
    """One request, recorded when its fate is decided."""

    op: str
    key: str
    fault: str | None  # None: passed through untouched
    status: int | None = None  # the server's answer, once one came back to the proxy


class FaultProxy:
    """A running proxy in front of the server of ``real`` (one bucket); see the module
    docstring. ``endpoint`` is that bucket through the proxy, ``real`` the bucket itself.
    ``hold_s`` is how long ``timeout`` holds a request and ``late_s`` how long ``late`` does
    (``hold_s`` when ``None``; set both above the client's read timeout; ``release_late`` ends it sooner), ``slow_s`` how long
    a ``slow`` body trickles."""

    def __init__(
        self, real: S3Endpoint, *, seed: int = 0, hold_s: float = 2.0, late_s: float | None = None, slow_s: float = 0.5
    ) -> None:
        parts = urlsplit(real.endpoint_url)
        assert parts.hostname and parts.port, real.endpoint_url
        self.real = real
        self.upstream = (parts.hostname, parts.port)
        self.hold_s = hold_s
        self.late_s = late_s
        self.slow_s = slow_s
        self.rules: list[FaultRule] = []
        self._since = time.monotonic()
        self.events: list[Event] = []
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._late_released = threading.Event()
        self._threads: set[threading.Thread] = set()
        self._conns: dict[socket.socket, BinaryIO | None] = {}
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((LOOPBACK, 0))
        self._listener.listen(128)
        self.port: int = self._listener.getsockname()[1]
        self.url = f"http://{LOOPBACK}:{self.port}"
        self.endpoint = S3Endpoint(f"{real.name}+faults", self.url, real.key, real.secret, real.bucket)
        self._acceptor = threading.Thread(target=self._accept_loop, name="s3-fault-proxy", daemon=True)
        self._acceptor.start()

    # -- configuration -----------------------------------------------------------------
    def set_rules(self, rules: Iterable[FaultRule], *, seed: int | None = None) -> None:
        """Replace the schedule (an empty list passes everything through); ``late`` holds again."""
        with self._lock:
            self.rules = list(rules)
            self._since = time.monotonic()
            self._late_released.clear()
            if seed is not None:
                self._rng = random.Random(seed)

    def clear(self) -> None:
        self.set_rules([])

    def release_late(self) -> None:
        """Let the ``late`` requests held now go on at once, rather than after ``late_s``: a
        test sets ``late_s`` as an upper bound and releases them once the client gave up."""
        self._late_released.set()

    def counts(self) -> collections.Counter[str]:
        """How many requests got each fault (``"pass"``: none)."""
        with self._lock:
            return collections.Counter(e.fault or "pass" for e in self.events)

    def _decide(self, op: str, key: str) -> Event:
        with self._lock:
            fault = None
            elapsed = time.monotonic() - self._since
            for rule in self.rules:
                if rule.matches(op, key, elapsed):
                    if rule.script:
                        fault = rule.script.pop(0)
                    elif rule.rate and self._rng.random() < rule.rate:
                        fault = self._rng.choice(list(rule.kinds))
                    break
            event = Event(op, key, fault)
            self.events.append(event)
            return event

    def storage_options(self, *, timeout_s: float, attempts: int | None = None) -> dict[str, Any]:
        """s3fs options for the bucket through the proxy, with client timeouts short enough
        for ``timeout`` / ``late`` faults to be seen as timeouts. botocore's own retries stay
        as in production unless ``attempts`` caps the tries per request (1: none, so that a
        script meets exactly the requests it names; s3fs's own retries are a class
        attribute: set ``fs.retries`` on the instance)."""
        config: dict[str, Any] = {"connect_timeout": timeout_s, "read_timeout": timeout_s}
        if attempts is not None:
            config["retries"] = {"total_max_attempts": attempts, "mode": "standard"}
        return {
            **self.endpoint.storage_options(),
            "skip_instance_cache": True,
            "config_kwargs": config,
            "client_kwargs": {"endpoint_url": self.url, "region_name": REGION},
        }

    # -- lifecycle ---------------------------------------------------------------------
    def stop(self) -> None:
        """Close every connection and wait for every handler: nothing held lands later."""
        self._stopping.set()
        try:  # shutdown wakes the blocked accept(); close alone does not on Linux
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        self._acceptor.join(timeout=5)
        with self._lock:
            conns, threads = list(self._conns), list(self._threads)
        for c in conns:  # wakes a handler blocked reading; it closes the socket itself
            try:
                c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for t in threads:
            t.join(timeout=30)
        alive = [t.name for t in threads if t.is_alive()]
        if alive:
            raise RuntimeError(f"fault proxy handlers still running after stop: {alive}")

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _accept_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            t = threading.Thread(target=self._serve, args=(conn,), name=f"s3-fault-proxy-{conn.fileno()}", daemon=True)
            with self._lock:
                if self._stopping.is_set():
                    _close(conn, None, reset=True)
                    return
                self._conns[conn] = None
                self._threads.add(t)
            t.start()

    # -- one client connection ---------------------------------------------------------
    def _serve(self, conn: socket.socket) -> None:
        reader = conn.makefile("rb")
        with self._lock:
            self._conns[conn] = reader
        try:
            while not self._stopping.is_set():
                request = _read_request(reader, conn)
                if request is None:
                    return
                if not self._handle(conn, reader, request):
                    return
        except (OSError, ValueError):
            pass
        finally:
            _close(conn, reader, reset=False)
            with self._lock:
                self._conns.pop(conn, None)
                self._threads.discard(threading.current_thread())

    def _handle(self, conn: socket.socket, reader: BinaryIO, request: _Request) -> bool:
        """Answer one request; ``False`` when the connection is done."""
        event = self._decide(*request.classify())
        fault = event.fault
        if fault in ("error500", "slowdown"):
            conn.sendall(_s3_error(503 if fault == "slowdown" else 500))
            return True
        if fault == "reset":
            _close(conn, reader, reset=True)
            return False
        if fault in ("timeout", "late"):
            held = self.late_s if fault == "late" and self.late_s is not None else self.hold_s
            self._hold(held, late=fault == "late")
            if fault == "timeout" or self._stopping.is_set():
                _close(conn, reader, reset=True)
                return False
        response = self._forward(request, slow=fault == "slow")
        event.status = response.status if response else None
        if fault in ("lost", "late") or response is None:
            _close(conn, reader, reset=True)
            return False
        if fault == "lost500":
            conn.sendall(_s3_error(500))
            return True
        conn.sendall(response.raw)
        return response.keep_alive

    def _hold(self, seconds: float, *, late: bool) -> None:
        """Hold a request ``seconds``, or until the proxy stops (or, ``late``, until ``release_late``)."""
        end = time.monotonic() + seconds
        while not self._stopping.is_set() and not (late and self._late_released.is_set()):
            left = end - time.monotonic()
            if left <= 0:
                return
            self._stopping.wait(min(left, 0.05))

    def _forward(self, request: _Request, *, slow: bool) -> _Response | None:
        """Send ``request`` to the server on a fresh connection and read its answer."""
        try:
            with socket.create_connection(self.upstream, timeout=60) as up:
                head = request.head_for_upstream()
                if slow and request.body:
                    up.sendall(head)
                    pieces = 8
                    step = max(1, len(request.body) // pieces + 1)
                    for i in range(0, len(request.body), step):
                        if self._stopping.wait(self.slow_s / pieces):
                            return None
                        up.sendall(request.body[i : i + step])
                else:
                    up.sendall(head + request.body)
                return _read_response(up.makefile("rb"), head_request=request.method == "HEAD")
        except OSError:
            return None


# --------------------------------------------------------------------------- HTTP framing


@dataclass
class _Request:
    method: str
    target: str
    version: str
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k.lower() == name), None)

    def classify(self) -> tuple[str, str]:
        """(operation, object key) of a path-style S3 request."""
        parts = urlsplit(self.target)
        path = unquote(parts.path).lstrip("/")
        _bucket, _, key = path.partition("/")
        query = parse_qs(parts.query, keep_blank_values=True)
        m = self.method
        if m == "DELETE" or (m == "POST" and "delete" in query):
            return "DELETE", key
        if m == "PUT" and key:
            return "PUT", key
        if m in ("GET", "HEAD") and key:
            return "GET", key
        if m == "GET":
            return "LIST", (query.get("prefix") or [""])[0]
        return "OTHER", key

    def head_for_upstream(self) -> bytes:
        lines = [f"{self.method} {self.target} {self.version}"]
        lines += [f"{k}: {v}" for k, v in self.headers if k.lower() not in _HOP_BY_HOP]
        lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


@dataclass
class _Response:
    status: int
    raw: bytes
    keep_alive: bool


def _read_head(reader: BinaryIO) -> tuple[str, list[tuple[str, str]]] | None:
    first = reader.readline(65537)
    while first in (b"\r\n", b"\n"):
        first = reader.readline(65537)
    if not first:
        return None
    headers = []
    while True:
        line = reader.readline(65537)
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.decode("latin-1").partition(":")
        headers.append((name.strip(), value.strip()))
    return first.decode("latin-1").rstrip("\r\n"), headers


def _read_body(reader: BinaryIO, headers: list[tuple[str, str]], *, until_close: bool) -> bytes:
    """The body exactly as framed on the wire (chunked bodies stay chunked)."""
    lower = {k.lower(): v for k, v in headers}
    if "chunked" in lower.get("transfer-encoding", "").lower():
        out = bytearray()
        while True:
            size_line = reader.readline(65537)
            if not size_line:
                raise OSError("connection closed inside a chunked body")
            out += size_line
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while True:  # trailers, up to the blank line
                    trailer = reader.readline(65537)
                    out += trailer
                    if trailer in (b"\r\n", b"\n", b""):
                        return bytes(out)
            out += _read_exact(reader, size + 2)
    if "content-length" in lower:
        return _read_exact(reader, int(lower["content-length"]))
    return reader.read() if until_close else b""


def _read_exact(reader: BinaryIO, n: int) -> bytes:
    data = reader.read(n)
    if len(data) != n:
        raise OSError(f"connection closed after {len(data)} of {n} bytes")
    return data


def _read_request(reader: BinaryIO, conn: socket.socket) -> _Request | None:
    head = _read_head(reader)
    if head is None:
        return None
    line, headers = head
    method, target, version = line.split(" ", 2)
    if any(k.lower() == "expect" and v.lower() == "100-continue" for k, v in headers):
        conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")  # the client waits for it before the body
    body = _read_body(reader, headers, until_close=False)
    return _Request(method, target, version, headers, body)


def _read_response(reader: BinaryIO, *, head_request: bool) -> _Response:
    head = _read_head(reader)
    if head is None:
        raise OSError("the server closed the connection without an answer")
    line, headers = head
    status = int(line.split(" ", 2)[1])
    lower = {k.lower() for k, _ in headers}
    no_body = head_request or status in (204, 304) or 100 <= status < 200
    framed = (
        no_body
        or "content-length" in lower
        or any(k.lower() == "transfer-encoding" and "chunked" in v.lower() for k, v in headers)
    )
    body = b"" if no_body else _read_body(reader, headers, until_close=True)
    kept = [(k, v) for k, v in headers if k.lower() not in _HOP_BY_HOP]
    if not framed:  # delimited by the close: the client must see the close too
        kept.append(("Connection", "close"))
    raw = ("\r\n".join([line] + [f"{k}: {v}" for k, v in kept]) + "\r\n\r\n").encode("latin-1") + body
    return _Response(status, raw, keep_alive=framed)


def _s3_error(status: int) -> bytes:
    code, message = {
        500: ("InternalError", "We encountered an internal error. Please try again."),
        503: ("SlowDown", "Please reduce your request rate."),
    }[status]
    reason = {500: "Internal Server Error", 503: "Service Unavailable"}[status]
    body = (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}</Message>'
        f"<RequestId>fault-proxy</RequestId></Error>"
    ).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/xml\r\nContent-Length: {len(body)}\r\n"
        f"x-amz-request-id: fault-proxy\r\n\r\n"
    )
    return head.encode("latin-1") + body


def _close(conn: socket.socket, reader: BinaryIO | None, *, reset: bool) -> None:
    """Close ``conn`` (and its reader, which keeps the descriptor open otherwise)."""
    try:
        if reset:  # SO_LINGER 0: the peer sees ECONNRESET, not a clean end of stream
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    for closable in (reader, conn):
        try:
            if closable is not None:
                closable.close()
        except OSError:
            pass
