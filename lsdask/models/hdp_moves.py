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
  exactly 0 of it), grouped by the first candidate they use, with their rows and
  their part of the batch's statistics, kept as the memo entry's notes
  (:attr:`~lsdask.models.stats.SuffStats.notes`; :mod:`lsdask.models.hdp_deletes`).

**Delete** (judged first, in the plan's order, each on the statistics that
include the earlier acceptances; :func:`~lsdask.models.hdp_deletes.judge_deletes`):
the groups that use the candidate are rerun without it, every other document's
``q(pi_d)`` merges the deleted topic's entry into the leftover's in closed form.
A candidate's gain is first computed from what it changes
(:mod:`~lsdask.models.hdp_delete_gain`); only one that gains is built whole.

**Merge** (then, in the plan's order; a topic takes part in at most one
accepted merge per lap): topic k's statistics are added to topic j's and the
pair's recorded terms replace the two topics' allocation terms. A pair is
judged in full (sticks re-optimized) only where its gain at the current sticks
is already positive (:func:`_screened_merges`).

After a lap with an accepted move, the batches holding target documents that
an accepted delete reran are edited at once (:meth:`MoveOutcome.edit`); every
other entry owes the lap's move map (:meth:`MoveOutcome.move_map`), applied
when it is next read (:mod:`lsdask.learn.pending_maps`).

**Topic order.** The surrogate bound depends on the order of the sticks, but
lsdask does not reorder them: the fitted attributes show topics by decreasing
``E[beta_k]`` for display only, and the model keeps its own order. The global
step's sticks are fitted to that order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.special import gammaln

from lsdask.models.dirichlet_logs import StoredConcentrations
from lsdask.models.hdp_deletes import DeleteResult, delete_edit, judge_deletes, units_of
from lsdask.models.hdp_move_stats import (
    PAIR_FIELDS,
    HDPGlobals,
    HDPModel,
    MoveJudge,
    MovePlan,
    merge_stats,
    sticks_of_weights,
)
from lsdask.models.hdp_rests import (
    Rest,
    deletes_rest,
    rest_lists,
    resting_topics,
    rests_after,
    rests_of,
)
from lsdask.models.hdp_sticks import expected_beta, one_blas_thread, surrogate_objective
from lsdask.models.stats import SuffStats

__all__ = ["PAIR_FIELDS", "MoveOutcome", "MovePlan", "MoveRecord", "MoveSettings",
           "choose_plan", "judge_moves", "topic_cosines"]  # fmt: skip


@dataclass(frozen=True)
class MoveSettings:
    """How many moves a lap prepares (see :class:`~lsdask.models.hdp.HDPModel`).

    ``delete_work`` is the most a lap spends on deletes, as a fraction of the
    corpus's documents rerun. The budget adapts to what the deletes achieve: a lap
    whose judged deletes were all rejected halves the next lap's budget (down to
    ``delete_work_floor``), a lap that accepted one doubles it (up to
    ``delete_work``). Rejected candidates are the ones the plan judged most likely
    to go (the smallest topics), so after a rejected lap the next is unlikely to
    do better: a topic rejected again rests longer each time, and after laps
    whose deletes were all rejected the deletes rest for laps that double
    (:mod:`~lsdask.models.hdp_rests`), so that laps that change nothing cost
    little more than an LDA lap, while a phase in which deletes succeed keeps
    its full budget and every topic eligible.
    """

    delete: bool = False
    merge: bool = False
    delete_max_docs: int = 1000
    max_deletes: int = 10
    max_target_docs: int = 20000
    max_pairs: int = 20
    delete_work: float = 0.1
    delete_work_floor: float = 0.01

    def next_budget(self, budget: float | None, judged: int, accepted: int) -> float:
        """The next lap's delete budget after a lap with ``budget`` (None: the
        full ``delete_work``) that judged ``judged`` deletes and accepted ``accepted``."""
        current = self.delete_work if budget is None else budget
        if accepted:
            return min(self.delete_work, 2.0 * current)
        if judged:
            return max(min(self.delete_work_floor, self.delete_work), 0.5 * current)
        return current


# -- choosing the plan ---------------------------------------------------------------


