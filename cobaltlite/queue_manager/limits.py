"""Limits on every field of a submission, enforced by the queue manager before the database.

One table for both back ends: SQLite stores a string of any length whatever its column says and
PostgreSQL refuses one (and any integer past 2**31-1) with a driver error, so the queue manager
checks each value here and refuses it with a message naming the field and the limit. Text must
also be storable and printable anywhere: no NUL (C strings, PostgreSQL text) and no lone
surrogate (not UTF-8: it broke every later read of the job).
"""

from __future__ import annotations

KIB = 1024
MIB = 1024 * KIB

MAX_JOBNAME = 256  # characters (the jobname column)
MAX_QUEUE = 64  # characters (the queue column)
MAX_PROJECT = 128  # characters (the project column)
MAX_PATH = 4096  # characters: command, cwd, outputpath, errorpath, cobaltlog (PATH_MAX)
MAX_ARGS = 4096  # arguments
MAX_ARG = 128 * KIB  # characters in one argument (Linux's MAX_ARG_STRLEN)
MAX_ARGS_TOTAL = 1 * MIB  # characters in all arguments together
MAX_ENV_VARS = 4096  # environment variables
MAX_ENV_NAME = 1 * KIB  # characters in one variable's name
MAX_ENV_VALUE = 128 * KIB  # characters in one variable's value
MAX_ENV_TOTAL = 1 * MIB  # characters in all names and values together
MAX_DEPENDENCIES = 1000  # job ids in the dependency list
MAX_USER_LIST = 1000  # names in the user list
MAX_USER_NAME = 64  # characters in one name of the user list
MAX_ATTRS = 64 * KIB  # characters of the attrs mapping, as JSON
MAX_JOBID = 2**31 - 1  # the largest job id a dependency may name (a 32-bit integer column)
MAX_NODES = 2**31 - 1  # nodes, before the machine's own (smaller) limit
MAX_PROCS = 2**31 - 1  # procs (a 32-bit integer column)
MAX_WALLTIME_MINUTES = 366 * 24 * 60  # one (leap) year
MAX_WALLTIME = MAX_WALLTIME_MINUTES * 60  # seconds, as submissions carry it
MAX_MODE = 16  # characters (the mode column)

TEXT_LIMITS = {
    "jobname": MAX_JOBNAME,
    "queue": MAX_QUEUE,
    "project": MAX_PROJECT,
    "mode": MAX_MODE,
    "command": MAX_PATH,
    "cwd": MAX_PATH,
    "outputpath": MAX_PATH,
    "errorpath": MAX_PATH,
    "cobaltlog": MAX_PATH,
    "inputfile": MAX_PATH,
    "debuglog": MAX_PATH,
    "notify": MAX_PATH,
    "geometry": 64,
}
"""Single text fields and their longest length in characters."""
