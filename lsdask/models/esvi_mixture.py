"""ESVI for finite mixtures: the components cut into blocks (esvi paper, Alg. 4, App. D).

A *component block* holds, for some of the K components, their statistics
(``N_k`` and the observation model's, e.g. ``xx`` for the zero-mean Gaussian)
and the posterior the observation model's global step makes of them
(:class:`ComponentBlock`). Each worker owns a *shard* of rows with their
dense responsibilities ``z`` (n x K, global component ids) and keeps it.

A sub-step updates every row of a shard over the components of one block
only (Theorem 1): with ``m_i = sum_{k in block} z_ik`` the row's mass in the
block, ``z*_ik = m_i softmax_{k in block}(u_ik)``, where
``u_ik = psi(theta_k) + E[log F(x_i | phi_k)]`` (``psi(sum theta)`` cancels).
The block's statistics change by the rows' ``z* - z`` and its posterior is
recomputed. Every row keeps its mass in the block, so the components are
dealt into new blocks at random (seeded) at every rotation: otherwise a row
could never move its mass to a component of another block.

With ``q(pi)`` and ``q(phi)`` at their optimum given ``z``
(``theta = alpha / K + N``), the ELBO is, summed from per-block and per-shard
parts,

    sum_{k in block} [obs ELBO_k + log Gamma(theta_k)]            (per block)
  - log Gamma(alpha + N) - log B(alpha / K 1_K)                    (N: all rows)
  + sum_i H(z_i)                                                   (per shard)

and it never decreases from one sub-step to the next.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import digamma, gammaln

from lsdask.errors import DataError
from lsdask.models.observation import ObservationModel
from lsdask.models.stats import SuffStats


@dataclass(frozen=True, eq=False)
class MixtureShard:
    """One worker's rows and their responsibilities (never moves)."""

    part: int
    rows: Any  # the rows as the observation model prepared them
    z: np.ndarray  # (n, K)
    H: float  # sum_i H(z_i)
    data: Any = None  # the rows as loaded (dense or CSR): what a checkpoint writes

    @property
    def n_rows(self) -> int:
        return int(self.z.shape[0])


@dataclass(frozen=True, eq=False)
class ComponentBlock:
    """Some components' statistics and posterior."""

    index: int
    comps: np.ndarray  # (K_b,) global component ids
    stats: dict[str, np.ndarray]  # "N" (K_b,) and the observation model's, per component
    post: Any  # the observation model's posterior of these components

    @property
    def nbytes(self) -> int:
        return int(self.comps.nbytes + sum(a.nbytes for a in self.stats.values()))


@dataclass(frozen=True)
class BlockReport:
    """A sub-step's sums for the driver: a few scalars."""

    part: int
    block: int
    obs_elbo: float  # the block's observation ELBO terms
    lgamma_theta: float  # sum_{k in block} log Gamma(alpha / K + N_k)
    mass: float  # sum_{k in block} N_k
    H: float  # the shard's entropy
    n_rows: int


def deal_components(K: int, n_blocks: int, rng: np.random.Generator) -> list[np.ndarray]:
    """The K components dealt into ``n_blocks`` blocks at random (sizes within one)."""
    order = rng.permutation(K)
    return [np.sort(order[b::n_blocks]) for b in range(n_blocks)]


def random_resp(rng: np.random.Generator, n: int, K: int) -> np.ndarray:
    """First responsibilities: uniform random weights, normalized per row."""
    w = rng.random((n, K))
    return w / w.sum(axis=1, keepdims=True)