def choose_plan(
    stats: SuffStats,
    word_cosines: np.ndarray,
    settings: MoveSettings,
    lap: int,
    resting: tuple[Rest, ...] = (),
    budget: float | None = None,
) -> MovePlan:
    """The lap's plan from the whole-data statistics of the last lap and the
    cosine similarities of the topics' word distributions (K, K;
    :func:`topic_cosines`).

    Delete candidates: topics used by at most ``delete_max_docs`` documents,
    fewest tokens first, while their target documents add up to at most
    ``max_target_docs`` and to ``budget`` (the lap's adaptive delete budget, see
    :class:`MoveSettings`; None: ``delete_work``) times the documents of the corpus
    (judging a candidate reruns about the documents that use it, so a lap's
    deletes cost about that fraction of a lap; the judgement holds to it). Merge pairs:
    each pair scored by the larger of the cosine
    similarity of the two topics' document usage (documents using both over the
    geometric mean of each one's) and of their word distributions, the best
    first, smaller topics first among equals, a topic in at most two pairs.
    """
    K = stats.array("N").shape[0]
    N = stats.array("N")
    used = stats.array("Dused") if "Dused" in stats.keys() else np.zeros(K)
    rest = resting_topics(resting, lap)
    deletes: list[int] = []
    if settings.delete and K > 2 and not deletes_rest(resting, lap):
        fraction = settings.delete_work if budget is None else budget
        work = fraction * float(stats.array("n_docs")[0])
        targets = 0.0
        for k in np.argsort(N, kind="stable"):
            if len(deletes) >= min(settings.max_deletes, K - 2):
                break
            more = targets + used[k]
            fits = more <= min(settings.max_target_docs, work)
            if used[k] <= settings.delete_max_docs and fits and int(k) not in rest:
                deletes.append(int(k))
                targets = more
    pairs: list[tuple[int, int]] = []
    if settings.merge and K > 2 and settings.max_pairs > 0:
        pairs = _ranked_pairs(stats, word_cosines, used, N, settings.max_pairs, set(deletes))
    return MovePlan(lap, tuple(deletes), tuple(pairs))


#: entries of the dense blocks of ``lambda - eta`` that :func:`topic_cosines` multiplies
COSINE_BLOCK = 1 << 21


