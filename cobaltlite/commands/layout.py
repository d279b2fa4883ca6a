"""partadm's queue layout options (seed 002; docs/hybrid-queues.md, "Live").

* `--layout FILE`: check FILE (its keys, and that the machine holds its partitions), have the
  system check it too (admin only, decided on the server), create the queues it names that do
  not exist and set each one's size and time range as queue limits (minnodes, maxnodes,
  mintime, maxtime: qsub then refuses a job outside them, naming the limit), and only then
  make it the system's active layout, which the system keeps across restarts.
* `--layout-show`: the active layout: each queue's partition (node range), the sizes and times
  it takes, its priority and starvation time; the common pool and tau_pf; where the other
  queues run.
* `--layout FILE --dry-run --log LOG [--since 30d]`: replay the log with Qsim under the active
  layout and under FILE and print both side by side (cobaltlite/partitioning/whatif.py);
  nothing changes. It runs in this process, as `schedctl --try` does.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from cobaltlite.commands.common import (
    CommandError,
    QueueManagerClient,
    connect_queue_manager,
    connect_system,
    format_table,
    print_lines,
    read_input,
)
from cobaltlite.errors import InputError
from cobaltlite.machine.model import Machine
from cobaltlite.machine.partitions import QueuePartitions
from cobaltlite.machine.runtime import build_machine
from cobaltlite.machine.wire import description_from_wire
from cobaltlite.partitioning.layout import (
    NO_TIME_LIMIT,
    PartitionedQueue,
    QueueLayout,
)
from cobaltlite.system.layout_store import laid_out
from cobaltlite.timefmt import format_hms


def queue_limits(queue: PartitionedQueue) -> dict[str, str | None]:
    """The queue limits a layout queue sets, as `cqadm --setq` values; None: no limit (a
    range open at that end). A queue of several classes gets their bounding box."""
    low, high = queue.size_range
    t_low, t_high = queue.time_range
    return {"minnodes": str(low) if low > 1 else None, "maxnodes": str(high),
            "mintime": format_hms(t_low) if t_low > 0 else None,
            "maxtime": format_hms(t_high) if t_high < NO_TIME_LIMIT else None}


def checked_layout(text: str, where: str, machine: Machine) -> tuple[QueueLayout, QueuePartitions]:
    """The layout in `text` laid out on `machine`; CommandError naming `where` and the key."""
    try:
        return laid_out(text, where, machine)
    except InputError as exc:
        raise CommandError(str(exc)) from None


def live_machine() -> Machine:
    """The running system's machine (no allocations: only its shape is read)."""
    with connect_system() as system:
        return build_machine(description_from_wire(system.description()))


def set_layout(path: Path, force: bool) -> int:
    text = read_input(path, f"--layout {path}: cannot read it")
    machine = live_machine()
    layout, partitions = checked_layout(text, str(path), machine)
    with connect_system() as system:
        system.set_queue_layout(text, True)  # the server's own check, and whether we may
    with connect_queue_manager() as qm:
        if not force and layout.nodes >= machine.total_nodes:
            _check_stranded(qm, layout)
        created = _apply_limits(qm, layout)
    with connect_system() as system:
        system.set_queue_layout(text, False)
    if created:
        print(f"created queues: {' '.join(created)}")
    print(f"queue layout {path} is active: {len(layout.queues)} queues")
    print_lines(layout_lines(layout, partitions, machine.total_nodes))
    return 0


def _check_stranded(qm: QueueManagerClient, layout: QueueLayout) -> None:
    """Refuse a layout that covers the whole machine while a queue it does not name has jobs
    waiting (such a queue runs only on the nodes outside the layout: D002-10)."""
    named = {q.name for q in layout.queues}
    waiting: dict[str, int] = {}
    for job in qm.jobs():
        if job["state"] == "queued" and job["queue"] not in named \
                and not str(job["queue"]).startswith("R."):
            waiting[job["queue"]] = waiting.get(job["queue"], 0) + 1
    if waiting:
        stranded = ", ".join(f"{q} ({n} waiting)" for q, n in sorted(waiting.items()))
        raise CommandError(f"nothing changed: the layout leaves no node outside its partitions "
                           f"and pool, so queue {stranded} would have nowhere to run; add "
                           "it to the layout, or force (-f)")


