"""Value types for argparse options shared by qsim and its subcommands: each refuses a bad value
with a message that names it, and argparse adds the option."""

from __future__ import annotations

import argparse

from cobaltlite.moments import parse_moment


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be greater than zero")
    return value


def number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def positive_float(text: str) -> float:
    value = number(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be greater than zero")
    return value


def non_negative_float(text: str) -> float:
    value = number(text)
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number, zero or more")
    return value


def rate(text: str) -> float:
    """A probability: 0 to 1."""
    value = number(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} must be between 0 and 1")
    return value


def moment(text: str) -> float:
    """Epoch seconds or an ISO date/time (UTC unless it says otherwise)."""
    try:
        return parse_moment(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