def topic_cosines(topics: StoredConcentrations) -> np.ndarray:
    """The cosine similarity of every two topics' ``E[phi_k]`` (K, K), from the
    stored entries of ``lambda`` without building it (K x V): with ``e_k = lambda_k
    - b`` (zero off the stored entries) and ``E_k = sum_v e_kv``, ``lambda_j .
    lambda_k = V b^2 + b (E_j + E_k) + e_j . e_k``, and the cosine of ``E[phi]``
    is that of ``lambda``. The Gram matrix ``e e^T`` is summed over dense blocks of
    columns (at most ``COSINE_BLOCK`` entries each) by a matrix product with one
    BLAS thread: on a real corpus most of ``lambda``'s entries are stored, and a
    sparse product costs several times more."""
    K, V, b = topics.row_sums.shape[0], topics.n_cols, topics.prior
    e = sp.csr_matrix((topics.conc - b, topics.cols, topics.row_ptr), shape=(K, V))
    width = max(1, COSINE_BLOCK // max(K, 1))
    ee = np.zeros((K, K))
    with one_blas_thread():
        for start in range(0, V, width):
            block = (e if width >= V else e[:, start : start + width]).toarray()
            ee += block @ block.T
    E = topics.row_sums - b * V
    gram = ee + b * (E[:, None] + E[None, :]) + V * b * b
    norm = np.sqrt(np.maximum(np.diag(gram), 1e-300))
    return np.asarray(gram / np.outer(norm, norm))


def _ranked_pairs(
    stats: SuffStats, word_cosines: np.ndarray, used: np.ndarray, N: np.ndarray, max_pairs: int,
    skip: set[int],
) -> list[tuple[int, int]]:  # fmt: skip
    K = N.shape[0]
    score = np.zeros((K, K))
    if "cooc" in stats.keys():
        both = stats.array("cooc")
        score = both / np.sqrt(np.maximum(np.outer(used, used), 1e-300))
    score = np.maximum(score, word_cosines)
    j, k = np.triu_indices(K, 1)
    gone = np.zeros(K, dtype=bool)
    gone[list(skip)] = True
    keep = ~(gone[j] | gone[k])
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
    budget: float | None = None  # the lap's delete budget (None: the full delete_work)
    records: list[MoveRecord] = field(default_factory=list)
    lap: int = 0  # the lap whose plan was judged
    rests: tuple[Rest, ...] = ()  # the rests its plan was made with
    objective: tuple[float, float] = (np.nan, np.nan)
    skipped: str = ""
    rerun_docs: float = 0.0
    total: SuffStats | None = None
    _edit: Callable[[int, SuffStats], SuffStats] | None = None
    _map: dict[str, Any] = field(default_factory=dict)
    _eager: set[int] = field(default_factory=set)

    @property
    def stats(self) -> SuffStats:
        """The whole-data statistics under the accepted moves."""
        if self.total is None:
            raise ValueError("no move was accepted")
        return self.total

    @property
    def eager_batches(self) -> set[int]:
        """Batches holding target documents rerun by an accepted delete: their
        entries need the reruns, so :meth:`edit` edits them at once."""
        return set(self._eager)

    def move_map(self) -> dict[str, Any]:
        """The accepted moves as JSON-able data (:func:`apply_move_map` applies them
        to any batch outside :attr:`eager_batches`)."""
        return dict(self._map)

    @property
    def accepted(self) -> list[MoveRecord]:
        return [r for r in self.records if r.accepted]

    @property
    def n_accepted(self) -> int:
        return len(self.accepted)

    @property
    def carried(self) -> dict[str, list[float]]:
        """The sticks to go on with, as :meth:`HDPModel.carry` writes them (no plan),
        the next lap's delete budget (:meth:`MoveSettings.next_budget`) and, where
        nothing was accepted (the topics keep their numbers), the rests with the
        rejected delete candidates' added (:func:`~lsdask.models.hdp_rests.rests_after`)."""
        out = {"rho": [float(x) for x in self.rho], "omega": [float(x) for x in self.omega]}
        judged = [int(r.topics[0]) for r in self.records if r.kind == "delete"]
        if not self.n_accepted:
            out.update(rest_lists(rests_after(self.rests, self.lap, judged)))
        deleted = sum(r.kind == "delete" and r.accepted for r in self.records)
        budget = self.model.moves.next_budget(self.budget, len(judged), deleted)
        out["delete_budget"] = [float(budget)]
        return out

    def kept_globals(self, glob: HDPGlobals) -> HDPGlobals:
        """Where nothing was accepted: the judged globals ``glob`` (the lap's last
        global step, whose sticks :attr:`rho` and :attr:`omega` are) without the
        lap's plan, with :attr:`carried`'s rests and delete budget:
        what :meth:`HDPModel.restore_globals` makes of the same statistics and
        :attr:`carried`, without recomputing the topics."""
        if self.n_accepted:
            raise ValueError("moves were accepted: restore the globals from the statistics")
        if not (np.array_equal(self.rho, glob.rho) and np.array_equal(self.omega, glob.omega)):
            raise ValueError("the globals are not the judged ones: their sticks differ")
        carried = self.carried
        return dataclasses.replace(
            glob, plan=None, resting=rests_of(carried),
            delete_budget=float(carried["delete_budget"][0]),
        )  # fmt: skip

    @property
    def kept_objective(self) -> float | None:
        """Where nothing was accepted and a plan was judged: the objective the
        judgement started from, that of :meth:`kept_globals` at the same statistics
        (the plan, the resting candidates and the budget do not enter it); else None."""
        before = self.objective[0]
        return None if self.n_accepted or not np.isfinite(before) else float(before)

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

    def edit(self, b: int, stats: SuffStats) -> SuffStats:
        """Batch b's statistics (its memo entry, with its notes) under the accepted moves."""
        return stats if self._edit is None else self._edit(b, stats)


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
    the lap's last global step. Deletes first
    (:func:`~lsdask.models.hdp_deletes.judge_deletes`), then merges, each accepted
    only if it raises the surrogate ELBO of the statistics that include the
    earlier acceptances.
    """
    plan = glob.plan
    lap = 0 if plan is None else plan.lap
    outcome = MoveOutcome(
        model, glob.rho, glob.omega, glob.delete_budget, lap=lap, rests=glob.resting
    )
    if plan is None or not (plan.deletes or any(j >= 0 for j, _ in plan.pairs)):
        return outcome
    judge = MoveJudge(model, glob, sparsity)
    current = model.elbo(stats, glob)
    outcome.objective = (current, current)
    keep = list(range(model.n_components))  # the surviving topics, in the lap's numbering
    beta, omega = judge.beta.copy(), glob.omega.copy()
    total = stats
    deletes = None
    if plan.deletes:
        fraction = model.moves.delete_work if glob.delete_budget is None else glob.delete_budget
        work = fraction * model.row_count(stats)
        deletes = judge_deletes(judge, stats, list(entries), plan, current, work)
        outcome.skipped = deletes.skipped
        outcome.rerun_docs = deletes.reruns
        outcome.records += [MoveRecord("delete", (j,), gain, ok) for j, gain, ok in deletes.records]
        if deletes.deleted:
            current, total, keep = deletes.objective, deletes.stats, deletes.keep
            g = deletes.glob
            beta, omega = expected_beta(g.rho), g.omega
            outcome.model, outcome.rho, outcome.omega = deletes.model, g.rho, g.omega
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
    if (deletes is not None and deletes.deleted) or merged:
        outcome._edit = _memo_edit(deletes, plan, model.n_components, merged)
        outcome.total = total
        removed = [] if deletes is None else deletes.deleted
        outcome._map = {
            "K": model.n_components, "deleted": list(removed),
            "kept": [t for t in range(model.n_components) if t not in removed],
            "merged": [list(m) for m in merged], "plan": plan.to_list(),
        }  # fmt: skip
        if deletes is not None and deletes.deleted:
            outcome._eager = {u.batch for u in deletes.units if u.rerun is not None}
    return outcome


def apply_move_map(move_map: dict[str, Any], entry: SuffStats, V: int) -> SuffStats:
    """One batch's memo entry under the moves of ``move_map``
    (:meth:`MoveOutcome.move_map`): the batch must hold no target documents that an
    accepted delete reran (those are :attr:`MoveOutcome.eager_batches`)."""
    plan = MovePlan.from_list(move_map["plan"])
    K = int(move_map["K"])
    stats = SuffStats(**dict(entry.items()))
    if move_map["deleted"]:
        units = units_of(entry, plan, V)
        deleted = [int(j) for j in move_map["deleted"]]
        kept = [int(t) for t in move_map["kept"]]
        done = DeleteResult(deleted, kept, stats, float("nan"), units=units)
        stats = delete_edit(entry, 0, done, K, plan)
    for j, k, p in move_map["merged"]:
        stats = merge_stats(stats, int(j), int(k), int(p))
    return stats


def _screened_merges(
    judge: MoveJudge,
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
    alone: dict[int, float] = {}  # -c_Dir(eta + words_j) of each topic, once

    def single(j: int) -> float:
        if j not in alone:
            alone[j] = _neg_log_norm(words[j], eta)
        return alone[j]

    for p, (j0, k0) in enumerate(plan.pairs):
        if j0 < 0 or j0 not in keep or k0 not in keep:
            continue
        j, k = sorted((keep.index(j0), keep.index(k0)))
        topic_gain = (
            _neg_log_norm(words[j] + words[k], eta)
            - single(j)
            - single(k)
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


def _memo_edit(
    deletes: DeleteResult | None, plan: MovePlan, K: int, merged: list[tuple[int, int, int]]
) -> Callable[[int, SuffStats], SuffStats]:
    """The edit of batch b's memo entry: the accepted deletes
    (:func:`~lsdask.models.hdp_deletes.delete_edit`), then the merges; the notes dropped."""

    def edit(b: int, entry: SuffStats) -> SuffStats:
        stats = SuffStats(**dict(entry.items()))
        if deletes is not None and deletes.deleted:
            stats = delete_edit(entry, b, deletes, K, plan)
        for j, k, p in merged:
            stats = merge_stats(stats, j, k, p)
        return stats

    return edit
