"""Reservations (Cobalt's setres): places held for a set of users over a time window.

`model.py` is the reservation and its rules (validation, overlap, cyclic roll-forward), shared
by the live queue manager (`book.py`, persisted in its database) and by Qsim (`qsim_file.py`).
The scheduler sees only `Window`s: where, when, and which queue's jobs may use them.
"""
