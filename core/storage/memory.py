"""``memory://`` tables, for tests and notebooks: one process only.

fsspec's memory filesystem has no conditional write, so ``put_if_absent`` holds a
process-wide lock."""

from __future__ import annotations

import threading
from typing import Any

from .fsspec import FsspecFileIO

_lock = threading.Lock()


class MemoryFileIO(FsspecFileIO):
    @property
    def fs(self) -> Any:
        return self._fs  # one process: nothing to rebuild after a fork

    def put_if_absent(self, path: str, data: bytes, *, durable: bool = True) -> bool:
        target = self._p(path)
        with _lock:
            if self.fs.exists(target):
                return False
            self.fs.pipe_file(target, data)
            return True

    def exists(self, path: str) -> bool:
        return bool(self.fs.exists(self._p(path)))

    def _ls(self, folder: str) -> list[dict[str, Any]]:
        return list(self.fs.ls(self._p(folder), detail=True))
