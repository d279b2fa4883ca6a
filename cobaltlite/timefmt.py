"""Durations as users read them, shared by the accounting log and the commands."""

from __future__ import annotations


def format_hms(seconds: float) -> str:
    """Seconds as Cobalt's `HH:MM:SS` (rounded to the second; hours grow past 99 as needed)."""
    if seconds < 0:
        raise ValueError(f"format_hms: negative duration {seconds}")
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}"
