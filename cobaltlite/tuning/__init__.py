"""Adaptive policy tuning (seed 000 §3.4, Algorithm 1): schemes, and the tuner Qsim and the
scheduler daemon both run."""
