"""ESVI's deterministic rotation schedule (esvi paper, Alg. 4-5, exact mode).

P parts: part p owns a shard of the data (batches dealt to it once, never
moved) and, at any time, exactly one parameter block. A *rotation* is P
sub-steps; in sub-step s the data of part p meet block ``(p + s) mod P``, so
after a rotation every shard has met every block once. In **exact** mode each
sub-step reads one snapshot of its block, of the shard's local variables and
of the shared totals ``pi``; the new blocks and totals are formed after the
sub-step (``pi`` summed from every block's column sums, in block order: an
all-reduce of K-vectors), and the ELBO follows from the parts' partial sums.
In **stale** mode (:class:`StaleTotals`) every part reads its own view of
``pi`` instead, refreshed in turn by a circulating token.

The loop knows neither Dask nor the model's formulas: it talks to a
:class:`PartitionedModel` and to :class:`Partitions` (where each part's
tasks run, :mod:`lsdask.engine.partitions`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from lsdask.errors import DataError
from lsdask.learn.protocols import Batch, Handle

logger = logging.getLogger(__name__)

#: what :func:`checkpoint` writes into a manifest besides the store's own entries
_MANIFEST_META = (
    "settings", "n_parts", "pi", "elbo_trace", "substep_elbo", "time_trace", "n_tokens", "sums",
)  # fmt: skip


class PartitionedModel(Protocol):
    """The math ESVI needs, as pure functions (:class:`lsdask.models.esvi_lda.ESVILDA`)."""

    def word_mass(self, loaders: list[Any], shared: Any = None) -> np.ndarray: ...

    def init_shard(self, loaders: list[Any], part: int, partition: Any) -> tuple[Any, ...]: ...

    def make_block(self, index: int, partition: Any, *stats: Any) -> tuple[Any, Any]: ...

    def substep(self, shard: Any, block: Any, pi: np.ndarray) -> tuple[Any, Any, Any]: ...

    def elbo(self, shards: list[Any], blocks: list[Any], pi: np.ndarray) -> float: ...

    def seed_block(self, block: Any, counts: np.ndarray) -> tuple[Any, Any]: ...

    def drop_start(self, block: Any) -> tuple[Any, Any]: ...

    def block_columns(
        self, block: Any, words: np.ndarray, pi: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]: ...

    def block_log_rows(
        self, block: Any, words: np.ndarray, pi: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]: ...

    def shard_state(self, shard: Any) -> dict[str, np.ndarray]: ...

    def shard_from_state(self, state: dict[str, np.ndarray]) -> Any: ...

    def block_state(self, block: Any) -> dict[str, np.ndarray]: ...

    def block_from_state(self, state: dict[str, np.ndarray]) -> Any: ...

    def partition_state(self, partition: Any) -> dict[str, np.ndarray]: ...

    def partition_from_state(self, state: dict[str, np.ndarray]) -> Any: ...


class BlockStore(Protocol):
    """Where checkpoints go, block by block (:class:`lsdask.persist.esvi_store.ESVIStore`):
    each part writes its own files on its worker; the driver commits a manifest."""

    def write_part(
        self, rotation: int, part: int, shard: dict[str, np.ndarray] | None, block_index: int,
        block: dict[str, np.ndarray],
    ) -> dict[str, Any]: ...  # fmt: skip

    def write_partition(self, arrays: dict[str, np.ndarray]) -> None: ...

    def read_partition(self) -> dict[str, np.ndarray]: ...

    def commit(self, rotation: int, parts: list[dict[str, Any]], meta: dict[str, Any]) -> None: ...

    def latest(self) -> dict[str, Any] | None: ...

    def read(self, manifest: dict[str, Any], name: str) -> dict[str, np.ndarray]: ...


class Partitions(Protocol):
    """Where the parts' tasks run: part p's tasks always on the same worker.

    ``run(fn, args, shared, n_out)`` calls ``fn(*args[p], shared)`` as part p's
    task for every p and returns, per part, handles of the ``n_out`` items of
    its result, each left where the task ran. A handle among ``args`` is
    brought to the task's worker. ``release`` drops handles (their data is
    freed once nothing else needs it); ``gather`` fetches results to the driver;
    ``wait`` returns once the handles' tasks are done, leaving their data where
    it is; ``settle`` once the data of released handles is freed.

    For schedules without a barrier (:mod:`lsdask.learn.esvi_nomadic`):
    ``submit(part, fn, args, shared, n_out)`` starts one part's task the way
    ``run`` does, without waiting; ``first_done(handles)`` waits until at
    least one of the handles' tasks is done and returns the positions of
    those done (in this process: only the oldest, so a run is deterministic).
    """

    n_parts: int

    def run(
        self, fn: Callable[..., Any], args: Sequence[Sequence[Any]], shared: Handle, n_out: int
    ) -> list[list[Handle]]: ...

    def submit(
        self, part: int, fn: Callable[..., Any], args: Sequence[Any], shared: Handle, n_out: int
    ) -> list[Handle]: ...

    def first_done(self, handles: Sequence[Handle]) -> list[int]: ...

    def broadcast(self, obj: object) -> Handle: ...

    def gather(self, handles: Sequence[Handle]) -> list[Any]: ...

    def release(self, handles: Sequence[Handle]) -> None: ...

    def wait(self, handles: Sequence[Handle]) -> None: ...

    def settle(self) -> None: ...


@dataclass
class StaleTotals:
    """``pi_sync="stale"``: the paper's round-robin totals with bounded staleness
    (its ref. [18], F+Nomad LDA), on the rotation schedule.

    Every part reads its own *view* of the totals ``pi``: the totals as the
    circulating *token* held them when it last visited the part, plus the
    part's own changes since. A part's changes also pile up in its *unsent*
    vector. After every sub-step the token visits one part, in turn (part
    ``holder``, then the next): it takes the part's unsent changes, and the
    part's view becomes the token. So ``token + sum_p unsent_p`` is always the
    true ``pi`` (the blocks' column sums), and a view misses only other parts'
    changes of the last ``2P - 1`` sub-steps. With P = 1 every view is the true
    ``pi``: exact mode.
    """

    views: list[np.ndarray]
    unsent: list[np.ndarray]
    token: np.ndarray
    holder: int = 0

    @classmethod
    def start(cls, pi: np.ndarray, n_parts: int) -> StaleTotals:
        """Every view and the token at the true totals ``pi``."""
        pi = np.asarray(pi, dtype=np.float64)
        return cls(
            [pi.copy() for _ in range(n_parts)], [np.zeros_like(pi) for _ in range(n_parts)],
            pi.copy(),
        )  # fmt: skip

    def record(self, deltas: Sequence[np.ndarray]) -> None:
        """Part p changed the totals by ``deltas[p]`` in the sub-step just done;
        then the token visits the next part in turn."""
        for p, delta in enumerate(deltas):
            self.views[p] = self.views[p] + delta
            self.unsent[p] = self.unsent[p] + delta
        h = self.holder
        self.token = self.token + self.unsent[h]
        self.unsent[h] = np.zeros_like(self.token)
        self.views[h] = self.token.copy()
        self.holder = (h + 1) % len(self.views)

    def record_part(self, part: int, delta: np.ndarray) -> None:
        """Part ``part`` alone changed the totals by ``delta`` (a meeting of the
        nomadic schedule); then the token visits the next part in turn. A view
        then misses only other parts' changes of the last ``2P - 1`` meetings."""
        deltas = [np.zeros_like(self.token) for _ in self.views]
        deltas[part] = np.asarray(delta, dtype=np.float64)
        self.record(deltas)

    def state(self) -> dict[str, Any]:
        """As JSON values (a checkpoint's manifest)."""
        return {
            "views": [v.tolist() for v in self.views],
            "unsent": [u.tolist() for u in self.unsent],
            "token": self.token.tolist(), "holder": self.holder,
        }  # fmt: skip

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> StaleTotals:
        def arr(x: Any) -> np.ndarray:
            return np.asarray(x, dtype=np.float64)

        return cls([arr(v) for v in state["views"]], [arr(u) for u in state["unsent"]],
                   arr(state["token"]), int(state["holder"]))  # fmt: skip


@dataclass
class ESVIRun:
    """The state and traces of a run; ``blocks[b]`` and ``shards[p]`` are handles."""

    partition: Any
    shards: list[Handle]
    blocks: list[Handle]
    pi: np.ndarray
    elbo_trace: list[float] = field(default_factory=list)  # after every rotation
    substep_elbo: list[float] = field(default_factory=list)  # after every sub-step
    time_trace: list[float] = field(default_factory=list)  # seconds, after every rotation
    n_tokens: float = 0.0
    reports: list[Any] = field(default_factory=list)  # the last sub-step's sums per part
    warm: bool = False  # the blocks still hold the start's counts (first rotation)
    sums: dict[str, float] = field(default_factory=dict)  # the shards' alloc and H in all
    stale: StaleTotals | None = None  # pi_sync="stale": the parts' views of pi
    colsums: list[np.ndarray] = field(default_factory=list)  # each block's, in block order
    held: list[int] = field(default_factory=list)  # the block each part holds now


def holding(run: ESVIRun, n_parts: int) -> list[int]:
    """The block each part holds now (where the schedule left them)."""
    return list(run.held) if run.held else held_blocks(n_parts)


def deal_batches(costs: Sequence[float], n_parts: int, rng: np.random.Generator) -> list[list[int]]:
    """Batches dealt to parts: drawn in a random order across the data (stored
    order often groups similar documents), each to the part with the least
    work so far (ties: the lower part)."""
    order = rng.permutation(len(costs))
    load = np.zeros(n_parts)
    parts: list[list[int]] = [[] for _ in range(n_parts)]
    for i in order:
        p = int(np.argmin(load))
        parts[p].append(int(i))
        load[p] += float(costs[i])
    return parts


def _megabytes(reports: list[Any], name: str) -> str:
    """Each part's ``name`` bytes in MB, in part order, for a log line."""
    ordered = sorted(reports, key=lambda r: r.part)
    return "/".join(f"{getattr(r, name, 0) / 1e6:.1f}" for r in ordered)


def block_at(part: int, substep: int, n_parts: int) -> int:
    """The block part ``part`` meets in sub-step ``substep``."""
    return (part + substep) % n_parts


def start(
    model: PartitionedModel,
    parts: Partitions,
    batches: Sequence[Batch],
    partition_of: Callable[[np.ndarray, int], Any],
    rng: np.random.Generator,
    start_counts: Callable[[], np.ndarray] | None = None,
) -> ESVIRun:
    """Deal the batches, cut the vocabulary by token mass, build shards and blocks.

    ``start_counts()``, for a model made ``warm``: topic-word counts (K, V) to
    start from (the only K x V array in the driver, made and sliced by block
    once); the first rotation then gives every entry its first
    responsibilities against them, and they leave the blocks after it."""
    P = parts.n_parts
    costs = [float(getattr(b, "cost", 1.0)) for b in batches]
    dealt = deal_batches(costs, P, rng)
    idle = sum(1 for d in dealt if not d)
    if idle:
        logger.warning(
            "ESVI: %d of the %d parts got no batch of documents (the data has %d batches): "
            "their workers only hold and pass on blocks. Cut the data into at least %d "
            "batches (a smaller batch_size, or more Parquet row groups) to put them to work",
            idle, P, len(batches), P,
        )  # fmt: skip
    loaders = [[batches[i] for i in d] for d in dealt]
    mass_h = parts.run(model.word_mass, [(lo,) for lo in loaders], None, 1)
    masses = parts.gather([h[0] for h in mass_h])
    parts.release([h[0] for h in mass_h])
    mass = np.sum(masses, axis=0)
    partition = partition_of(mass, P)
    shared = parts.broadcast(partition)
    out = parts.run(
        lambda lo, p, part: model.init_shard(lo, p, part),
        [(lo, p) for p, lo in enumerate(loaders)], shared, 1 + P,
    )  # fmt: skip
    shards = [o[0] for o in out]
    # block b starts on part b, which meets it in sub-step 0
    made = parts.run(
        lambda b, *rest: model.make_block(b, rest[-1], *rest[:-1]),
        [(b, *[out[p][1 + b] for p in range(P)]) for b in range(P)], shared, 2,
    )  # fmt: skip
    parts.release([h for o in out for h in o[1:]])
    blocks = [m[0] for m in made]
    parts.release([shared])
    if start_counts is not None:
        counts = start_counts()
        seeded = parts.run(
            lambda bl, c, _: model.seed_block(bl, c),
            [(blocks[b], counts[:, partition.words[b]].T) for b in range(P)], None, 2,
        )  # fmt: skip
        del counts
        parts.release(blocks + [m[1] for m in made])
        blocks = [s[0] for s in seeded]
        made = seeded
    block_reports = parts.gather([m[1] for m in made])
    parts.release([m[1] for m in made])
    pi = np.sum([r.colsum for r in block_reports], axis=0)
    run = ESVIRun(partition, shards, blocks, pi, n_tokens=float(mass.sum()))
    run.colsums = [np.asarray(r.colsum) for r in block_reports]
    run.held = list(range(P))
    run.warm = start_counts is not None
    logger.info(
        "ESVI: %d parts, %d batches; block token mass %s", P, len(batches),
        ", ".join(f"{m:.0f}" for m in partition.mass),
    )  # fmt: skip
    return run


def _identity(obj: Any, _: Any) -> Any:
    return obj


def move_blocks(parts: Partitions, run: ESVIRun, met: list[int]) -> list[Handle]:
    """Block ``met[p]`` brought to part p, for every p, before the sub-step's work:
    the moves are waited for and the blocks' old copies freed, so a worker
    holds two blocks only while they cross, never while it computes."""
    if parts.n_parts == 1:
        return [run.blocks[met[0]]]
    moved = parts.run(_identity, [(run.blocks[b],) for b in met], None, 1)
    moved_blocks = [m[0] for m in moved]
    parts.wait(moved_blocks)
    parts.release(run.blocks)
    run.blocks = [moved_blocks[met.index(b)] for b in range(len(met))]
    parts.settle()
    return moved_blocks


def substep(model: PartitionedModel, parts: Partitions, run: ESVIRun, s: int) -> float:
    """One exact-mode sub-step: part p's shard meets block ``(p + s) mod P``
    (brought to it first, :func:`move_blocks`); then the totals ``pi`` are summed
    again and the ELBO is returned. The sub-step updates the shards and blocks
    it is given in place, and the run holds the new ones."""
    P = parts.n_parts
    met = [block_at(p, s, P) for p in range(P)]
    here = move_blocks(parts, run, met)
    if run.stale is None:  # exact: every part reads the all-reduced totals, K floats
        # sent inside the tasks themselves (no round trip of their own)
        out = parts.run(model.substep, [(run.shards[p], here[p]) for p in range(P)], run.pi, 3)
    else:  # stale: every part reads its own view
        views = run.stale.views
        out = parts.run(
            lambda sh, bl, view, _: model.substep(sh, bl, view),
            [(run.shards[p], here[p], views[p]) for p in range(P)], None, 3,
        )  # fmt: skip
    reports = parts.gather([o[2] for o in out])
    parts.release([o[2] for o in out])
    parts.release(run.shards + run.blocks)
    run.shards = [o[0] for o in out]
    by_block = _place_blocks(run, met, [o[1] for o in out], reports)
    run.reports = list(reports)
    run.sums = {
        "alloc": float(sum(r.alloc for r in reports)),
        "H": float(sum(r.H for r in reports)),
    }
    elbo = model.elbo(reports, by_block, run.pi)
    run.substep_elbo.append(elbo)
    return elbo


def _place_blocks(
    run: ESVIRun, where: list[int], new: list[Handle], reports: list[Any]
) -> list[Any]:
    """Part p's new block is block ``where[p]``: store them in block order, sum the
    totals ``pi`` from the blocks' column sums in block order (the same order on
    every schedule, so the sums are reproducible), and return the reports in
    block order."""
    blocks: list[Handle] = [None] * len(new)
    for p, handle in enumerate(new):
        blocks[where[p]] = handle
    run.blocks = blocks
    run.held = list(where)
    by_block = sorted(reports, key=lambda r: r.block)
    if run.stale is not None and run.colsums:  # each part's change of the totals
        by_part = sorted(reports, key=lambda r: r.part)
        run.stale.record([r.colsum - run.colsums[r.block] for r in by_part])
    run.colsums = [np.asarray(r.colsum) for r in by_block]
    run.pi = np.sum([r.colsum for r in by_block], axis=0)
    return by_block


def drop_start(model: PartitionedModel, parts: Partitions, run: ESVIRun) -> None:
    """Take the start's counts out of every block where it lies (after the first
    rotation, when every shard has its first responsibilities); the totals and
    the ELBO follow."""
    P = parts.n_parts
    held = holding(run, P)
    out = parts.run(
        lambda bl, _: model.drop_start(bl), [(run.blocks[held[p]],) for p in range(P)], None, 2
    )
    reports = parts.gather([o[1] for o in out])
    parts.release([o[1] for o in out] + run.blocks)
    stale, run.stale = run.stale, None  # the start's counts leave: not a part's change
    by_block = _place_blocks(run, held, [o[0] for o in out], reports)
    if stale is not None:  # every view synchronized with the totals without them
        run.stale = StaleTotals.start(run.pi, P)
    run.warm = False
    run.substep_elbo[-1] = model.elbo(run.reports, by_block, run.pi)


def rotate(
    model: PartitionedModel,
    parts: Partitions,
    run: ESVIRun,
    n_rotations: int,
    on_substep: Callable[[ESVIRun, int], None] | None = None,
) -> ESVIRun:
    """``n_rotations`` rotations of P sub-steps each; ``on_substep(run, s)`` after each.
    The time trace goes on from a resumed run's last time."""
    t0 = time.perf_counter() - (run.time_trace[-1] if run.time_trace else 0.0)
    for _ in range(n_rotations):
        for s in range(parts.n_parts):
            substep(model, parts, run, s)
            if run.warm:  # the ELBO of a state that still holds the start's counts
                run.substep_elbo[-1] = float("nan")
            if on_substep is not None:
                on_substep(run, s)
        end_rotation(model, parts, run, t0, "rotation")
    return run


def end_rotation(
    model: PartitionedModel, parts: Partitions, run: ESVIRun, t0: float, schedule: str
) -> None:
    """What ends a rotation on either schedule: the start's counts leave the
    blocks after the first (the ELBO follows), the rotation's ELBO and time are
    traced (from ``t0``) and logged with the parts' sizes."""
    if run.warm:
        drop_start(model, parts, run)
    run.elbo_trace.append(run.substep_elbo[-1])
    run.time_trace.append(time.perf_counter() - t0)
    logger.info(
        "ESVI %s %d: ELBO %.6e (%.4f per token), %.1f s; per part: block held %s, "
        "its last block %s MB, shard %s MB",
        schedule, len(run.elbo_trace), run.elbo_trace[-1],
        run.elbo_trace[-1] / max(run.n_tokens, 1.0), run.time_trace[-1], run.held,
        _megabytes(run.reports, "block_nbytes"), _megabytes(run.reports, "shard_nbytes"),
    )  # fmt: skip


def held_blocks(n_parts: int) -> list[int]:
    """The block each part holds after a complete rotation (where a fit leaves them)."""
    return [block_at(p, n_parts - 1, n_parts) for p in range(n_parts)]


def _from_blocks(
    model: PartitionedModel, parts: Partitions, run: ESVIRun, words: np.ndarray, name: str
) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(positions in words, values)`` of ``words`` from every block, each computed
    where the block lies by the model's method ``name``."""
    held = holding(run, parts.n_parts)
    pi = parts.broadcast(run.pi)
    out = parts.run(
        lambda bl, pi_: getattr(model, name)(bl, words, pi_),
        [(run.blocks[held[p]],) for p in range(parts.n_parts)], pi, 1,
    )  # fmt: skip
    found = parts.gather([o[0] for o in out])
    parts.release([o[0] for o in out] + [pi])
    return found


def topic_columns(
    model: PartitionedModel, parts: Partitions, run: ESVIRun, words: np.ndarray
) -> np.ndarray:
    """``E[phi]`` (K, len(words)) of the words ``words`` (sorted ids) only: each
    block sends its own of them, computed where it lies; for heldout scoring
    and transforms without gathering the model."""
    topics = np.full((run.pi.size, words.size), np.nan)
    for at, cols in _from_blocks(model, parts, run, words, "block_columns"):
        topics[:, at] = cols
    if np.isnan(topics).any():
        raise ValueError("word ids outside the model's vocabulary")
    return topics


def topic_log_rows(
    model: PartitionedModel, parts: Partitions, run: ESVIRun, words: np.ndarray
) -> np.ndarray:
    """``E[log phi]`` (len(words), K) of the words ``words`` (sorted ids) only, as
    the local step reads it, each block computing its own of them where it lies."""
    rows = np.full((words.size, run.pi.size), np.nan)
    for at, values in _from_blocks(model, parts, run, words, "block_log_rows"):
        rows[at] = values
    if np.isnan(rows).any():
        raise ValueError("word ids outside the model's vocabulary")
    return rows


def gather_blocks(parts: Partitions, run: ESVIRun) -> Any:
    """Every block, fetched to the driver one at a time (a generator of
    ``(block index, block)``): only for a user who asks for the whole model."""
    for b, handle in enumerate(run.blocks):
        yield b, parts.gather([handle])[0]


def save_blocks(
    model: PartitionedModel, parts: Partitions, run: ESVIRun, store: BlockStore,
    meta: dict[str, Any],
) -> None:  # fmt: skip
    """A fitted model into ``store``: every part writes the block it holds on its
    own worker (atomically), then the driver writes the partition and the
    manifest naming the blocks, the totals and ``meta``."""
    held = holding(run, parts.n_parts)
    out = parts.run(
        lambda bl, r: store.write_part(r, -1, None, bl.index, model.block_state(bl)),
        [(run.blocks[held[p]],) for p in range(parts.n_parts)], len(run.elbo_trace), 1,
    )  # fmt: skip
    written = parts.gather([o[0] for o in out])
    parts.release([o[0] for o in out])
    store.write_partition(model.partition_state(run.partition))
    store.commit(
        len(run.elbo_trace), sorted(written, key=lambda e: e["block_index"]),
        {"n_parts": parts.n_parts, "pi": [float(x) for x in run.pi], **meta},
    )  # fmt: skip


def load_blocks(
    model: PartitionedModel, parts: Partitions, store: BlockStore
) -> tuple[ESVIRun, dict[str, Any]]:
    """A saved model's blocks read back, each on the part that will hold it, as a
    run without shards (:func:`save_blocks`); and its manifest."""
    manifest = store.latest()
    if manifest is None:
        where = getattr(store, "folder", store)
        raise DataError(f"{where} holds no saved ESVI blocks (no manifest)")
    P = int(manifest["n_parts"])
    if P != parts.n_parts:
        raise ValueError(f"the saved model has {P} blocks; {parts.n_parts} parts were opened")
    entries = {int(e["block_index"]): e for e in manifest["parts"]}
    held = held_blocks(P)
    out = parts.run(
        lambda e, m: model.block_from_state(store.read(m, e["block"])),
        [(entries[held[p]],) for p in range(P)], manifest, 1,
    )  # fmt: skip
    blocks: list[Handle] = [None] * P
    for p, o in enumerate(out):
        blocks[held[p]] = o[0]
    run = ESVIRun(
        model.partition_from_state(store.read_partition()), [], blocks,
        np.asarray(manifest["pi"], dtype=np.float64),
    )  # fmt: skip
    run.held = held
    return run, manifest


def checkpoint(
    model: PartitionedModel, parts: Partitions, run: ESVIRun, store: BlockStore,
    settings: dict[str, Any],
) -> None:  # fmt: skip
    """Write the state after a complete rotation: every part its shard and the
    block it holds, on its own worker; then the manifest (with ``settings``, the
    totals and the traces). The vocabulary partition is written only while the
    folder has no manifest, so a manifest never names blocks of another
    partition than the one beside it."""
    P = parts.n_parts
    rotation = len(run.elbo_trace)
    if store.latest() is None:
        store.write_partition(model.partition_state(run.partition))
    held = holding(run, P)
    out = parts.run(
        lambda sh, bl, r: store.write_part(
            r, sh.part, model.shard_state(sh), bl.index, model.block_state(bl)
        ),
        [(run.shards[p], run.blocks[held[p]]) for p in range(P)], rotation, 1,
    )  # fmt: skip
    written = parts.gather([o[0] for o in out])
    parts.release([o[0] for o in out])
    meta = {
        "settings": settings,
        "n_parts": P,
        "pi": [float(x) for x in run.pi],
        "elbo_trace": run.elbo_trace,
        "substep_elbo": run.substep_elbo,
        "time_trace": run.time_trace,
        "n_tokens": run.n_tokens,
        "sums": run.sums,
        "colsums": [c.tolist() for c in run.colsums],
    }
    if run.stale is not None:
        meta["stale"] = run.stale.state()
    store.commit(rotation, written, meta)


_ABSENT = object()  # a setting a checkpoint or a fit does not have


def _settings_diff(manifest: dict[str, Any], settings: dict[str, Any], n_parts: int) -> str:
    """What differs between a checkpoint's settings and a fit's, one clause each;
    a setting the checkpoint lacks was added to lsdask after it was written."""
    written = {**manifest["settings"], "parts": manifest["n_parts"]}
    wanted = {**settings, "parts": n_parts}
    clauses = []
    for key in sorted(set(written) | set(wanted), key=str):
        was, now = written.get(key, _ABSENT), wanted.get(key, _ABSENT)
        if was == now:
            continue
        then = "not recorded (written before lsdask had it)" if was is _ABSENT else repr(was)
        here = "not set" if now is _ABSENT else repr(now)
        clauses.append(f"{key}: checkpoint {then}, this fit {here}")
    return "; ".join(clauses)


def resume(
    model: PartitionedModel, parts: Partitions, store: BlockStore, settings: dict[str, Any]
) -> ESVIRun | None:
    """The run of the last complete rotation in ``store``, each part's shard and
    block read by its own worker; None when there is none. A ValueError when it
    was written with other settings or another number of parts."""
    manifest = store.latest()
    if manifest is None:
        return None
    missing = [k for k in _MANIFEST_META if k not in manifest]
    if missing:
        where = getattr(store, "folder", store)
        raise DataError(
            f"the ESVI checkpoint manifest in {where} lacks {missing}: it was written by "
            f"another version or modified. Restore {where} from a copy to resume it, or start "
            "afresh: remove it (or give another checkpoint_dir) and fit without resume"
        )
    if manifest["settings"] != settings or manifest["n_parts"] != parts.n_parts:
        raise ValueError(
            f"the ESVI checkpoint in {getattr(store, 'folder', store)} was written with other "
            f"settings: {_settings_diff(manifest, settings, parts.n_parts)}. Use the "
            "checkpoint's settings to resume it, or another checkpoint folder"
        )
    P = parts.n_parts
    entries = sorted(manifest["parts"], key=lambda e: e["part"])
    out = parts.run(
        lambda e, m: (
            model.shard_from_state(store.read(m, e["shard"])),
            model.block_from_state(store.read(m, e["block"])),
        ),
        [(e,) for e in entries], manifest, 2,
    )  # fmt: skip
    blocks: list[Handle] = [None] * P
    for e, o in zip(entries, out, strict=True):
        blocks[e["block_index"]] = o[1]
    run = ESVIRun(
        model.partition_from_state(store.read_partition()), [o[0] for o in out], blocks,
        np.asarray(manifest["pi"], dtype=np.float64),
        list(manifest["elbo_trace"]), list(manifest["substep_elbo"]),
        list(manifest["time_trace"]), float(manifest["n_tokens"]),
    )  # fmt: skip
    run.held = [int(e["block_index"]) for e in entries]
    run.sums = {k: float(v) for k, v in manifest["sums"].items()}
    run.colsums = [np.asarray(c, dtype=np.float64) for c in manifest.get("colsums", [])]
    if "stale" in manifest:
        run.stale = StaleTotals.from_state(manifest["stale"])
    logger.info("ESVI: resumed after rotation %d", manifest["rotation"])
    return run