def _apply_limits(qm: QueueManagerClient, layout: QueueLayout) -> list[str]:
    """Create the layout's missing queues and set each one's limits; the names created."""
    existing = {q["name"]: q for q in qm.queues()}
    created = [q.name for q in layout.queues if q.name not in existing]
    if created:
        qm.add_queues(created)
    for queue in layout.queues:
        limits = queue_limits(queue)
        qm.set_queue([queue.name], {k: v for k, v in limits.items() if v is not None})
        unbounded = [k for k, v in limits.items()
                     if v is None and existing.get(queue.name, {}).get(k) is not None]
        if unbounded:
            qm.unset_queue([queue.name], unbounded)
    return created


def show_layout() -> int:
    with connect_system() as system:
        text = system.queue_layout()
    machine = live_machine()
    if text is None:
        print("no queue layout: every queue runs on the whole machine (partadm --queue "
              "mappings aside)")
        return 0
    layout, partitions = checked_layout(text, "the active queue layout", machine)
    print_lines(layout_lines(layout, partitions, machine.total_nodes))
    return 0


def layout_lines(layout: QueueLayout, partitions: QueuePartitions,
                 machine_nodes: int) -> list[str]:
    """The layout as partadm --layout-show prints it: a table of queues (their partitions as
    `QueuePartitions.listing` gives them, and each one's starvation time: its own, or the
    layout's), then the pool, tau_pf, and the nodes where queues outside the layout run."""
    listing = partitions.listing(machine_nodes)
    places = {row["name"]: row["places"] for row in listing["queues"]}
    rows = []
    for q in layout.queues:
        low, high = q.size_range
        t_low, t_high = q.time_range
        rows.append([q.name, q.nodes, places[q.name], f"{low}-{high}",
                     f"{format_hms(t_low)}-"
                     + ("any" if t_high >= NO_TIME_LIMIT else format_hms(t_high)),
                     f"{q.priority:g}", format_hms(layout.starvation(q))])
    lines = format_table(["Queue", "Nodes", "Partition", "JobNodes", "JobTime", "Priority",
                          "Starvation"], rows)
    pool = (f"{partitions.nodes()} nodes ({listing['pool']})" if listing["pool"] else "none")
    tau = "-" if partitions.tau_pf is None else f"{partitions.tau_pf:g}"
    lines.append(f"common pool: {pool}; tau_pf: {tau}")
    rest = listing["rest"]
    lines.append(f"other queues: nodes {rest}" if rest else
                 "other queues: no node (their jobs wait)")
    if partitions.blocks is not None:  # Blue Gene/P: the blocks each region's jobs run on
        regions = [(f"queue {row['name']}", row["blocks"]) for row in listing["queues"]]
        regions += [("common pool", listing["pool_blocks"]),
                    ("other queues", listing["rest_blocks"])]
        lines += [f"{who} blocks: {' '.join(blocks) or 'none'}" for who, blocks in regions
                  if blocks or who.startswith("queue")]
    return lines


def dry_run(path: Path, log: Path, since: float, policy_queue: str) -> int:
    """Replay `log` under the active layout and under `path`; print both; change nothing."""
    from cobaltlite.commands.schedctl import current_policy
    from cobaltlite.config import load_config
    from cobaltlite.partitioning.whatif import replay_layouts
    from cobaltlite.qsim.metrics import output_console, print_comparison
    from cobaltlite.qsim.queue_metrics import queue_table
    from cobaltlite.scheduler.scheduler import Backfill

    machine = live_machine()
    checked_layout(read_input(path, f"--layout {path}: cannot read it"), str(path), machine)
    with connect_system() as system:
        active = system.queue_layout()
    config = load_config()
    policy = current_policy(policy_queue)
    with tempfile.TemporaryDirectory(prefix="partadm-layout-") as scratch:
        current = None
        if active is not None:  # the replay reads a layout file: the active one's text
            current = Path(scratch) / "active-layout.yaml"
            current.write_text(active)
        try:
            runs = replay_layouts(log, config.machine, policy, Backfill(config.backfill), since,
                                  [("current", current), ("new", path)])
        except InputError as exc:
            raise CommandError(str(exc).replace(str(current), "the active layout")) from None
    print_comparison([(run.label, run.metrics) for run in runs])
    console = output_console()
    for run in runs:
        table = queue_table(run.metrics["by_queue"])
        table.title = f"{run.label.capitalize()} configuration. {table.title}"
        console.print(table)
        if run.skipped:
            print(f"{len(run.skipped)} jobs never ran under the {run.label} configuration, "
                  f"e.g. {run.skipped[0]}")
    print(f"{log}: {runs[0].metrics['jobs']} jobs replayed on {config.machine} with "
          f"{policy.name} and {config.backfill} backfilling, under the active layout "
          f"({'none' if active is None else 'current'}) and under {path} (new); nothing was "
          "changed")
    return 0
