"""ESVI's nomadic schedule (esvi paper, Sec. 4.2 and Alg. 5): no barrier per sub-step.

The parts and blocks are those of the rotation schedule (:mod:`lsdask.learn.esvi`):
P parts, each with its shard pinned to one worker, and P blocks, each held by
exactly one part at a time. A *meeting* is one part's update of its shard's
entries in the words of the block it holds (the model's ``substep``). In the
rotation schedule all parts meet their blocks, then wait for each other, then
pass the blocks on; here there is no such barrier. As soon as a part's meeting
ends it is *idle*, holding the block it met, and the driver routes at once
(:func:`route`, a pure function of the seeded draw): two idle parts exchange
their blocks when one of them has not met the other's (a *swap*: the blocks
cross, and each part meets its new block once both have arrived); a part
holding a block it has not met in this rotation (a rotation's first block)
meets it in place, unless it met it last, at the end of the rotation before:
such a block is passed on first. The other parts go on with their meetings
meanwhile. A *rotation* ends when every
(shard, block) pair has met once; that is the only barrier, so the ELBO and
the checkpoints are taken there, from a consistent state.

Each meeting reads the part's own view of the totals ``pi``
(:class:`lsdask.learn.esvi.StaleTotals`, the paper's round-robin totals):
every meeting's change of the totals goes into its part's view at once, and a
circulating token visits one part after every meeting. Exact totals would
need every meeting to wait for all others: the schedule refuses them.

Why swaps and not the paper's job queues: a block waiting in a queue lies on
some worker beside the one it computes with; swapping keeps every worker at
one block (two only while a swap's blocks cross, never while it computes),
which is what lets the model be larger than a worker's share.

The routing draw of rotation r comes from ``(seed, r)``, so a resumed run
routes its remaining rotations as an uninterrupted one would. In this process
(:class:`lsdask.engine.partitions.SerialPartitions`) the meetings end in the
order they started, so the run is deterministic; on a cluster the order in
which meetings end decides the routing, and two runs differ (every pair still
meets exactly once per rotation).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lsdask.learn.esvi import (
    ESVIRun,
    PartitionedModel,
    Partitions,
    end_rotation,
    holding,
)
from lsdask.learn.protocols import Handle

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Routing:
    """What the driver starts for the idle parts: ``meets``, the parts that meet
    the block they hold; ``swaps``, pairs of parts that exchange their blocks."""

    meets: list[int]
    swaps: list[tuple[int, int]]


def route(
    held: Sequence[int],
    idle: Sequence[int],
    met: np.ndarray,
    rng: np.random.Generator,
    just_met: Sequence[int] = (),
) -> Routing:
    """The next moves of the idle parts ``idle``; ``held[p]``: the block part p
    holds; ``met[p, b]``: part p met block b in this rotation; ``just_met``:
    parts whose block is the one they met last (at a rotation's start).

    An idle part that has not met its block meets it, unless it just met it:
    as in the paper, a block that was just met is passed on. The others are
    taken in a random order; each one not yet paired hands its block to an
    idle, not yet paired part drawn at random among those that have not met
    it and hold a block it has not met either (both meet a new block), else
    among those where one of the two gains a block it has not met. A part that
    gains nothing holds the other's block until a later swap; a part left
    without a partner that has not met its block in this rotation meets it
    after all. Whenever every part is idle and some pair has not met, this
    makes progress."""
    idle = sorted(int(p) for p in idle)
    passing = set(just_met)
    meets = [p for p in idle if not met[p, held[p]] and p not in passing]
    free = [p for p in idle if p not in meets]
    paired: set[int] = set()
    swaps: list[tuple[int, int]] = []
    for i in rng.permutation(len(free)):
        p = free[int(i)]
        if p in paired:
            continue
        others = [q for q in free if q != p and q not in paired]
        mutual = [q for q in others if not met[p, held[q]] and not met[q, held[p]]]
        either = [q for q in others if not met[p, held[q]] or not met[q, held[p]]]
        choices = mutual or either
        if not choices:
            continue
        q = choices[int(rng.integers(len(choices)))]
        paired.update((p, q))
        swaps.append((p, q))
    meets += [p for p in free if p not in paired and not met[p, held[p]]]
    return Routing(sorted(meets), swaps)


@dataclass(frozen=True)
class Event:
    """What :func:`rotation` reports after every meeting and every swap it ends:
    ``kind`` ("meet" or "swap"), the parts and blocks concerned, the block each
    part holds now, the parts whose swap is under way (each with its partner:
    their blocks may lie on either of the two), and the pairs met so far in
    the rotation."""

    kind: str
    parts: tuple[int, ...]
    blocks: tuple[int, ...]
    held: tuple[int, ...]
    crossing: dict[int, int]
    met: np.ndarray = field(repr=False)


@dataclass
class _Task:
    kind: str  # "meet" or "move"
    part: int
    block: int
    handles: list[Handle]
    partner: int = -1  # a move: the other part of its swap


def _identity(obj: Any, _: Any) -> Any:
    return obj


def meet_all(
    parts: Partitions,
    shards: list[Handle],
    blocks: list[Handle],
    held: list[int],
    rng: np.random.Generator,
    just_met: Sequence[int],
    submit_meeting: Callable[[int, int], list[Handle]],
    on_meeting: Callable[[int, int, Any], None],
    on_event: Callable[[Event], None] | None = None,
) -> None:
    """Route meetings and swaps until every (part, block) pair has met once.

    ``shards[p]``, ``blocks[b]``: the handles, replaced in place as meetings end;
    ``held[p]``: the block part p holds, updated as swaps end; ``just_met``: the
    parts whose block is the one they met last. ``submit_meeting(p, b)``
    submits part p's meeting with block b on its worker and returns the
    handles of the new shard, the new block and the report;
    ``on_meeting(p, b, report)`` takes each report as its meeting ends. The
    model's bookkeeping lives in those two; this loop only routes and moves."""
    P = parts.n_parts
    met = np.zeros((P, P), dtype=bool)
    idle = set(range(P))
    pending: list[_Task] = []
    moved: dict[int, Handle] = {}  # a swap's part: the block that reached it
    crossing: dict[int, int] = {}  # a swap's part: its partner, until the swap ends
    passing = list(just_met)
    while True:
        routing = route(held, sorted(idle), met, rng, passing)
        passing = []
        for p in routing.meets:
            b = held[p]
            met[p, b] = True
            idle.discard(p)
            handles = submit_meeting(p, b)
            parts.release([shards[p], blocks[b]])  # kept until the meeting is done
            pending.append(_Task("meet", p, b, handles))
        for p, q in routing.swaps:
            idle.difference_update((p, q))
            crossing.update({p: q, q: p})
            for to, frm in ((p, q), (q, p)):
                b = held[frm]
                handles = parts.submit(to, _identity, (blocks[b],), None, 1)
                pending.append(_Task("move", to, b, handles, partner=frm))
        if not pending:
            if met.all():
                return
            left = [(int(p), int(b)) for p, b in zip(*np.nonzero(~met), strict=True)]
            raise RuntimeError(f"nomadic routing stalled with (part, block) pairs left: {left}")
        waited = [t.handles[2] if t.kind == "meet" else t.handles[0] for t in pending]
        done = [pending[i] for i in parts.first_done(waited)]
        pending = [t for t in pending if all(t is not d for d in done)]
        for task in done:
            if task.kind == "meet":
                report = parts.gather([task.handles[2]])[0]
                parts.release([task.handles[2]])
                p, b = task.part, task.block
                shards[p], blocks[b] = task.handles[0], task.handles[1]
                on_meeting(p, b, report)
                idle.add(p)
                event = Event("meet", (p,), (b,), tuple(held), dict(crossing), met.copy())
            else:
                moved[task.part] = task.handles[0]
                if task.partner not in moved:
                    continue  # the other block of the swap is still crossing
                p, q = task.part, task.partner
                a, c = held[p], held[q]
                parts.release([blocks[a], blocks[c]])  # the copies they left
                blocks[c], blocks[a] = moved.pop(p), moved.pop(q)
                held[p], held[q] = c, a
                idle.update((p, q))
                del crossing[p], crossing[q]
                event = Event("swap", (p, q), (c, a), tuple(held), dict(crossing), met.copy())
            if on_event is not None:
                on_event(event)


def rotation(
    model: PartitionedModel,
    parts: Partitions,
    run: ESVIRun,
    rng: np.random.Generator,
    on_event: Callable[[ESVIRun, Event], None] | None = None,
) -> None:
    """One nomadic rotation: every (shard, block) pair meets once, each meeting
    against its part's view of the totals (``run.stale``, required), with no
    barrier but at the rotation's end; then the ELBO of the rotation's state.
    ``run`` holds the new shards, blocks, totals and traces."""
    P = parts.n_parts
    stale = run.stale
    if stale is None:
        raise ValueError(
            "the nomadic schedule reads stale totals (run.stale); exact totals need a "
            "barrier after every sub-step: use the rotation schedule for them"
        )
    held = holding(run, P)
    part_reports: list[Any] = [None] * P
    block_reports: list[Any] = [None] * P

    def meet(sh: Any, bl: Any, view: np.ndarray, _: Any) -> Any:
        return model.substep(sh, bl, view)

    def submit_meeting(p: int, b: int) -> list[Handle]:
        args = (run.shards[p], run.blocks[b], stale.views[p].copy())
        return parts.submit(p, meet, args, None, 3)

    def on_meeting(p: int, b: int, report: Any) -> None:
        stale.record_part(p, np.asarray(report.colsum) - run.colsums[b])
        run.colsums[b] = np.asarray(report.colsum)
        part_reports[p], block_reports[b] = report, report

    # after a rotation, each part holds the block it met last: pass it on first
    just_met = list(range(P)) if run.elbo_trace else []
    meet_all(
        parts, run.shards, run.blocks, held, rng, just_met, submit_meeting, on_meeting,
        None if on_event is None else (lambda event: on_event(run, event)),
    )  # fmt: skip
    run.held = list(held)
    run.pi = np.sum(run.colsums, axis=0)
    run.reports = list(part_reports)
    run.sums = {
        "alloc": float(sum(r.alloc for r in part_reports)),
        "H": float(sum(r.H for r in part_reports)),
    }
    run.substep_elbo.append(model.elbo(part_reports, block_reports, run.pi))


def rotate(
    model: PartitionedModel,
    parts: Partitions,
    run: ESVIRun,
    n_rotations: int,
    seed: int,
    on_event: Callable[[ESVIRun, Event], None] | None = None,
) -> ESVIRun:
    """``n_rotations`` nomadic rotations; rotation r routes with the draw of
    ``(seed, r)``. One ELBO per rotation in ``run.substep_elbo`` and
    ``run.elbo_trace``; the time trace goes on from a resumed run's last time."""
    t0 = time.perf_counter() - (run.time_trace[-1] if run.time_trace else 0.0)
    for _ in range(n_rotations):
        r = len(run.elbo_trace)
        rotation(model, parts, run, np.random.default_rng((seed, r)), on_event)
        end_rotation(model, parts, run, t0, "nomadic rotation")
    return run
