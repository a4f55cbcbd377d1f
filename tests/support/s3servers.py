"""Old import name of the S3 support, kept while other branches still use it: the code
lives in ``s3_server``, ``s3_seaweed``, ``s3_moto``, ``process_gang`` and ``fixtures``."""

from __future__ import annotations

from .fixtures import moto_s3, moto_server, seaweedfs_s3, seaweedfs_server  # noqa: F401
from .process_gang import ProcessGang  # noqa: F401
from .processes import free_ports  # noqa: F401
from .s3_moto import start_moto  # noqa: F401
from .s3_seaweed import SEAWEED_KEY, SEAWEED_SECRET, find_weed, start_seaweedfs  # noqa: F401
from .s3_server import (  # noqa: F401
    REGION,
    STARTUP_TIMEOUT_S,
    S3Endpoint,
    S3Server,
    ServerStartError,
    ServerUnavailable,
)
