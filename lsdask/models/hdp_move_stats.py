"""What a move proposes, as statistics: maps of topics, the closed forms of a
deleted or merged topic, and the proposal's objective.

The pieces :mod:`lsdask.models.hdp_deletes` and :mod:`lsdask.models.hdp_moves`
share (see the latter for the moves themselves). Both maps of topics are linear
in the topic-indexed statistics (a 0/1 matrix ``T`` with ``new = T @ old``), so
:func:`map_topics` serves the memo edits and the proposals alike.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.special import digamma, gammaln

from lsdask.kernels.topic_subset import kept_topic_entries
from lsdask.models.dirichlet_logs import SparseDirichletLogs
from lsdask.models.hdp_sticks import expected_beta, optimize_sticks
from lsdask.models.row_threads import map_blocks, usable_threads
from lsdask.models.stats import SparseBlock, Stat, SuffStats, as_dense

#: :class:`lsdask.models.hdp.HDPModel` and :class:`~lsdask.models.hdp.HDPGlobals`,
#: which import this module (named here without importing them back)
HDPModel = Any
HDPGlobals = Any

#: reruns of fewer documents than this run in the calling thread
MIN_BLOCK_DOCS = 200
#: the additive fields of a merge pair's terms, one entry per planned pair
PAIR_FIELDS = ("pair_H", "pair_S", "pair_W", "pair_C")
#: fields indexed by topic on their first axis (and, for cooc, their second)
_TOPIC_ROWS = ("words", "N", "Dused")


@dataclass(frozen=True)
class MovePlan:
    """The moves a lap prepares: delete candidates and merge pairs (topic indices
    of the lap's K), and the lap they belong to."""

    lap: int
    deletes: tuple[int, ...] = ()
    pairs: tuple[tuple[int, int], ...] = ()

    def to_list(self) -> list[float]:
        """``[lap, n_deletes, *deletes, n_pairs, *j, k, ...]`` (a checkpoint's JSON)."""
        flat = [self.lap, len(self.deletes), *self.deletes, len(self.pairs)]
        return [float(x) for x in flat + [t for pair in self.pairs for t in pair]]

    @classmethod
    def from_list(cls, values: Sequence[float]) -> MovePlan:
        v = [int(x) for x in values]
        nd = v[1]
        deletes = tuple(v[2 : 2 + nd])
        npairs = v[2 + nd]
        flat = v[3 + nd : 3 + nd + 2 * npairs]
        return cls(v[0], deletes, tuple(zip(flat[0::2], flat[1::2], strict=True)))

    def pair_arrays(self, K: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(pair_map (K, K) int32, j (P,), k (P,))`` as the kernel reads them."""
        pj = np.array([j for j, _ in self.pairs], dtype=np.int64)
        pk = np.array([k for _, k in self.pairs], dtype=np.int64)
        pair_map = np.full((K, K) if self.pairs else (0, 0), -1, dtype=np.int32)
        for p, (j, k) in enumerate(self.pairs):
            pair_map[j, k] = pair_map[k, j] = p
        return pair_map, pj, pk


def topic_map(K: int, keep: Sequence[int], merge: tuple[int, int] | None = None) -> sp.csr_matrix:
    """The (K', K) 0/1 matrix that keeps the topics ``keep`` (in their order) and,
    for ``merge = (j, k)``, adds topic k into topic j (k must not be kept)."""
    rows, cols = list(range(len(keep))), list(keep)
    if merge is not None:
        rows.append(list(keep).index(merge[0]))
        cols.append(merge[1])
    return sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(keep), K))


def _map_rows(value: Stat, T: sp.csr_matrix, both_axes: bool = False) -> Stat:
    """``T @ value`` (and ``@ T.T`` for a square field), sparse blocks kept sparse."""
    if isinstance(value, SparseBlock):
        m = sp.csr_matrix((value.values, (value.rows, value.cols)), shape=value.shape)
        out = (T @ m @ T.T) if both_axes else (T @ m)
        coo = sp.coo_matrix(out)
        return SparseBlock(coo.row, coo.col, coo.data, coo.shape)
    out = T @ value
    return np.asarray(out @ T.T if both_axes else out, dtype=np.float64)


def map_topics(stats: SuffStats, T: sp.csr_matrix) -> dict[str, Stat]:
    """The topic-indexed fields of ``stats`` mapped by ``T`` (rows, and both axes of
    ``cooc``); the other fields as they are (the caller sets ``S``, ``W``, ``Cdir``,
    ``H`` and the pair terms)."""
    out: dict[str, Stat] = {}
    for name, value in stats.items():
        if name in _TOPIC_ROWS:
            out[name] = _map_rows(value, T)
        elif name == "cooc":
            out[name] = _map_rows(value, T, both_axes=True)
        else:
            out[name] = value
    return out


def sparse_sub(a: SuffStats, b: SuffStats) -> SuffStats:
    """``a - b`` keeping sparse blocks sparse (a batch's memo minus its targets')."""
    fields: dict[str, Stat] = {}
    for name, value in a.items():
        other = b[name]
        if isinstance(value, SparseBlock) or isinstance(other, SparseBlock):
            x = _as_csr(value) - _as_csr(other)
            coo = sp.coo_matrix(x)
            fields[name] = SparseBlock(coo.row, coo.col, coo.data, coo.shape)
        else:
            fields[name] = value - other
    return SuffStats(**fields)


def sparse_add(a: SuffStats, b: SuffStats) -> SuffStats:
    fields: dict[str, Stat] = {}
    for name, value in a.items():
        other = b[name]
        if isinstance(value, SparseBlock) and isinstance(other, SparseBlock):
            coo = sp.coo_matrix(_as_csr(value) + _as_csr(other))
            fields[name] = SparseBlock(coo.row, coo.col, coo.data, coo.shape)
        else:
            fields[name] = as_dense(value) + as_dense(other)
    return SuffStats(**fields)


def _as_csr(value: Stat) -> sp.csr_matrix:
    if isinstance(value, SparseBlock):
        return sp.csr_matrix((value.values, (value.rows, value.cols)), shape=value.shape)
    return sp.csr_matrix(value)


# -- the closed-form parts ---------------------------------------------------------


def delete_untouched(
    S: np.ndarray, W: Any, Cdir: Any, n: Any, prior: np.ndarray, j: int
) -> tuple[np.ndarray, Any, Any, np.ndarray]:
    """Delete topic j for documents that hold none of it (``N_dj = 0``): their
    ``q(pi_d)`` merges entry j into the leftover's. ``S`` (..., K + 1), ``W``,
    ``Cdir`` and ``n`` (documents) are sums over such documents fitted with the
    prior ``prior`` (..., K + 1; the leftover's last); leading axes are batches.
    Returns the new ``(S, W, Cdir, prior)``, K entries (+ leftover)."""
    a_j, a_r = prior[..., j], prior[..., -1]
    S_j, S_r = S[..., j], S[..., -1]
    S_r_new = S_r + n * (digamma(a_r + a_j) - digamma(a_r))
    W_new = W + a_j * S_j + a_r * S_r - (a_j + a_r) * S_r_new
    C_new = Cdir + n * (gammaln(a_j) + gammaln(a_r) - gammaln(a_j + a_r))
    S_new = np.delete(S, j, axis=-1)
    S_new[..., -1] = S_r_new
    prior_new = np.delete(prior, j, axis=-1)
    prior_new[..., -1] = a_r + a_j
    return S_new, W_new, C_new, prior_new


def merge_stats(stats: SuffStats, j: int, k: int, p: int) -> SuffStats:
    """The statistics with topic k merged into topic j (``j < k``), by the pair
    terms of slot ``p`` (which ``stats`` must hold for that pair)."""
    K = stats.array("N").shape[0]
    keep = [t for t in range(K) if t != k]
    T = topic_map(K, keep, (j, k))
    fields = map_topics(stats, T)
    S = stats.array("S").copy()
    S[j] = stats.array("pair_S")[p]
    fields["S"] = np.delete(S, k)
    fields["H"] = stats.array("H") + stats.array("pair_H")[p]
    fields["W"] = stats.array("W") + stats.array("pair_W")[p]
    fields["Cdir"] = stats.array("Cdir") + stats.array("pair_C")[p]
    if "Dused" in fields and "cooc" in stats.keys():
        # documents using j or k: each one's, less those using both (cooc is the
        # heuristic union elsewhere: it only ranks the next lap's pairs)
        used = as_dense(fields["Dused"]).copy()
        used[keep.index(j)] -= stats.array("cooc")[j, k]
        fields["Dused"] = used
    return SuffStats(**fields)


def sticks_of_weights(beta: np.ndarray) -> np.ndarray:
    """The stick fractions ``rho`` (K,) whose ``E[beta]`` is ``beta`` (K + 1,)."""
    left = 1.0 - np.concatenate([[0.0], np.cumsum(beta[:-2])])
    return np.clip(beta[:-1] / np.maximum(left, 1e-300), 1e-10, 1 - 1e-10)


class MoveJudge:
    """The model and globals a lap's plan is judged against, and the two things
    every judgement needs: a proposal's objective, and a rerun of documents
    without some topics."""

    def __init__(self, model: HDPModel, glob: HDPGlobals, sparsity: int | None) -> None:
        self.model = model
        self.glob = glob
        self.sparsity = sparsity
        self.beta = expected_beta(glob.rho)
        self.a = glob.alpha.copy()
        self.a_rest = float(glob.alpha_rest)
        self._globals: dict[tuple[int, ...], HDPGlobals] = {}  # of each rerun's topics

    def proposal(
        self, stats: SuffStats, keep: Sequence[int], beta: np.ndarray, omega: np.ndarray
    ) -> tuple[HDPModel, HDPGlobals, float]:
        """The model with the topics ``keep``, its globals (sticks re-optimized from
        the weights ``beta``) and its objective at the statistics."""
        model = dataclasses.replace(self.model, n_components=len(keep))
        rho, omega = self.sticks(stats.array("S"), model.row_count(stats), beta, omega)
        glob = model.globals_with_sticks(stats, rho, omega)
        return model, glob, model.elbo(stats, glob)

    def sticks(
        self, S: np.ndarray, D: float, beta: np.ndarray, omega: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """A proposal's sticks: re-optimized for its ``S`` from the weights ``beta``
        (K' + 1,) and ``omega`` (K',)."""
        rho, omega, _ = optimize_sticks(
            S, D, self.model.concentration, self.model.gamma, sticks_of_weights(beta), omega
        )
        return rho, omega

    def prior_of(self, keep: Sequence[int]) -> np.ndarray:
        """The document prior ``(a_k for k in keep, a_rest)`` of a rerun with the
        topics ``keep`` only: the others' prior mass in the leftover's."""
        kept = list(keep)
        gone = np.ones(self.a.shape[0], dtype=bool)
        gone[kept] = False
        return np.append(self.a[kept], self.a_rest + float(self.a[gone].sum()))

    def rerun(
        self, rows: sp.csr_matrix, keep: Sequence[int], plan: MovePlan
    ) -> tuple[SuffStats, np.ndarray]:
        """The local step of ``rows`` with the topics ``keep`` only (their E[log phi]
        as now: the globals' own entries; the prior of :meth:`prior_of`), the plan's
        merge pairs that survive computed in their slots: ``(statistics, the
        documents' topic counts)``."""
        kept = tuple(keep)
        glob = self._rerun_globals(kept, plan)
        model = dataclasses.replace(self.model, n_components=len(kept))
        pieces, doc_topic, _ = model.doc_topic_step(rows, glob, self.sparsity)
        return SuffStats(**pieces), doc_topic

    def rerun_in_blocks(
        self, rows: sp.csr_matrix, keep: Sequence[int], plan: MovePlan
    ) -> list[SuffStats]:
        """:meth:`rerun`'s statistics of ``rows`` in blocks of documents of about equal
        tokens, one per usable core, in threads (the kernel releases the GIL; the
        judgement runs at a lap's end, while the workers wait): each document's
        result is its own, so the blocks' statistics sum to the whole rerun's."""
        self._rerun_globals(tuple(keep), plan)  # made once, before the threads
        n = usable_threads() if rows.shape[0] >= MIN_BLOCK_DOCS else 1
        edges = np.searchsorted(rows.indptr, np.linspace(0, rows.nnz, n + 1)[1:-1])
        cuts = [0, *sorted({int(e) for e in edges} - {0, rows.shape[0]}), rows.shape[0]]
        blocks = list(itertools.pairwise(cuts))
        return map_blocks(lambda a, b: self.rerun(rows[a:b], keep, plan)[0], blocks)

    def _rerun_globals(self, kept: tuple[int, ...], plan: MovePlan) -> HDPGlobals:
        """The globals of a rerun with the topics ``kept`` (made once per set)."""
        if kept not in self._globals:
            prior = self.prior_of(kept)
            self._globals[kept] = dataclasses.replace(
                self.glob, logs=kept_logs(self.glob.logs, kept), stored=None, alpha=prior[:-1],
                rho=self.glob.rho[list(kept)], omega=self.glob.omega[list(kept)],
                alpha_rest=float(prior[-1]), plan=remap_plan(plan, kept),
            )  # fmt: skip
        return self._globals[kept]


def kept_logs(logs: SparseDirichletLogs, kept: Sequence[int]) -> SparseDirichletLogs:
    """``logs.subset(kept)`` (the topics ``kept`` only, renumbered in that order),
    the same arrays, in one compiled pass instead of several over the entries: a
    judgement makes one per delete candidate, while the workers wait."""
    order = np.asarray(kept, dtype=np.int64)
    where = np.full(logs.shape[1], -1, dtype=np.int64)
    where[order] = np.arange(order.shape[0])
    indptr, topics, values = kept_topic_entries(logs.indptr, logs.topics, logs.values, where)
    return SparseDirichletLogs(logs.base[order], indptr, topics, values, logs.prior)


def remap_plan(plan: MovePlan, keep: Sequence[int]) -> MovePlan:
    """The plan over the topics ``keep`` (renumbered): no deletes; a pair whose
    topics are both kept keeps its slot, any other slot holds ``(-1, -1)``."""
    where = {t: i for i, t in enumerate(keep)}
    pairs = tuple(
        (where[j], where[k]) if j in where and k in where else (-1, -1) for j, k in plan.pairs
    )
    return MovePlan(plan.lap, (), pairs)


def valid_slots(values: np.ndarray, plan: MovePlan) -> np.ndarray:
    out = values.copy()
    for p, (j, _) in enumerate(plan.pairs):
        if j < 0:
            out[p] = 0.0
    return out


def mapped(stats: SuffStats, source: Sequence[int], target: Sequence[int]) -> dict[str, Stat]:
    """The topic-indexed fields of ``stats``, whose topics are ``source``, mapped to
    the topics ``target`` (a subset of ``source``; the same numbering)."""
    where = {t: i for i, t in enumerate(source)}
    return map_topics(stats, topic_map(len(source), [where[t] for t in target]))
