"""The job and queue rules, once, for the live queue manager and for Qsim.

`states` names the stored states and how qstat shows them; `lifecycle` is the job state machine
(holds, dependencies, start, end, delete, wall time); `queues` is queue settings and
restrictions with Cobalt's messages. Nothing here stores anything or reads a clock: the live
queue manager applies the outcomes to its database, Qsim to its memory.
"""
