"""Moments written as text: epoch seconds or ISO 8601, UTC unless the text names a zone.

Traces, failure logs, forecasts, experiment files and qsim's --start/--end all take times this
way, so one parser gives them one meaning and one message.
"""

from __future__ import annotations

from datetime import UTC, datetime


def parse_moment(text: str) -> float:
    """Epoch seconds of `text`; ValueError naming the text and the accepted forms."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"time {text!r} is neither epoch seconds nor ISO 8601 (such as "
                         "2009-01-05 or 2009-01-05T06:00:00Z)") from None
    return utc_timestamp(moment)


def utc_timestamp(moment: datetime) -> float:
    """Epoch seconds of `moment`, read as UTC when it carries no zone."""
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()
