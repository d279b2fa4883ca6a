"""A worker thread that handles only the newest of the values given to it.

The queue manager hands it work that each scheduling pass makes again (the scores to save, the
start times to estimate): values submitted while the worker is busy replace each other, so a
burst of passes costs one round of work, never a backlog.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class NewestOnly(Generic[T]):
    def __init__(self, name: str, work: Callable[[T], None]) -> None:
        """Run `work(value)` in a daemon thread named `name`, on the newest value submitted."""
        self._work = work
        self._latest: T | None = None
        self._ready = threading.Condition()
        threading.Thread(target=self._run, name=name, daemon=True).start()

    def submit(self, value: T) -> None:
        with self._ready:
            self._latest = value
            self._ready.notify()

    def _run(self) -> None:
        while True:
            with self._ready:
                while self._latest is None:
                    self._ready.wait()
                value, self._latest = self._latest, None
            self._work(value)
