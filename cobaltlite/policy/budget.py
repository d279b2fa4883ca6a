"""A time budget for user code: a watchdog that interrupts a utility function that runs too long.

The watchdog raises `BudgetExceeded` inside the scoring thread (CPython's
PyThreadState_SetAsyncExc), which stops a pure-Python loop at its next bytecode. A function
blocked inside one C call (a sleep, a read) is interrupted only when that call returns; utility
functions are computations, and the loader gives them no I/O modules, so this is the case that
matters. The budget covers a whole pass of one policy, not each job.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class BudgetExceeded(BaseException):
    """Raised in the scoring thread when its time budget runs out.

    A BaseException, like KeyboardInterrupt, so that neither a utility function's own
    `except Exception` nor the per-job error handling of scoring can swallow it."""


def run_with_budget(work: Callable[[], T], seconds: float) -> T:
    """Run `work` in this thread; raise BudgetExceeded if it takes longer than `seconds`."""
    target = threading.get_ident()
    lock = threading.Lock()
    finished = False

    def interrupt() -> None:
        with lock:
            if not finished:
                ctypes.pythonapi.PyThreadState_SetAsyncExc(
                    ctypes.c_ulong(target), ctypes.py_object(BudgetExceeded))

    watchdog = threading.Timer(seconds, interrupt)
    watchdog.daemon = True
    watchdog.start()
    try:
        return work()
    finally:
        with lock:
            finished = True
        watchdog.cancel()
