"""A time budget for user code: a watchdog that interrupts a utility function that runs too long.

The watchdog raises `BudgetExceeded` inside the scoring thread (CPython's
PyThreadState_SetAsyncExc), which stops a pure-Python loop at its next bytecode. A function
blocked inside one C call (a sleep, a read) is interrupted only when that call returns; utility
functions are computations, and the loader gives them no I/O modules, so this is the case that
matters. The budget covers a whole pass of one policy, not each job.

The interrupt is raised again every INTERRUPT_REPEAT seconds until the work returns, so code
that survives one (a loop in a `finally` block) meets the next; once the work has returned, a
pending interrupt is cleared so it cannot fire in the caller.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

INTERRUPT_REPEAT = 0.05


class BudgetExceeded(BaseException):
    """Raised in the scoring thread when its time budget runs out.

    A BaseException, like KeyboardInterrupt, so that neither a utility function's own
    `except Exception` nor the per-job error handling of scoring can swallow it."""


def run_with_budget(work: Callable[[], T], seconds: float) -> T:
    """Run `work` in this thread; raise BudgetExceeded if it takes longer than `seconds`."""
    target = threading.get_ident()
    lock = threading.Lock()
    finished = False

    stop = threading.Event()

    def interrupt() -> None:
        if stop.wait(seconds):
            return
        while True:
            with lock:
                if finished:
                    return
                ctypes.pythonapi.PyThreadState_SetAsyncExc(
                    ctypes.c_ulong(target), ctypes.py_object(BudgetExceeded))
            if stop.wait(INTERRUPT_REPEAT):
                return

    watchdog = threading.Thread(target=interrupt, name="utility-watchdog", daemon=True)
    watchdog.start()
    try:
        return work()
    finally:
        with lock:
            finished = True
            # NULL clears an interrupt raised after the work's last bytecode.
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(target), None)
        stop.set()
