"""summary.json's writer gives json.dumps(indent=2, sort_keys=True) byte for byte."""

from __future__ import annotations

import enum
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cobaltlite.qsim.summary_json import summary_text

SCALARS = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True)
           | st.text(max_size=8))
KEYS = st.text(max_size=6) | st.integers() | st.floats(allow_nan=False) | st.booleans()
VALUES = st.recursive(
    SCALARS,
    lambda inner: (st.lists(inner, max_size=5) | st.tuples(inner, inner)
                   | st.dictionaries(st.text(max_size=6), inner, max_size=5)),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(VALUES)
def test_same_text_as_json(value: object) -> None:
    assert summary_text(value) == json.dumps(value, indent=2, sort_keys=True)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(KEYS, SCALARS, max_size=4))
def test_keys_that_are_not_strings(value: dict) -> None:
    try:
        expected = json.dumps(value, indent=2, sort_keys=True)
    except TypeError:  # keys of mixed types that do not sort
        with pytest.raises(TypeError):
            summary_text(value)
        return
    assert summary_text(value) == expected


class Size(enum.IntEnum):
    BIG = 7


class Name(enum.StrEnum):
    EASY = "easy"


def test_subclasses_and_odd_values() -> None:
    value = {"size": Size.BIG, "name": Name.EASY, "nan": float("nan"), "inf": [float("inf"),
             float("-inf")], "empty": [{}, [], ()], "unicode": "é\n\""}
    assert summary_text(value) == json.dumps(value, indent=2, sort_keys=True)


def test_refuses_what_json_refuses() -> None:
    with pytest.raises(TypeError):
        summary_text({"x": object()})
    with pytest.raises(TypeError):
        summary_text({(1, 2): 3})
