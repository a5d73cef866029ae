"""The HDP's delete move: target documents recorded at the visits, judged at the
lap's end, each candidate on the statistics that include the earlier acceptances.

A lap's plan names delete candidates ``j_1, j_2, ...`` (in order). At each
visit (:func:`target_notes`), a document that uses a candidate (``N_dj > 0``;
under L-sparse responsibilities every other document holds exactly 0 of it)
joins the *group* of the first candidate it uses; the memo entry's notes keep
each group's rows, its part of the batch's statistics, the candidates its
documents use, and the prior of the visit. Every other document of the batch
(the *rest*) uses no candidate.

At the lap's end (:func:`judge_deletes`) the groups of every batch are the
*units* of the judgement. For candidate j, the units some document of which uses
j are rerun without j (and without the topics deleted before), their prior mass
going to the leftover; every other unit, and every batch's rest, keeps its
responsibilities, and its ``q(pi_d)`` merges entry j into the leftover's
(:func:`~lsdask.models.hdp_move_stats.delete_untouched`, in closed form from
the unit's own prior). The proposal's objective (topics, sticks re-optimized,
eta) decides; an accepted proposal becomes the state the next candidate is
judged on, its reruns the units' new statistics. A candidate thus reruns about
the documents that use it, not all targets. With eta fixed, the gain is first
computed from what the delete changes (:func:`_quick_gain`,
:mod:`~lsdask.models.hdp_delete_gain`: the touched units rerun together, no
K x V array); a candidate that loses is rejected with that gain, one that gains
is built and judged whole (its units rerun one by one for the memo edit).

:func:`delete_edit` then maps one batch's memo entry to the accepted state: its
rest and units in closed form, each unit from its last rerun (or its visit).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from lsdask.models.hdp_delete_gain import TopicTerms, words_delta
from lsdask.models.hdp_move_stats import (
    PAIR_FIELDS,
    MoveJudge,
    MovePlan,
    delete_untouched,
    mapped,
    remap_plan,
    sparse_add,
    sparse_sub,
    valid_slots,
)
from lsdask.models.hdp_sticks import expected_beta
from lsdask.models.stats import Stat, SuffStats, as_dense, sum_stats

#: the notes' prefix of group g's statistics, rows and candidate use
_GROUP = "g{}."


def target_notes(
    X: sp.csr_matrix,
    doc_topic: np.ndarray,
    step: Any,
    prior: np.ndarray,
    plan: MovePlan,
) -> dict[str, Any]:
    """The notes of one batch's visit for the plan's delete candidates.

    ``doc_topic`` (D, K) are the documents' topic counts of the visit and
    ``step(rows)`` the visit's statistics of some of its rows (the same local step
    against the same globals: a document's result does not depend on the others).
    """
    J = list(plan.deletes)
    uses = doc_topic[:, J] > 0
    notes: dict[str, Any] = {"prior": prior, "plan_lap": np.array([plan.lap])}
    first = np.where(uses.any(axis=1), uses.argmax(axis=1), -1)
    for g in range(len(J)):
        members = np.flatnonzero(first == g)
        if not members.size:
            continue
        rows = X[members]
        prefix = _GROUP.format(g)
        notes.update({prefix + k: v for k, v in step(rows).items()})
        notes[prefix + "uses"] = uses[members].sum(axis=0).astype(np.float64)
        notes[prefix + "rows_indptr"] = rows.indptr.astype(np.float64)
        notes[prefix + "rows_indices"] = rows.indices.astype(np.float64)
        notes[prefix + "rows_data"] = rows.data.astype(np.float64)
    return notes


@dataclass
class _Unit:
    """One group of one batch's target documents, as the judgement stands."""

    batch: int
    group: int
    rows: sp.csr_matrix
    visit: SuffStats  # its statistics at the visit
    uses: set[int]  # candidates (lap numbering) some of its documents use now
    rerun: SuffStats | None = None  # its statistics from its last accepted rerun
    rerun_keep: list[int] | None = None  # the topics (lap numbering) of that rerun
    rerun_prior: np.ndarray | None = None  # the prior of that rerun (K + 1,)


