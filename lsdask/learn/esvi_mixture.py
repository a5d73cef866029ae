"""ESVI's rotation schedule for finite mixtures (esvi paper, Alg. 4, exact mode).

As for LDA (:mod:`lsdask.learn.esvi`), part p owns a shard of rows and in
sub-step s meets component block ``(p + s) mod P``. A row's update keeps its
mass inside the block it meets (Theorem 1), so the components are dealt into
new blocks at random at the start of every rotation after the first: each
old block is cut where it lies into the pieces the new blocks take, and new
block b is joined on part b from those pieces, so no part ever holds more
than its block and the pieces coming to it. The driver receives a few
scalars per part and sub-step; the mixture needs no shared totals.

With ``schedule="nomadic"`` the blocks are routed as ESVI LDA's nomadic
schedule routes them (:func:`lsdask.learn.esvi_nomadic.meet_all`): no barrier
but at a rotation's end. The mixture shares no totals, so every meeting is an
exact coordinate step over its rows and its block's components whatever the
order in which meetings end: the schedule changes the order of the updates,
not what each one is, and the ELBO at a rotation's end never decreases on a
cluster either. The new blocks of a rotation are cut from the blocks where
the previous rotation left them (``held``).

A run starts from random responsibilities or, as memoized VI does, from
statistics of all K components (a start rotation, :func:`start_mixture`).
Checkpoints and resume are the LDA path's (:func:`lsdask.learn.esvi.checkpoint`
and :func:`lsdask.learn.esvi.resume`, one store), through
:func:`checkpoint_mixture` and :func:`resume_mixture`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import numpy as np

from lsdask.errors import DataError
from lsdask.learn import esvi
from lsdask.learn.esvi import BlockStore, Partitions, block_at, deal_batches, held_blocks
from lsdask.learn.esvi_nomadic import Event, meet_all
from lsdask.learn.protocols import Batch, Handle

logger = logging.getLogger(__name__)


class PartitionedMixture(Protocol):
    """The math (:class:`lsdask.models.esvi_mixture.ESVIMixture`)."""

    n_components: int
    seed: int

    def deal(self, rotation: int, n_blocks: int) -> list[np.ndarray]: ...

    def init_shard(
        self, loaders: list[Any], part: int, blocks: list[np.ndarray]
    ) -> tuple[Any, ...]: ...

    def load_shard(self, loaders: list[Any], part: int) -> Any: ...

    def weigh_start(self, shard: Any, block: Any, shared: Any = None) -> Any: ...

    def finish_start(self, shard: Any, blocks: list[np.ndarray]) -> tuple[Any, ...]: ...

    def make_block(self, index: int, comps: np.ndarray, *stats: Any) -> Any: ...

    def split_block(self, block: Any, blocks: list[np.ndarray]) -> tuple[Any, ...]: ...

    def join_block(self, index: int, comps: np.ndarray, *pieces: Any) -> Any: ...

    def substep(self, shard: Any, block: Any, shared: Any = None) -> tuple[Any, Any, Any]: ...

    def elbo(self, shards: list[Any], blocks: list[Any]) -> float: ...

    def shard_state(self, shard: Any) -> dict[str, np.ndarray]: ...

    def shard_from_state(self, state: dict[str, np.ndarray]) -> Any: ...

    def block_state(self, block: Any) -> dict[str, np.ndarray]: ...

    def block_from_state(self, state: dict[str, np.ndarray]) -> Any: ...

    def partition_state(self, deal: list[np.ndarray]) -> dict[str, np.ndarray]: ...

    def partition_from_state(self, state: dict[str, np.ndarray]) -> list[np.ndarray]: ...


@dataclass
class MixtureRun:
    """The state and traces of a run; ``blocks[b]``, ``shards[p]`` are handles."""

    shards: list[Handle]
    blocks: list[Handle]
    deals: list[list[np.ndarray]]  # the component blocks of every rotation so far
    n_rows: int
    elbo_trace: list[float] = field(default_factory=list)
    substep_elbo: list[float] = field(default_factory=list)
    time_trace: list[float] = field(default_factory=list)
    reports: list[Any] = field(default_factory=list)
    # the block each part holds now: set by start_mixture, every rotation and resume_mixture
    held: list[int] = field(default_factory=list)


def check_mixture_parts(n_rows_per_batch: Sequence[int], n_parts: int, K: int) -> None:
    """A ValueError unless every part can get a shard of rows and a component."""
    if n_parts > K:
        raise ValueError(
            f"n_blocks={n_parts} is larger than the number of components ({K}): every block "
            f"needs at least one component. Use n_blocks <= {K}"
        )
    filled = sum(1 for n in n_rows_per_batch if n > 0)
    if filled < n_parts:
        raise ValueError(
            f"too few rows per shard: the data has {filled} non-empty batches of rows "
            f"({sum(n_rows_per_batch)} rows), fewer than n_blocks={n_parts}; every worker "
            "needs a shard of its own. Use a smaller batch_size (at most rows / n_blocks) "
            "or fewer blocks"
        )


def start_mixture(
    model: PartitionedMixture,
    parts: Partitions,
    batches: Sequence[Batch],
    n_rows_per_batch: Sequence[int],
    rng: np.random.Generator,
    start_stats: Callable[[], dict[str, np.ndarray]] | None = None,
) -> MixtureRun:
    """Deal the batches (non-empty first, by rows) and the components; build shards
    and blocks (block b on part b).

    Without ``start_stats`` every shard draws its first responsibilities
    (``model.first_resp``, the paper's start). With it, ``start_stats()``
    gives statistics of all K components (``N`` and the observation model's,
    e.g. of ``init``'s seeds, as memoized VI starts: the only K-sized array in
    the driver, made and sliced by block once), and a start rotation gives
    every row its responsibilities against them: in sub-step s, part p's rows
    weigh the components of start block ``(p + s) mod P``; then each row's
    weights become a softmax over all K, and the blocks are made from the
    shards' statistics of them."""
    P = parts.n_parts
    check_mixture_parts(n_rows_per_batch, P, model.n_components)
    costs = [float(n) for n in n_rows_per_batch]
    dealt = deal_batches(costs, P, rng)
    loaders = [[batches[i] for i in d] for d in dealt]
    deal = model.deal(0, P)
    shared = parts.broadcast(deal)
    if start_stats is None:
        out = parts.run(
            lambda lo, p, d: model.init_shard(lo, p, d),
            [(lo, p) for p, lo in enumerate(loaders)], shared, 1 + P,
        )  # fmt: skip
    else:
        out = _start_from(model, parts, loaders, deal, shared, start_stats())
    made = parts.run(
        lambda b, *rest: model.make_block(b, rest[-1][b], *rest[:-1]),
        [(b, *[out[p][1 + b] for p in range(P)]) for b in range(P)], shared, 1,
    )  # fmt: skip
    parts.release([h for o in out for h in o[1:]] + [shared])
    return MixtureRun(
        [o[0] for o in out], [m[0] for m in made], [deal], int(sum(costs)), held=list(range(P))
    )


def _start_from(
    model: PartitionedMixture,
    parts: Partitions,
    loaders: list[list[Any]],
    deal: list[np.ndarray],
    shared: Handle,
    stats: dict[str, np.ndarray],
) -> list[list[Handle]]:
    """The start rotation of :func:`start_mixture`: per part, handles of its shard
    and of its statistics per block."""
    P = parts.n_parts
    seeded = parts.run(
        lambda b, piece, d: model.make_block(b, d[b], piece),
        [(b, {n: a[deal[b]] for n, a in stats.items()}) for b in range(P)], shared, 1,
    )  # fmt: skip
    del stats
    loaded = parts.run(
        lambda lo, p, _: model.load_shard(lo, p), [(lo, p) for p, lo in enumerate(loaders)],
        None, 1,
    )  # fmt: skip
    shards = [h[0] for h in loaded]
    for s in range(P):
        met = [block_at(p, s, P) for p in range(P)]
        weighed = parts.run(
            model.weigh_start, [(shards[p], seeded[met[p]][0]) for p in range(P)], None, 1
        )
        parts.release(shards)
        shards = [w[0] for w in weighed]
    parts.release([h[0] for h in seeded])
    out = parts.run(
        lambda sh, d: model.finish_start(sh, d), [(sh,) for sh in shards], shared, 1 + P
    )
    parts.release(shards)
    return out


def redeal(model: PartitionedMixture, parts: Partitions, run: MixtureRun) -> None:
    """New random component blocks: each old block cut where it lies, block b
    joined on part b from the pieces."""
    P = parts.n_parts
    deal = model.deal(len(run.deals), P)
    shared = parts.broadcast(deal)
    held = list(run.held)  # where the last rotation left them
    pieces = parts.run(
        lambda blk, d: model.split_block(blk, d), [(run.blocks[held[p]],) for p in range(P)],
        shared, P,
    )  # fmt: skip
    joined = parts.run(
        lambda b, *rest: model.join_block(b, rest[-1][b], *rest[:-1]),
        [(b, *[pieces[p][b] for p in range(P)]) for b in range(P)], shared, 1,
    )  # fmt: skip
    parts.release(run.blocks + [h for pc in pieces for h in pc] + [shared])
    run.blocks = [j[0] for j in joined]
    run.held = list(range(P))
    run.deals.append(deal)


def rotate_mixture(
    model: PartitionedMixture,
    parts: Partitions,
    run: MixtureRun,
    n_rotations: int,
    on_substep: Callable[[MixtureRun, int], None] | None = None,
    redeal_blocks: bool = True,
    schedule: str = "rotation",
    on_event: Callable[[MixtureRun, Event], None] | None = None,
) -> MixtureRun:
    """``n_rotations`` rotations; components dealt afresh before each one after the
    first (``redeal_blocks=False`` keeps the first blocks: only to show why not).
    ``schedule``: "rotation" (lockstep sub-steps, ``on_substep(run, s)`` after
    each) or "nomadic" (rotation r routed by the draw of ``(model.seed, 2, r)``,
    ``on_event(run, event)`` after every meeting and swap). The time trace is
    cumulative: it goes on from the run's last time, so calls of one rotation
    each add up as one call of many."""
    if schedule not in ("rotation", "nomadic"):
        raise ValueError(f"schedule must be 'rotation' or 'nomadic', got {schedule!r}")
    P = parts.n_parts
    t0 = time.perf_counter() - (run.time_trace[-1] if run.time_trace else 0.0)
    for _ in range(n_rotations):
        redealt = bool(run.substep_elbo and P > 1 and redeal_blocks)
        if redealt:
            redeal(model, parts, run)
        if schedule == "nomadic":
            # a part holding the block it met last passes it on first; new blocks are unmet
            just_met = list(range(P)) if run.substep_elbo and not redealt else []
            rng = np.random.default_rng((model.seed, 2, len(run.elbo_trace)))
            _nomadic_rotation(model, parts, run, rng, just_met, on_event)
        else:
            _lockstep_rotation(model, parts, run, on_substep)
        run.elbo_trace.append(run.substep_elbo[-1])
        run.time_trace.append(time.perf_counter() - t0)
        logger.info(
            "ESVI mixture %s %d: ELBO %.6e (%.4f per row), %.1f s", schedule,
            len(run.elbo_trace), run.elbo_trace[-1], run.elbo_trace[-1] / max(run.n_rows, 1),
            run.time_trace[-1],
        )  # fmt: skip
    return run


def _lockstep_rotation(
    model: PartitionedMixture,
    parts: Partitions,
    run: MixtureRun,
    on_substep: Callable[[MixtureRun, int], None] | None,
) -> None:
    """P sub-steps: in sub-step s every part p meets block ``(p + s) mod P``."""
    P = parts.n_parts
    for s in range(P):
        met = [block_at(p, s, P) for p in range(P)]
        out = parts.run(
            model.substep, [(run.shards[p], run.blocks[met[p]]) for p in range(P)], None, 3
        )
        reports = parts.gather([o[2] for o in out])
        parts.release([o[2] for o in out] + run.shards + run.blocks)
        run.shards = [o[0] for o in out]
        blocks: list[Handle] = [None] * P
        for p in range(P):
            blocks[met[p]] = out[p][1]
        run.blocks = blocks
        run.reports = list(reports)
        run.substep_elbo.append(model.elbo(reports, reports))
        if on_substep is not None:
            on_substep(run, s)
    run.held = held_blocks(P)


def _nomadic_rotation(
    model: PartitionedMixture,
    parts: Partitions,
    run: MixtureRun,
    rng: np.random.Generator,
    just_met: list[int],
    on_event: Callable[[MixtureRun, Event], None] | None,
) -> None:
    """Every (part, block) pair meets once, routed by ``rng``; then the ELBO from
    each part's last report (its rows) and each block's (its components)."""
    P = parts.n_parts
    held = list(run.held)
    part_reports: list[Any] = [None] * P
    block_reports: list[Any] = [None] * P

    def submit_meeting(p: int, b: int) -> list[Handle]:
        return parts.submit(p, model.substep, (run.shards[p], run.blocks[b]), None, 3)

    def on_meeting(p: int, b: int, report: Any) -> None:
        part_reports[p], block_reports[b] = report, report

    meet_all(
        parts, run.shards, run.blocks, held, rng, just_met, submit_meeting, on_meeting,
        None if on_event is None else (lambda event: on_event(run, event)),
    )  # fmt: skip
    run.held = held
    run.reports = part_reports
    run.substep_elbo.append(model.elbo(part_reports, block_reports))


# ---- checkpoints: the LDA path's, block by block (:func:`lsdask.learn.esvi.checkpoint`)


def checkpoint_mixture(
    model: PartitionedMixture, parts: Partitions, run: MixtureRun, store: BlockStore,
    settings: dict[str, Any],
) -> None:  # fmt: skip
    """Write the state after a complete rotation as ESVI LDA does: every part its
    shard and the block it holds, on its own worker, then the manifest. The
    first rotation's component blocks stand for LDA's vocabulary partition;
    the mixture has no shared totals (``pi`` is empty)."""
    view = esvi.ESVIRun(
        run.deals[0], run.shards, run.blocks, np.zeros(0), run.elbo_trace, run.substep_elbo,
        run.time_trace, float(run.n_rows), held=list(run.held),
    )  # fmt: skip
    # checkpoint() calls only the model's *_state methods, which a mixture has
    esvi.checkpoint(cast(esvi.PartitionedModel, model), parts, view, store, settings)


def resume_mixture(
    model: PartitionedMixture, parts: Partitions, store: BlockStore, settings: dict[str, Any]
) -> MixtureRun | None:
    """The run of the last complete rotation in ``store`` (each part's shard and
    block read by its own worker), or None when there is none; the component
    blocks of the rotations so far are dealt again from the seed. A ValueError
    when it was written with other settings, a DataError when it is damaged."""
    got = esvi.resume(cast(esvi.PartitionedModel, model), parts, store, settings)
    if got is None:
        return None
    P = parts.n_parts
    deals = [model.deal(r, P) for r in range(len(got.elbo_trace) if P > 1 else 1)]
    first = got.partition
    if len(first) != P or any(
        not np.array_equal(a, b) for a, b in zip(first, deals[0], strict=True)
    ):
        where = getattr(store, "folder", store)
        raise DataError(
            f"the component blocks in {where}/partition.npz are not those the fit's seed "
            f"deals: the file was modified or belongs to another fit. Restore {where} from a "
            "copy, or start afresh: remove it (or give another checkpoint_dir) and fit without "
            "resume"
        )
    return MixtureRun(
        got.shards, got.blocks, deals, int(got.n_tokens), got.elbo_trace, got.substep_elbo,
        got.time_trace, held=list(got.held),
    )  # fmt: skip
