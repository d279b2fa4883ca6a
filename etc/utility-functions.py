# Site utility functions for cobaltlite (set `utility_file:` in cobaltlite.yaml to this file's
# path; install it owned by root, mode 0644 or stricter: a group- or world-writable file is
# refused).
#
# Every top-level function whose name does not start with "_" becomes a policy named after it;
# a queue uses it with `cqadm --policy NAME QUEUE`. The builtin names (fcfs, fat, wfp1, wfp3,
# fcsj, unicef, default, high_prio, balanced) are taken and cannot be redefined here.
#
# A function asks for its inputs by naming them as parameters:
#   queued_time  seconds since submission (q)     wall_time  requested seconds (t)
#   size         nodes asked for (n)              n_s        smallest block size
#   user_name, project, queue, queue_priority, jobid, machine_size, now,
#   max_queued_time, max_wall_time, min_wall_time (over the jobs scored in this pass)
# It returns a score, or (score, fallback threshold): if the top job cannot start, only jobs
# scoring strictly above its threshold may start ahead of it. A bare score = no overtaking.
#
# `math` and pure builtins (abs, min, max, sum, round, len, sorted, ...) are available;
# imports are not (no I/O, no sleeping: a function must compute and return). Before a file is
# activated every function runs on the current queued jobs and must return finite numbers
# within the time budget; check a file first with `schedctl --check FILE`, and compare it
# with the current policy on a real log with `schedctl --try FILE --policy NAME --against LOG`.


# ---- seed 003, Table II, written out so a site can adapt them -----------------------------

def fcfs_site(queued_time):
    """First come, first served."""
    return queued_time


def fat_site(queued_time, wall_time, size, n_s):
    """Large jobs first, then old and short ones."""
    return (queued_time / wall_time) * (size / n_s) ** 3


def wfp1_site(queued_time, wall_time, size):
    """Old and short jobs, without starving large ones."""
    return (queued_time / wall_time) * size


def wfp3_site(queued_time, wall_time, size):
    """Intrepid's production policy, with the seed's example fallback threshold of 0.7:
    jobs within 30% of the top job's score may start ahead of it when they fit."""
    score = (queued_time / wall_time) ** 3 * size
    return score, 0.7 * score


def fcsj_site(queued_time, wall_time):
    """Old and short jobs, whatever their size."""
    return queued_time / wall_time


def unicef_site(queued_time, wall_time, size):
    """Fast turnaround for small jobs (one-node jobs count as two: log2(1) = 0)."""
    return queued_time / (math.log2(max(size, 2)) * wall_time)


# ---- a site-specific policy ----------------------------------------------------------------

_URGENT_PROJECTS = {"climate-urgent", "incident-response"}


def project_priority(queued_time, wall_time, size, project, user_name):
    """WFP3, with jobs of urgent projects weighted tenfold and one test account held back."""
    score = (queued_time / wall_time) ** 3 * size
    if project in _URGENT_PROJECTS:
        score *= 10.0
    if user_name == "benchmark-bot":
        score *= 0.1
    return score
