"""Failures for fault-aware scheduling (seed 003 §IV-B, §VI-A3): where failures come from
(`sources`, `failure_log`) and what the scheduler is told about them (`predictor`)."""
