"""The machine model shared by the system component, the scheduler's planner and Qsim."""
