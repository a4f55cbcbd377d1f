"""moto on loopback: ``python -m moto.server -H 127.0.0.1 -p PORT`` with the test
interpreter (``moto[server]``, in the ``test`` extra).

moto names the failed condition of ``If-None-Match: *``, so s3fs raises
``FileExistsError``; it checks the condition without a lock (check-then-act in a threaded
server), so it shows the protocol's answers but cannot prove atomicity (SeaweedFS can)."""

from __future__ import annotations

import os
import sys

from .processes import free_port, short_tempdir
from .s3_server import STARTUP_TIMEOUT_S, S3Server, ServerUnavailable, launch, retry_on_port_clash


def start_moto(timeout: float = STARTUP_TIMEOUT_S) -> S3Server:
    """A moto server on a free loopback port (credentials ``testing``/``testing``)."""
    try:
        import moto.server  # noqa: F401
        import werkzeug  # noqa: F401  (moto[server])
    except ImportError as exc:
        raise ServerUnavailable(f'moto server is not installed (pip install "moto[server]"): {exc}') from exc

    def once() -> S3Server:
        port = free_port()
        return launch(
            "moto",
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            workdir=short_tempdir("mvtm-"),
            env={**os.environ, "MOTO_PORT": str(port), "PYTHONUNBUFFERED": "1"},
            port=port,
            key="testing",
            secret="testing",
            timeout=timeout,
        )

    return retry_on_port_clash(once)