def _units(entries: Sequence[SuffStats], plan: MovePlan, V: int) -> list[_Unit] | str:
    """The units of every batch's notes; a reason where a batch holds none of
    this lap's plan (visited before it was made, or edited since)."""
    units: list[_Unit] = []
    for b, entry in enumerate(entries):
        notes = entry.notes
        if "plan_lap" not in notes or int(as_dense(notes["plan_lap"])[0]) != plan.lap:
            return "a batch's memo holds no targets of this lap's plan"
        for g in range(len(plan.deletes)):
            prefix = _GROUP.format(g)
            if prefix + "uses" not in notes:
                continue
            fields = {
                k[len(prefix) :]: v
                for k, v in notes.items()
                if k.startswith(prefix) and not k[len(prefix) :].startswith(("rows_", "uses"))
            }
            uses = as_dense(notes[prefix + "uses"])
            used = {plan.deletes[i] for i in np.flatnonzero(uses > 0)}
            units.append(_Unit(b, g, _rows_of(notes, prefix, V), SuffStats(**fields), used))
    return units


def units_of(entry: SuffStats, plan: MovePlan, V: int) -> list[_Unit]:
    """The units of one batch's memo entry (numbered as batch 0)."""
    got = _units([entry], plan, V)
    if isinstance(got, str):
        raise ValueError(f"cannot apply a delete to this memo entry: {got}")
    return got


def _rows_of(notes: dict[str, Stat], prefix: str, V: int) -> sp.csr_matrix:
    indptr = as_dense(notes[prefix + "rows_indptr"]).astype(np.int64)
    return sp.csr_matrix(
        (
            as_dense(notes[prefix + "rows_data"]),
            as_dense(notes[prefix + "rows_indices"]).astype(np.int64),
            indptr,
        ),
        shape=(indptr.shape[0] - 1, V),
    )


@dataclass
class _Parts:
    """The closed-form parts of the state: ``S`` (G, K' + 1), ``W``, ``Cdir``,
    ``n`` (G,) and the prior (G, K' + 1) of each batch's rest (rows 0..B-1) and
    of each unit (rows B..)."""

    S: np.ndarray
    W: np.ndarray
    C: np.ndarray
    n: np.ndarray
    prior: np.ndarray

    def deleted(self, i: int) -> _Parts:
        """Every row with topic ``i`` (current numbering) deleted in closed form."""
        S, W, C, prior = delete_untouched(self.S, self.W, self.C, self.n, self.prior, i)
        return _Parts(S, W, C, self.n, prior)


@dataclass
class DeleteResult:
    """What :func:`judge_deletes` decided: the accepted candidates (lap numbering,
    in order), the topics kept, the whole-data statistics, objective, model and
    globals of the accepted state, each candidate's ``(topic, gain, accepted)``,
    and the units (with their last accepted reruns) for :func:`delete_edit`."""

    deleted: list[int]
    keep: list[int]
    stats: SuffStats
    objective: float
    model: Any = None
    glob: Any = None
    records: list[tuple[int, float, bool]] = field(default_factory=list)
    units: list[_Unit] = field(default_factory=list)
    skipped: str = ""
    reruns: int = 0


def _parts_of(entries: Sequence[SuffStats], units: list[_Unit]) -> _Parts:
    """The closed-form parts of each batch's rest and each unit, at the visits."""
    names = ("S", "W", "Cdir", "n_docs")
    rows = []
    for b, entry in enumerate(entries):
        rest = [as_dense(entry[name]) for name in names]
        for u in units:
            if u.batch == b:
                rest = [r - as_dense(u.visit[name]) for r, name in zip(rest, names, strict=True)]
        rows.append((rest, as_dense(entry.notes["prior"])))
    rows += [([u.visit.array(n) for n in names], as_dense(entries[u.batch].notes["prior"]))
             for u in units]  # fmt: skip
    return _Parts(
        np.array([r[0] for r, _ in rows]),
        np.array([r[1][0] for r, _ in rows]),
        np.array([r[2][0] for r, _ in rows]),
        np.array([r[3][0] for r, _ in rows]),
        np.array([p for _, p in rows]),
    )


