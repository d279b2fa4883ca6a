"""The scheduler: one class that runs unchanged in the scheduler daemon and under Qsim."""
