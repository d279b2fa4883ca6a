"""cobaltlite: a Cobalt-style resource manager for supercomputers, with the Qsim trace replayer."""

__version__ = "0.1.0"