def judge_deletes(
    judge: MoveJudge,
    stats: SuffStats,
    entries: Sequence[SuffStats],
    plan: MovePlan,
    objective: float,
    max_rerun_docs: float,
    quick: bool = True,
) -> DeleteResult:
    """Judge the plan's delete candidates in order (see the module docstring).

    ``stats`` and ``objective`` are the lap's whole-data statistics and surrogate
    ELBO; ``entries`` the memo's entries in batch order. A candidate whose reruns
    would take the lap's reruns past ``max_rerun_docs`` documents is not judged.
    With ``quick`` (and eta fixed) each candidate's gain is first computed from
    what it changes (:mod:`~lsdask.models.hdp_delete_gain`) and only a candidate
    that gains is built and judged in full; without, every candidate is.
    """
    model = judge.model
    K = model.n_components
    result = DeleteResult([], list(range(K)), stats, objective)
    got = _units(entries, plan, model.vocab_size)
    if isinstance(got, str):
        result.skipped = got
        return result
    units = result.units = got
    B = len(entries)
    parts = _parts_of(entries, units)
    beta, omega = judge.beta.copy(), judge.glob.omega.copy()
    # the gain of each candidate from what it changes (eta fixed: the topics' terms
    # are then a sum over topics; a learned eta is refitted to the whole proposal)
    fast = quick and not model.learn_eta
    topic_terms = TopicTerms.of(stats.array("words"), model.eta) if fast else None
    allocation = model.surrogate_allocation(stats, judge.glob)
    for j in plan.deletes:
        keep = result.keep
        touched = [i for i, u in enumerate(units) if j in u.uses]
        docs = sum(units[i].rows.shape[0] for i in touched)
        if j not in keep or result.reruns + docs > max_rerun_docs:
            continue
        result.reruns += docs
        i_j = keep.index(j)
        trial_keep = [t for t in keep if t != j]
        trial = parts.deleted(i_j)
        b = np.delete(beta, i_j)
        b[-1] += beta[i_j]
        if topic_terms is not None:  # passed over where it loses (module docstring)
            gain = _quick_gain(judge, result, units, touched, trial, B, i_j, trial_keep, plan,
                               topic_terms, allocation, b, np.delete(omega, i_j))  # fmt: skip
            if not gain > 0:
                result.records.append((j, gain, False))
                continue
        new = {i: judge.rerun(units[i].rows, trial_keep, plan) for i in touched}
        rows = [B + i for i in touched]
        # the linear fields: the current ones without topic j, the touched units' reruns
        # in place of what they held
        lin = _linear(mapped(result.stats, keep, trial_keep))
        for i in touched:
            lin = lin - _linear(_linear_now(units[i], trial_keep))
            lin = lin + _linear(dict(new[i][0].dense_copy().items()))
            s = new[i][0]
            trial.S[B + i], trial.W[B + i] = s.array("S"), s.array("W")[0]
            trial.C[B + i] = s.array("Cdir")[0]
            trial.prior[B + i] = judge.prior_of(trial_keep)
        fields = dict(lin.items())
        for name in PAIR_FIELDS:
            if name in fields:
                fields[name] = valid_slots(as_dense(fields[name]), remap_plan(plan, trial_keep))
        fields.update(S=trial.S.sum(axis=0), W=np.array([trial.W.sum()]),
                      Cdir=np.array([trial.C.sum()]))  # fmt: skip
        proposal = SuffStats(**fields)
        m, g, value = judge.proposal(proposal, trial_keep, b, np.delete(omega, i_j))
        ok = value > result.objective
        result.records.append((j, value - result.objective, ok))
        if not ok:
            continue
        result.deleted.append(j)
        result.keep, result.stats, parts = trial_keep, proposal, trial
        result.objective, result.model, result.glob = value, m, g
        beta, omega = expected_beta(g.rho), g.omega
        if topic_terms is not None:
            topic_terms = TopicTerms.of(proposal.array("words"), model.eta)
            allocation = m.surrogate_allocation(proposal, g)
        for i in touched:
            u = units[i]
            u.rerun, u.rerun_keep, u.rerun_prior = new[i][0], trial_keep, trial.prior[B + i]
            used = new[i][1][:, [trial_keep.index(c) for c in plan.deletes if c in trial_keep]]
            alive = [c for c in plan.deletes if c in trial_keep]
            u.uses = {alive[c] for c in np.flatnonzero(used.max(axis=0, initial=0) > 0)}
        del rows
    return result


