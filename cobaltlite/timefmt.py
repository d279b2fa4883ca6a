"""Durations as users read them, shared by the accounting log and the commands."""

from __future__ import annotations

TWO_DIGITS = tuple(f"{i:02d}" for i in range(100))
"""`00` to `99`: a replay formats a duration or a clock time for every accounting record, and
indexing these is several times cheaper than a `:02d` format of each part."""

MINUTES_SECONDS = tuple(f"{m}:{s}" for m in TWO_DIGITS[:60] for s in TWO_DIGITS[:60])
"""`MM:SS` of each second of an hour (a duration's and an accounting record's clock)."""


def format_hms(seconds: float) -> str:
    """Seconds as Cobalt's `HH:MM:SS` (rounded to the second; hours grow past 99 as needed)."""
    if seconds < 0:
        raise ValueError(f"format_hms: negative duration {seconds}")
    hours, in_hour = divmod(round(seconds), 3600)
    return f"{TWO_DIGITS[hours] if hours < 100 else hours}:{MINUTES_SECONDS[in_hour]}"
