"""summary.json's text: `json.dumps(value, indent=2, sort_keys=True)`, byte for byte, faster.

With an indent the standard library encodes in pure Python, one generator step per value, and a
summary holds seed 000's series: six numbers per 30 minutes of the replay (280,000 on
SDSC-BLUE, a quarter of a second). Here a list of numbers goes through json's C encoder.
tests/test_summary_json.py compares the two on random data.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json.encoder import encode_basestring_ascii


def _float_text(value: float) -> str:
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    return float.__repr__(value)


_SCALARS: dict[type, Callable[[object], str]] = {
    str: encode_basestring_ascii,  # type: ignore[dict-item]
    int: int.__repr__,
    float: _float_text,  # type: ignore[dict-item]
    bool: lambda value: "true" if value else "false",
    type(None): lambda _: "null",
}


_NUMBERS = {int, float}


def _key_text(key: object) -> str:
    """A dictionary key as json writes it (keys that are not strings become strings)."""
    if isinstance(key, str):
        return key
    if key is True or key is False or key is None:
        return _SCALARS[type(key)](key)
    if isinstance(key, float):
        return _float_text(key)
    if isinstance(key, int):
        return int.__repr__(key)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def _text(value: object, level: int) -> str:
    scalar = _SCALARS.get(type(value))
    if scalar is not None:
        return scalar(value)
    if isinstance(value, dict):
        if not value:
            return "{}"
        pad = "\n" + "  " * (level + 1)
        items = (f"{encode_basestring_ascii(_key_text(key))}: {_text(item, level + 1)}"
                 for key, item in sorted(value.items()))
        return "{" + pad + ("," + pad).join(items) + "\n" + "  " * level + "}"
    if isinstance(value, (list, tuple)):
        if not value:
            return "[]"
        pad = "\n" + "  " * (level + 1)
        if set(map(type, value)) <= _NUMBERS:
            # The series: json's C encoder writes "[a, b]" (it is used without an indent), and
            # ", " separates numbers only.
            inner = json.dumps(value)[1:-1].replace(", ", "," + pad)
        else:
            inner = ("," + pad).join([_text(item, level + 1) for item in value])
        return "[" + pad + inner + "\n" + "  " * level + "]"
    # Subclasses (an IntEnum, a StrEnum) are written as their base type, as json does.
    for base in (bool, str, int, float):
        if isinstance(value, base):
            return _SCALARS[base](value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def summary_text(value: object) -> str:
    """`json.dumps(value, indent=2, sort_keys=True)`."""
    return _text(value, 0)
