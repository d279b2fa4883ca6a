"""Qsim: replays job traces through the real scheduler on a virtual clock."""