@dataclass(frozen=True)
class ESVIMixture:
    """The math of ESVI for a finite mixture with any observation model.

    Parameters
    ----------
    observation : a configured :class:`ObservationModel` (its data defaults set)
    n_components : K
    alpha : total concentration of the weights (``alpha / K`` per component)
    seed : seeds the first responsibilities (per shard) and the component deals
    first_resp : ``first_resp(rng, n, K)``, the first responsibilities of a shard
        (default :func:`random_resp`)
    """

    observation: ObservationModel[Any]
    n_components: int
    alpha: float
    seed: int = 0
    first_resp: Callable[[np.random.Generator, int, int], np.ndarray] = random_resp

    def deal(self, rotation: int, n_blocks: int) -> list[np.ndarray]:
        """The component blocks of rotation ``rotation`` (seeded)."""
        return deal_components(
            self.n_components, n_blocks, np.random.default_rng([self.seed, 1, rotation])
        )

    # ---- before the rotations
    def load_shard(self, loaders: list[Any], part: int) -> MixtureShard:
        """The rows of ``part`` (prepared), without responsibilities yet (zeros)."""
        import scipy.sparse as sp

        loaded = [loader.load() for loader in loaders]
        if loaded and sp.issparse(loaded[0]):
            X = sp.vstack(loaded, format="csr")
        else:
            X = np.concatenate([np.asarray(x, dtype=np.float64) for x in loaded])
        return MixtureShard(
            part, self.observation.prepare(X), np.zeros((X.shape[0], self.n_components)), 0.0, X
        )

    def init_shard(
        self, loaders: list[Any], part: int, blocks: list[np.ndarray]
    ) -> tuple[Any, ...]:
        """The shard of ``part`` with its first responsibilities, and per block the
        shard's statistics of the block's components."""
        shard = self.load_shard(loaders, part)
        rng = np.random.default_rng([self.seed, 0, part])
        return self.with_resp(shard, self.first_resp(rng, shard.n_rows, self.n_components), blocks)

    def with_resp(
        self, shard: MixtureShard, z: np.ndarray, blocks: list[np.ndarray]
    ) -> tuple[Any, ...]:
        """The shard with responsibilities ``z``, and per block its statistics of them."""
        z = np.ascontiguousarray(z)
        new = MixtureShard(shard.part, shard.rows, z, _entropy(z), shard.data)
        return (new, *[self._stats(shard.rows, z[:, comps]) for comps in blocks])

    # ---- a start from given statistics (the seeds of ``init``, as memoized VI starts)
    def weigh_start(
        self, shard: MixtureShard, block: ComponentBlock, shared: Any = None
    ) -> MixtureShard:
        """The shard with its rows' log weights ``u`` of the block's components in
        place of their responsibilities (the start rotation; nothing else changes)."""
        z = shard.z.copy()
        z[:, block.comps] = self.log_weights(shard, block)
        return MixtureShard(shard.part, shard.rows, z, 0.0, shard.data)

    def finish_start(self, shard: MixtureShard, blocks: list[np.ndarray]) -> tuple[Any, ...]:
        """After the start rotation (every component's log weights in place): the
        responsibilities, a softmax over all K per row, and per block the shard's
        statistics of them."""
        u = shard.z - shard.z.max(axis=1, keepdims=True)
        np.exp(u, out=u)
        u /= u.sum(axis=1, keepdims=True)
        return self.with_resp(shard, u, blocks)

    def _stats(self, rows: Any, R: np.ndarray) -> dict[str, np.ndarray]:
        parts = {"N": R.sum(axis=0), **self.observation.empty_stats(R.shape[1])}
        self.observation.summarize_dense(rows, np.ascontiguousarray(R), parts)
        return parts

    def make_block(
        self, index: int, comps: np.ndarray, *stats: dict[str, np.ndarray]
    ) -> ComponentBlock:
        """Block ``index`` of the components ``comps`` from every shard's statistics,
        summed in part order."""
        total = {name: np.sum([s[name] for s in stats], axis=0) for name in stats[0]}
        return self._block(index, comps, total)

    def _block(self, index: int, comps: np.ndarray, stats: dict[str, np.ndarray]) -> ComponentBlock:
        return ComponentBlock(index, comps, stats, self.observation.global_step(SuffStats(**stats)))

    # ---- re-dealing the components at a rotation's start
    def split_block(self, block: ComponentBlock, blocks: list[np.ndarray]) -> tuple[Any, ...]:
        """The block's statistics cut by the new blocks ``blocks``: per new block,
        ``(comps, stats)`` of the components it takes from this one."""
        out = []
        for comps in blocks:
            take = np.flatnonzero(np.isin(block.comps, comps))
            out.append((block.comps[take], {n: a[take] for n, a in block.stats.items()}))
        return tuple(out)

    def join_block(self, index: int, comps: np.ndarray, *pieces: tuple[Any, ...]) -> ComponentBlock:
        """New block ``index`` of the components ``comps`` from the pieces of the old ones."""
        names = list(pieces[0][1])
        stats = {n: np.zeros((comps.size, *pieces[0][1][n].shape[1:])) for n in names}
        for got, piece in pieces:
            at = np.searchsorted(comps, got)
            for n in names:
                stats[n][at] = piece[n]
        return self._block(index, comps, stats)

    # ---- checkpoints (:func:`lsdask.learn.esvi_mixture.checkpoint_mixture`)
    def shard_state(self, shard: MixtureShard) -> dict[str, np.ndarray]:
        """A shard as named arrays: its rows as loaded and their responsibilities
        (:meth:`shard_from_state` prepares the rows again)."""
        import scipy.sparse as sp

        out = {"part": np.array(shard.part), "z": shard.z, "H": np.array(shard.H)}
        if sp.issparse(shard.data):
            X = sp.csr_matrix(shard.data)
            out |= {"X_data": X.data, "X_indices": X.indices, "X_indptr": X.indptr,
                    "X_shape": np.array(X.shape)}  # fmt: skip
        else:
            out["X"] = np.asarray(shard.data)
        return out

    def shard_from_state(self, state: dict[str, np.ndarray]) -> MixtureShard:
        import scipy.sparse as sp

        if "X" in state:
            X: Any = state["X"]
        else:
            X = sp.csr_matrix(
                (state["X_data"], state["X_indices"], state["X_indptr"]),
                shape=tuple(int(n) for n in state["X_shape"]),
            )
        z = state["z"]
        if z.shape != (X.shape[0], self.n_components):
            raise DataError(
                f"the responsibilities in {_where(state)} are {z.shape}, not (rows "
                f"{X.shape[0]}, K {self.n_components}): the file does not belong to this fit. "
                "Restore the checkpoint folder from a copy, or remove it and fit without resume"
            )
        return MixtureShard(
            int(state["part"]), self.observation.prepare(X), z, float(state["H"]), X
        )

    def block_state(self, block: ComponentBlock) -> dict[str, np.ndarray]:
        """A block as named arrays: its components and their statistics (the
        posterior is made again from them)."""
        stats = {f"stat_{n}": a for n, a in block.stats.items()}
        return {"index": np.array(block.index), "comps": block.comps, **stats}

    def block_from_state(self, state: dict[str, np.ndarray]) -> ComponentBlock:
        comps = state["comps"]
        stats = {k[5:]: state[k] for k in state if k.startswith("stat_")}
        names = ["N", *self.observation.empty_stats(1)]
        bad = [n for n in names if n not in stats or len(stats[n]) != comps.size]
        if bad or comps.size == 0 or comps.max(initial=0) >= self.n_components:
            raise DataError(
                f"the component block in {_where(state)} lacks or mis-sizes the statistics "
                f"{bad or names} of its {comps.size} components (of K={self.n_components}): "
                "the file does not belong to this fit. Restore the checkpoint folder from a "
                "copy, or remove it and fit without resume"
            )
        return self._block(int(state["index"]), comps, {n: stats[n] for n in names})

    def partition_state(self, deal: list[np.ndarray]) -> dict[str, np.ndarray]:
        """The first rotation's component blocks (later ones follow from the seed)."""
        return {f"comps_{b}": comps for b, comps in enumerate(deal)}

    def partition_from_state(self, state: dict[str, np.ndarray]) -> list[np.ndarray]:
        return [state[f"comps_{b}"] for b in range(sum(1 for k in state if k.startswith("comps_")))]

    # ---- a sub-step
    def log_weights(self, shard: MixtureShard, block: ComponentBlock) -> np.ndarray:
        """``u_ik = psi(theta_k) + E[log F(x_i | phi_k)]`` of the shard's rows and the
        block's components, (n, K_b)."""
        theta = self.alpha / self.n_components + block.stats["N"]
        u = self.observation.expected_log_lik(shard.rows, block.post)
        u += digamma(theta)
        return np.asarray(u)

    def substep(
        self, shard: MixtureShard, block: ComponentBlock, shared: Any = None
    ) -> tuple[MixtureShard, ComponentBlock, BlockReport]:
        """Every row of the shard over the block's components (Theorem 1) against
        the snapshot; the new shard, the new block and their sums."""
        comps = block.comps
        u = self.log_weights(shard, block)
        u -= u.max(axis=1, keepdims=True)
        np.exp(u, out=u)
        old = shard.z[:, comps]
        mass = old.sum(axis=1, keepdims=True)
        new = u * (mass / u.sum(axis=1, keepdims=True))
        z = shard.z.copy()
        z[:, comps] = new
        delta = self._stats(shard.rows, new - old)
        stats = {n: block.stats[n] + delta[n] for n in block.stats}
        new_block = self._block(block.index, comps, stats)
        new_shard = MixtureShard(shard.part, shard.rows, z, _entropy(z), shard.data)
        return new_shard, new_block, self.report(new_block, new_shard)

    def report(self, block: ComponentBlock, shard: MixtureShard | None) -> BlockReport:
        N = block.stats["N"]
        obs = self.observation.elbo(SuffStats(**block.stats), block.post)
        return BlockReport(
            -1 if shard is None else shard.part, block.index, float(obs),
            float(gammaln(self.alpha / self.n_components + N).sum()), float(N.sum()),
            0.0 if shard is None else shard.H, 0 if shard is None else shard.n_rows,
        )  # fmt: skip

    def elbo(self, shards: list[BlockReport], blocks: list[BlockReport]) -> float:
        """The ELBO from every shard's and block's sums."""
        K, a = self.n_components, self.alpha / self.n_components
        n = sum(r.mass for r in blocks)
        prior = K * gammaln(a) - gammaln(self.alpha)
        alloc = sum(r.lgamma_theta for r in blocks) - gammaln(self.alpha + n) - prior
        return float(sum(r.obs_elbo for r in blocks) + alloc + sum(r.H for r in shards))


def _where(state: dict[str, np.ndarray]) -> str:
    """The checkpoint file the arrays ``state`` came from, where known."""
    return str(getattr(state, "path", "a checkpoint file"))


def _entropy(z: np.ndarray) -> float:
    """``sum_i H(z_i)`` (0 log 0 = 0)."""
    pos = z[z > 0]
    return float(-(pos * np.log(pos)).sum())