def _quick_gain(
    judge: MoveJudge, result: DeleteResult, units: list[_Unit], touched: list[int],
    trial: _Parts, B: int, i_j: int, trial_keep: list[int], plan: MovePlan,
    topic_terms: TopicTerms, allocation: float, beta: np.ndarray, omega: np.ndarray,
) -> float:  # fmt: skip
    """The objective's change by deleting topic ``keep[i_j]``, from what changes
    (:mod:`~lsdask.models.hdp_delete_gain`): the touched units rerun together
    (in blocks, one per core: :meth:`MoveJudge.rerun_in_blocks`), their words and
    entropy in place of what they hold now, the allocation terms of ``trial``
    (every other row in closed form) with the touched rows replaced, at sticks
    re-optimized from ``beta`` and ``omega``."""
    now = [_current(units[i]) for i in touched]
    parts: list[tuple[Stat, Sequence[int], float]] = [(st["words"], t, -1.0) for st, t in now]
    H_change = -sum(float(st.array("H")[0]) for st, _ in now)
    S_new, W_new, C_new = np.zeros(len(trial_keep) + 1), 0.0, 0.0
    if touched:
        rows = sp.vstack([units[i].rows for i in touched], format="csr")
        for new in judge.rerun_in_blocks(rows, trial_keep, plan):
            parts.append((new["words"], trial_keep, 1.0))
            H_change += float(new.array("H")[0])
            S_new = S_new + new.array("S")
            W_new += float(new.array("W")[0])
            C_new += float(new.array("Cdir")[0])
    words = words_delta(parts, result.keep, judge.model.vocab_size)
    topics_change = topic_terms.change(i_j, words)
    at = [B + i for i in touched]
    S = trial.S.sum(axis=0) - trial.S[at].sum(axis=0) + S_new
    W = float(trial.W.sum() - trial.W[at].sum()) + W_new
    C = float(trial.C.sum() - trial.C[at].sum()) + C_new
    D = judge.model.row_count(result.stats)
    rho, omega = judge.sticks(S, D, beta, omega)
    after = judge.model.allocation_value(rho, omega, S, D, W, C)
    return topics_change + H_change + after - allocation


def _current(unit: _Unit) -> tuple[SuffStats, list[int]]:
    """The unit's statistics as they stand and their topics (lap numbering): its
    last accepted rerun's, else its visit's."""
    if unit.rerun is None:
        return unit.visit, list(range(unit.visit.array("N").shape[0]))
    return unit.rerun, list(unit.rerun_keep or [])


def _linear(fields: dict[str, Stat]) -> SuffStats:
    """The fields that a delete changes only by dropping the topic's rows (all but
    ``S``, ``W`` and ``Cdir``, which the closed-form parts hold)."""
    return SuffStats(**{k: v for k, v in fields.items() if k not in ("S", "W", "Cdir")})


def _linear_now(unit: _Unit, target: list[int]) -> dict[str, Stat]:
    """The unit's statistics as they stand (its last accepted rerun's, else its
    visit's), mapped to the topics ``target``: right for the fields that only lose
    the deleted topics' rows (``S``, ``W``, ``Cdir`` come from the parts)."""
    if unit.rerun is None:
        return mapped(unit.visit, list(range(unit.visit.array("N").shape[0])), target)
    return mapped(unit.rerun, unit.rerun_keep or [], target)


def delete_edit(
    entry: SuffStats, b: int, result: DeleteResult, K: int, plan: MovePlan
) -> SuffStats:
    """Batch ``b``'s memo entry under the accepted deletes: its rest and each of its
    units in closed form, from the visit or from the unit's last accepted rerun."""
    keep = result.keep
    units = [u for u in result.units if u.batch == b]
    rest = sparse_sub(entry, sum_stats([u.visit for u in units])) if units else entry
    rest = SuffStats(**dict(rest.items()))
    out = _forward(rest, list(range(K)), as_dense(entry.notes["prior"]), result.deleted, keep)
    for u in units:
        if u.rerun is None:
            start, base, prior = list(range(K)), u.visit, as_dense(entry.notes["prior"])
        else:
            assert u.rerun_prior is not None
            start, base, prior = u.rerun_keep or [], u.rerun, u.rerun_prior
        later = [j for j in result.deleted if j in start]
        out = sparse_add(out, _forward(base, start, prior, later, keep))
    fields = dict(out.items())
    for name in PAIR_FIELDS:
        if name in fields:
            fields[name] = valid_slots(as_dense(fields[name]), remap_plan(plan, keep))
    return SuffStats(**fields)


def _forward(
    stats: SuffStats, topics: list[int], prior: np.ndarray, deletes: list[int], keep: list[int]
) -> SuffStats:
    """Statistics over ``topics`` with the documents' prior ``prior``, after the
    ``deletes`` (none of them used by these documents) in closed form, over ``keep``."""
    S, W, C = stats.array("S"), stats.array("W")[0], stats.array("Cdir")[0]
    n = stats.array("n_docs")[0]
    order = list(topics)
    for j in deletes:
        i = order.index(j)
        S, W, C, prior = delete_untouched(S, W, C, n, prior, i)
        order.pop(i)
    fields = mapped(stats, topics, keep)
    fields.update(S=S, W=np.array([W]), Cdir=np.array([C]))
    return SuffStats(**fields)
