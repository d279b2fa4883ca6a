"""Utility functions: how queued jobs are ranked."""
