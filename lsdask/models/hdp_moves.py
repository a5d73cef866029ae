"""Delete and merge moves of the HDP topic model, judged from the memo.

Hughes, Kim and Sudderth (AISTATS 2015), Sec. 4 and supplement Sec. F. A move
proposes fewer topics; it is accepted only if the surrogate ELBO, recomputed
from the whole-data statistics of the proposal with the topics, the sticks
(re-optimized from the current ones) and eta refitted, is higher than the
current one. Every accepted move is then applied to each batch's memo, so the
memo still sums to the whole-data statistics.

**The plan.** At the start of a lap (:func:`choose_plan`) the model picks
*delete candidates* (topics used by at most ``delete_max_docs`` documents, the
smallest first) and *merge pairs* (ranked by how often the two topics are used
by the same documents and by how alike their word distributions are). The plan
travels with the globals to every local step of the lap, which records what
judging it needs:

- for a merge pair ``p = (j, k)``: the change of the entropy, the merged
  topic's ``sum_d E[log pi_d]`` and the changes of ``W`` and ``Cdir``, with the
  two topics' responsibilities and ``q(pi_d)`` entries added (additive fields
  ``pair_H``, ``pair_S``, ``pair_W``, ``pair_C``): after a full lap a merge is
  judged in O(pairs), with no pass over the data;
- for the delete candidates: the *target documents* (those with ``N_dj > 0``
  for a candidate j; under L-sparse responsibilities every other document holds
  exactly 0 of it), their rows and their part of the batch's statistics, kept
  as the memo entry's notes (:attr:`~lsdask.models.stats.SuffStats.notes`),
  with the prior of the visit.

**Delete** (judged first, in the plan's order, each on the statistics that
include the earlier acceptances). The target documents are rerun without the
candidate (and without the topics already deleted), the leftover's prior taking
their prior mass. Every other document keeps its responsibilities, and its
``q(pi_d)`` merges the deleted topic's entry into the leftover's (the Dirichlet's
aggregation property), whose terms follow in closed form from the visit's prior:
``S_rest += n [psi(a_rest + a_j) - psi(a_rest)]``, ``Cdir += n [lnG(a_j) +
lnG(a_rest) - lnG(a_j + a_rest)]`` and ``W`` accordingly.

**Merge** (then, in the plan's order; a topic takes part in at most one
accepted merge per lap): topic k's statistics are added to topic j's and the
pair's recorded terms replace the two topics' allocation terms.

Both maps of topics are linear in the topic-indexed statistics (a 0/1 matrix
``T`` with ``new = T @ old``), so :func:`map_topics` serves the memo edits and
the proposals alike.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.special import digamma, gammaln

from lsdask.models.dirichlet_logs import DirichletPosterior
from lsdask.models.hdp_sticks import expected_beta, optimize_sticks, surrogate_objective
from lsdask.models.stats import SparseBlock, Stat, SuffStats, as_dense, sum_stats

#: :class:`lsdask.models.hdp.HDPModel` and :class:`~lsdask.models.hdp.HDPGlobals`,
#: which import this module (named here without importing them back)
HDPModel = Any
HDPGlobals = Any

#: the additive fields of a merge pair's terms, one entry per planned pair
PAIR_FIELDS = ("pair_H", "pair_S", "pair_W", "pair_C")
#: fields indexed by topic on their first axis (and, for cooc, their second)
_TOPIC_ROWS = ("words", "N", "Dused")
#: the notes' prefix of the target documents' statistics
_TARGET = "target."


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


@dataclass(frozen=True)
class MoveSettings:
    """How many moves a lap prepares (see :class:`~lsdask.models.hdp.HDPModel`)."""

    delete: bool = False
    merge: bool = False
    delete_max_docs: int = 1000
    max_deletes: int = 10
    max_target_docs: int = 20000
    max_pairs: int = 20
    delete_work: float = 0.1


# -- choosing the plan ---------------------------------------------------------------


def choose_plan(stats: SuffStats, topics: np.ndarray, settings: MoveSettings, lap: int) -> MovePlan:
    """The lap's plan from the whole-data statistics of the last lap and the
    topics ``E[phi]`` (K, V).

    Delete candidates: topics used by at most ``delete_max_docs`` documents,
    fewest tokens first, while their target documents add up to at most
    ``max_target_docs`` and the reruns of judging them (every candidate reruns all
    the lap's target documents) to at most ``delete_work`` times the documents of
    the corpus: a lap's deletes cost at most that fraction of a lap. Merge pairs:
    each pair scored by the larger of the cosine
    similarity of the two topics' document usage (documents using both over the
    geometric mean of each one's) and of their word distributions, the best
    first, smaller topics first among equals, a topic in at most two pairs.
    """
    K = stats.array("N").shape[0]
    N = stats.array("N")
    used = stats.array("Dused") if "Dused" in stats.keys() else np.zeros(K)
    deletes: list[int] = []
    if settings.delete and K > 2:
        work = settings.delete_work * float(stats.array("n_docs")[0])
        targets = 0.0
        for k in np.argsort(N, kind="stable"):
            if len(deletes) >= min(settings.max_deletes, K - 2):
                break
            more = targets + used[k]
            fits = more <= settings.max_target_docs and (len(deletes) + 1) * more <= work
            if used[k] <= settings.delete_max_docs and fits:
                deletes.append(int(k))
                targets = more
    pairs: list[tuple[int, int]] = []
    if settings.merge and K > 2 and settings.max_pairs > 0:
        pairs = _ranked_pairs(stats, topics, used, N, settings.max_pairs, set(deletes))
    return MovePlan(lap, tuple(deletes), tuple(pairs))


def _ranked_pairs(
    stats: SuffStats, topics: np.ndarray, used: np.ndarray, N: np.ndarray, max_pairs: int,
    skip: set[int],
) -> list[tuple[int, int]]:  # fmt: skip
    K = N.shape[0]
    score = np.zeros((K, K))
    if "cooc" in stats.keys():
        both = stats.array("cooc")
        score = both / np.sqrt(np.maximum(np.outer(used, used), 1e-300))
    unit = topics / np.maximum(np.linalg.norm(topics, axis=1, keepdims=True), 1e-300)
    score = np.maximum(score, unit @ unit.T)
    j, k = np.triu_indices(K, 1)
    keep = np.array([a not in skip and b not in skip for a, b in zip(j, k, strict=True)])
    j, k = j[keep], k[keep]
    order = np.lexsort((np.minimum(N[j], N[k]), -score[j, k]))
    taken = np.zeros(K, dtype=np.int64)
    pairs: list[tuple[int, int]] = []
    for i in order:
        a, b = int(j[i]), int(k[i])
        if taken[a] < 2 and taken[b] < 2:
            pairs.append((a, b))
            taken[a] += 1
            taken[b] += 1
            if len(pairs) >= max_pairs:
                break
    return pairs


# -- maps of topics --------------------------------------------------------------------


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


def _sparse_aware_sub(a: SuffStats, b: SuffStats) -> SuffStats:
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


def _sparse_aware_add(a: SuffStats, b: SuffStats) -> SuffStats:
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


# -- judging ---------------------------------------------------------------------------


@dataclass
class MoveRecord:
    """One tried move: its kind, the topics (indices when it was judged), the gain."""

    kind: str
    topics: tuple[int, ...]
    gain: float
    accepted: bool


@dataclass
class MoveOutcome:
    """What judging a lap's plan decided.

    ``model`` and ``rho``/``omega`` are the ones to continue with (the input's
    where nothing was accepted); :meth:`edit` maps one batch's memo entry to the
    accepted topics; ``objective`` is the surrogate ELBO before and after.
    """

    model: HDPModel
    rho: np.ndarray
    omega: np.ndarray
    records: list[MoveRecord] = field(default_factory=list)
    objective: tuple[float, float] = (np.nan, np.nan)
    skipped: str = ""
    _edit: Callable[[SuffStats], SuffStats] | None = None

    @property
    def accepted(self) -> list[MoveRecord]:
        return [r for r in self.records if r.accepted]

    @property
    def n_accepted(self) -> int:
        return len(self.accepted)

    @property
    def carried(self) -> dict[str, list[float]]:
        """The sticks to go on with, as :meth:`HDPModel.carry` writes them (no plan)."""
        return {"rho": [float(x) for x in self.rho], "omega": [float(x) for x in self.omega]}

    def summary(self) -> str:
        """One line: moves tried and accepted, K and the objective's change."""
        tried = {kind: sum(r.kind == kind for r in self.records) for kind in ("delete", "merge")}
        took = {kind: sum(r.kind == kind and r.accepted for r in self.records) for kind in tried}
        before, after = self.objective
        text = (
            f"moves: {took['delete']}/{tried['delete']} deletes, {took['merge']}/"
            f"{tried['merge']} merges accepted; K={self.model.n_components}; "
            f"objective {before:.6e} -> {after:.6e}"
        )
        return text + (f" (deletes skipped: {self.skipped})" if self.skipped else "")

    def edit(self, stats: SuffStats) -> SuffStats:
        """Batch statistics (a memo entry, with its notes) under the accepted moves."""
        return stats if self._edit is None else self._edit(stats)


@dataclass
class _Targets:
    """The delete candidates' target documents of every batch, and the rest."""

    rows: sp.csr_matrix  # all target documents, batch after batch
    stats: SuffStats  # their statistics at the visits, summed
    S_rest: np.ndarray  # (B, K + 1): each batch's S of its other documents
    W_rest: np.ndarray  # (B,)
    C_rest: np.ndarray  # (B,)
    n_rest: np.ndarray  # (B,)
    prior: np.ndarray  # (B, K + 1): each batch's prior of the visit


def _targets(entries: Sequence[SuffStats], plan: MovePlan, V: int) -> _Targets | str:
    """Collect the target documents from the memo entries; a reason where the
    entries do not hold this plan's (a batch visited before it, or edited since)."""
    rows, parts, S, W, C, n, prior = [], [], [], [], [], [], []
    for e in entries:
        notes = e.notes
        if "plan_lap" not in notes or int(as_dense(notes["plan_lap"])[0]) != plan.lap:
            return "a batch's memo holds no targets of this lap's plan"
        t = SuffStats(**{k[len(_TARGET) :]: v for k, v in notes.items() if k.startswith(_TARGET)})
        parts.append(t)
        rows.append(_rows_of(notes, V))
        S.append(e.array("S") - t.array("S"))
        W.append(float(e.array("W")[0] - t.array("W")[0]))
        C.append(float(e.array("Cdir")[0] - t.array("Cdir")[0]))
        n.append(float(e.array("n_docs")[0] - t.array("n_docs")[0]))
        prior.append(as_dense(notes["prior"]))
    return _Targets(
        sp.vstack(rows, format="csr") if rows else sp.csr_matrix((0, V)),
        sum_stats(parts) if parts else None,  # type: ignore[arg-type]
        np.array(S), np.array(W), np.array(C), np.array(n), np.array(prior),
    )  # fmt: skip


def _rows_of(notes: dict[str, Stat], V: int) -> sp.csr_matrix:
    indptr = as_dense(notes["rows_indptr"]).astype(np.int64)
    return sp.csr_matrix(
        (as_dense(notes["rows_data"]), as_dense(notes["rows_indices"]).astype(np.int64), indptr),
        shape=(indptr.shape[0] - 1, V),
    )


def target_notes(
    rows: sp.csr_matrix, stats: SuffStats, prior: np.ndarray, plan: MovePlan
) -> dict[str, Any]:
    """The notes a batch's memo entry keeps for the delete candidates: the target
    documents' rows and statistics, the visit's prior and the plan's lap."""
    notes: dict[str, Any] = {_TARGET + k: v for k, v in stats.items()}
    notes.update(
        rows_indptr=rows.indptr.astype(np.float64), rows_indices=rows.indices.astype(np.float64),
        rows_data=rows.data.astype(np.float64), prior=prior, plan_lap=np.array([plan.lap]),
    )  # fmt: skip
    return notes


class _Judge:
    """Judges one lap's plan (see :func:`judge_moves`)."""

    def __init__(self, model: HDPModel, glob: HDPGlobals, sparsity: int | None) -> None:
        self.model = model
        self.glob = glob
        self.sparsity = sparsity
        self.beta = expected_beta(glob.rho)
        self.a = glob.alpha.copy()
        self.a_rest = float(glob.alpha_rest)

    def proposal(
        self, stats: SuffStats, keep: Sequence[int], beta: np.ndarray, omega: np.ndarray
    ) -> tuple[HDPModel, HDPGlobals, float]:
        """The model with the topics ``keep``, its globals (sticks re-optimized from
        the weights ``beta``) and its objective at the statistics."""
        model = dataclasses.replace(self.model, n_components=len(keep))
        rho = sticks_of_weights(beta)
        D = model.row_count(stats)
        rho, omega, _ = optimize_sticks(
            stats.array("S"), D, model.concentration, model.gamma, rho, omega
        )
        glob = model.globals_with_sticks(stats, rho, omega)
        return model, glob, model.elbo(stats, glob)

    def rerun(self, rows: sp.csr_matrix, keep: Sequence[int], plan: MovePlan) -> SuffStats:
        """The local step of ``rows`` with the topics ``keep`` only (their E[log phi]
        and prior as now; the others' prior mass in the leftover), the plan's merge
        pairs that survive computed in their slots."""
        K = self.a.shape[0]
        kept = list(keep)
        gone = [t for t in range(K) if t not in set(kept)]
        topics = DirichletPosterior.from_lam(self.glob.lam[kept], self.glob.eta)
        glob = dataclasses.replace(
            self.glob, logs=topics.logs, stored=None, alpha=self.a[kept],
            rho=self.glob.rho[kept], omega=self.glob.omega[kept],
            alpha_rest=self.a_rest + float(self.a[gone].sum()), plan=remap_plan(plan, kept),
        )  # fmt: skip
        model = dataclasses.replace(self.model, n_components=len(keep))
        return model.local_step(rows, glob, self.sparsity)


def remap_plan(plan: MovePlan, keep: Sequence[int]) -> MovePlan:
    """The plan over the topics ``keep`` (renumbered): no deletes; a pair whose
    topics are both kept keeps its slot, any other slot holds ``(-1, -1)``."""
    where = {t: i for i, t in enumerate(keep)}
    pairs = tuple(
        (where[j], where[k]) if j in where and k in where else (-1, -1) for j, k in plan.pairs
    )
    return MovePlan(plan.lap, (), pairs)


def judge_moves(
    model: HDPModel,
    stats: SuffStats,
    glob: HDPGlobals,
    entries: Iterable[SuffStats],
    sparsity: int | None,
) -> MoveOutcome:
    """Judge the plan of ``glob`` at the end of its lap.

    ``stats`` are the whole-data statistics (the sum of ``entries``, the memo's
    entries in batch order, all visited in this lap) and ``glob`` the globals of
    the lap's last global step. Deletes first, then merges, each accepted only if
    it raises the surrogate ELBO of the statistics that include the earlier
    acceptances.
    """
    plan = glob.plan
    outcome = MoveOutcome(model, glob.rho, glob.omega)
    if plan is None or not (plan.deletes or any(j >= 0 for j, _ in plan.pairs)):
        return outcome
    judge = _Judge(model, glob, sparsity)
    current = model.elbo(stats, glob)
    outcome.objective = (current, current)
    K = model.n_components
    keep = list(range(K))  # the surviving topics, in the lap's numbering
    beta, omega = judge.beta.copy(), glob.omega.copy()
    total = stats
    deleted: list[int] = []
    targets = None
    if plan.deletes:
        got = _targets(list(entries), plan, model.vocab_size)
        if isinstance(got, str):
            outcome.skipped = got
        else:
            targets = got
    if targets is not None:
        for j in plan.deletes:
            trial_keep = [t for t in keep if t != j]
            cand = _delete_proposal(judge, stats, targets, [*deleted, j], trial_keep, plan)
            b = np.delete(beta, keep.index(j))
            b[-1] += beta[keep.index(j)]
            m, g, value = judge.proposal(cand, trial_keep, b, np.delete(omega, keep.index(j)))
            ok = value > current
            outcome.records.append(MoveRecord("delete", (j,), value - current, ok))
            if ok:
                current, total, keep, deleted = value, cand, trial_keep, [*deleted, j]
                beta, omega = expected_beta(g.rho), g.omega
                outcome.model, outcome.rho, outcome.omega = m, g.rho, g.omega
    merged: list[tuple[int, int, int]] = []  # (j, k, slot) in the numbering of that moment
    busy: set[int] = set()
    screened = _screened_merges(judge, total, plan, keep, beta, omega)
    for p, (j0, k0) in [(p, plan.pairs[p]) for p in screened]:
        if j0 not in keep or k0 not in keep or {j0, k0} & busy:
            continue
        j, k = sorted((keep.index(j0), keep.index(k0)))
        cand = merge_stats(total, j, k, p)
        b = beta.copy()
        b[j] += b[k]
        b = np.delete(b, k)
        trial_keep = [t for t in keep if t != keep[k]]
        m, g, value = judge.proposal(cand, trial_keep, b, np.delete(omega, k))
        ok = value > current
        outcome.records.append(MoveRecord("merge", (j0, k0), value - current, ok))
        if ok:
            current, total, keep = value, cand, trial_keep
            beta, omega = expected_beta(g.rho), g.omega
            outcome.model, outcome.rho, outcome.omega = m, g.rho, g.omega
            merged.append((j, k, p))
            busy |= {j0, k0}
    outcome.objective = (outcome.objective[0], current)
    if deleted or merged:
        outcome._edit = _memo_edit(judge, plan, deleted, merged, model.vocab_size)
    return outcome


def _screened_merges(
    judge: _Judge,
    stats: SuffStats,
    plan: MovePlan,
    keep: list[int],
    beta: np.ndarray,
    omega: np.ndarray,
) -> list[int]:
    """The slots of the plan's pairs whose merge raises the objective already at the
    current sticks (their weights added) and eta, best first: cheap, O(V + K) a pair
    with no stick search. Re-optimizing the sticks only raises a proposal further,
    so these are the pairs worth the full judgement; a merge that gains only with
    re-optimized sticks is not tried (its pair may come back next lap)."""
    model = judge.model
    words = stats.array("words")
    eta = judge.glob.eta
    D = model.row_count(stats)
    rho = sticks_of_weights(beta)
    base = surrogate_objective(
        rho, omega, stats.array("S"), D, model.concentration, model.gamma, include_constants=True
    ) + float(stats.array("W")[0] - stats.array("Cdir")[0])  # fmt: skip
    gains: list[tuple[float, int]] = []
    for p, (j0, k0) in enumerate(plan.pairs):
        if j0 < 0 or j0 not in keep or k0 not in keep:
            continue
        j, k = sorted((keep.index(j0), keep.index(k0)))
        topic_gain = (
            _neg_log_norm(words[j] + words[k], eta)
            - _neg_log_norm(words[j], eta)
            - _neg_log_norm(words[k], eta)
            + _neg_log_norm(np.zeros(0), eta, words.shape[1])
        )
        S = stats.array("S").copy()
        S[j] = stats.array("pair_S")[p]
        b = beta.copy()
        b[j] += b[k]
        b = np.delete(b, k)
        alloc = surrogate_objective(
            sticks_of_weights(b), np.delete(omega, k), np.delete(S, k), D, model.concentration,
            model.gamma, include_constants=True,
        )  # fmt: skip
        alloc += float(stats.array("W")[0] + stats.array("pair_W")[p])
        alloc -= float(stats.array("Cdir")[0] + stats.array("pair_C")[p])
        gain = topic_gain + float(stats.array("pair_H")[p]) + alloc - base
        if gain > 0:
            gains.append((gain, p))
    return [p for _, p in sorted(gains, reverse=True)]


def _neg_log_norm(counts: np.ndarray, eta: float, V: int | None = None) -> float:
    """``-c_Dir(eta + counts) = sum_v lnG(eta + counts_v) - lnG(sum_v (eta + counts_v))``
    (``V`` zero counts where ``counts`` is empty): a topic's ELBO terms are
    ``c_Dir(eta) - c_Dir(lambda)``, so a merge changes them by these alone."""
    if V is not None:
        return float(V * gammaln(eta) - gammaln(V * eta))
    lam = eta + np.maximum(counts, 0.0)
    return float(gammaln(lam).sum() - gammaln(lam.sum()))


def _delete_proposal(
    judge: _Judge,
    stats: SuffStats,
    targets: _Targets,
    deleted: list[int],
    keep: list[int],
    plan: MovePlan,
) -> SuffStats:
    """Whole-data statistics with the topics ``deleted`` (lap numbering, in the order
    accepted) removed: the other documents' in closed form, the targets rerun."""
    K = stats.array("N").shape[0]
    S, W, C, prior = targets.S_rest, targets.W_rest, targets.C_rest, targets.prior
    order = list(range(K))
    for j in deleted:
        i = order.index(j)
        S, W, C, prior = delete_untouched(S, W, C, targets.n_rest, prior, i)
        order.pop(i)
    rest = stats - targets.stats if targets.stats is not None else stats
    fields = map_topics(rest, topic_map(K, keep))
    fields.update(S=S.sum(axis=0), W=np.array([W.sum()]), Cdir=np.array([C.sum()]))
    for name in PAIR_FIELDS:  # slots whose pair lost a topic hold nothing valid
        if name in fields:
            fields[name] = _valid_slots(as_dense(fields[name]), remap_plan(plan, keep))
    proposal = SuffStats(**fields)
    if targets.rows.shape[0]:
        proposal = proposal + judge.rerun(targets.rows, keep, plan).dense_copy()
    return proposal


def _valid_slots(values: np.ndarray, plan: MovePlan) -> np.ndarray:
    out = values.copy()
    for p, (j, _) in enumerate(plan.pairs):
        if j < 0:
            out[p] = 0.0
    return out


def _memo_edit(
    judge: _Judge,
    plan: MovePlan,
    deleted: list[int],
    merged: list[tuple[int, int, int]],
    V: int,
) -> Callable[[SuffStats], SuffStats]:
    """The edit of one memo entry: its targets rerun and its other documents edited
    in closed form for the deletes, then the merges; the notes dropped."""
    K = judge.a.shape[0]
    keep = [t for t in range(K) if t not in set(deleted)]

    def edit(entry: SuffStats) -> SuffStats:
        stats = SuffStats(**dict(entry.items()))
        if deleted:
            notes = entry.notes
            t = SuffStats(
                **{k[len(_TARGET) :]: v for k, v in notes.items() if k.startswith(_TARGET)}
            )
            rest = _sparse_aware_sub(stats, t)
            S, W, C = rest.array("S"), rest.array("W")[0], rest.array("Cdir")[0]
            n, prior = rest.array("n_docs")[0], as_dense(notes["prior"])
            order = list(range(K))
            for j in deleted:
                i = order.index(j)
                S, W, C, prior = delete_untouched(S, W, C, n, prior, i)
                order.pop(i)
            fields = map_topics(rest, topic_map(K, keep))
            fields.update(S=S, W=np.array([W]), Cdir=np.array([C]))
            for name in PAIR_FIELDS:
                if name in fields:
                    fields[name] = _valid_slots(as_dense(fields[name]), remap_plan(plan, keep))
            stats = SuffStats(**fields)
            rows = _rows_of(notes, V)
            if rows.shape[0]:
                stats = _sparse_aware_add(stats, judge.rerun(rows, keep, plan))
        for j, k, p in merged:
            stats = merge_stats(stats, j, k, p)
        return stats

    return edit
