"""The HDP topic model, learned by memoized VI with LDA's L-sparse local step.

Hughes, Kim and Sudderth, *Reliable and scalable variational inference for
the hierarchical Dirichlet process* (AISTATS 2015) and its supplement
(``papers/hdp-memoized-hughes-kim-sudderth-supplement.txt``; equation numbers
below are the supplement's). The model, truncated at K topics:

- global sticks ``u_k ~ Beta(1, gamma)``, topic weights ``beta_k = u_k
  prod_{l<k} (1 - u_l)``, ``k = 1..K``, and the leftover mass ``beta_{K+1} =
  prod_{l<=K} (1 - u_l)`` of the topics beyond K;
- documents ``pi_d ~ Dir(alpha beta_1, ..., alpha beta_K, alpha beta_{K+1})``;
- topics ``phi_k ~ Dir(eta)`` and words as in LDA (:mod:`lsdask.models.lda`).

The posterior is ``q(u_k) = Beta(rho_k omega_k, (1 - rho_k) omega_k)``,
``q(phi_k) = Dir(lambda_k)``, ``q(pi_d) = Dir(theta_d)`` over K + 1 entries and
the top-L ``q(z)`` of each word type.

**Local step.** LDA's (:meth:`LDAModel.doc_topic_step`, the same kernel) with
the prior ``a_k = alpha E[beta_k]`` and the leftover's ``a_rest = alpha
E[beta_{K+1}]``: ``theta_d = (N_d + a, a_rest)``. Its statistics are LDA's
(``words``, ``H``, ``alloc``, ``N``, ``n_docs``) plus ``S`` (K + 1 entries,
``S_k = T_k = sum_d E[log pi_dk]``, the leftover last), ``W = sum_d sum_k
(N_dk - theta_dk) E[log pi_dk]`` and ``Cdir = sum_d c_Dir(theta_d)``: with the
``q(pi_d)`` fixed, these give the allocation term at any sticks.

**Objective.** ``E_q[c_Dir(alpha beta)]`` has no closed form, so the objective
is the *surrogate ELBO*, the ELBO with it replaced by its lower bound (Eq. 13-16)::

    L = sum_kv S_kv E[log phi_kv] - sum_k KL(q(phi_k) || p(phi_k)) + H      (topics, entropy)
        + D [K log alpha + sum_k E[log u_k] + (K + 1 - k) E[log (1 - u_k)]]  (Eq. 16, 20)
        + alpha E[beta] . S + W - Cdir                                       (Eq. 19)
        + E[log p(u) - log q(u)]                                             (Eq. 17)

a lower bound on the ELBO, exact from the whole-data statistics whatever sticks
each batch was visited under (:meth:`HDPModel.elbo`; the sticks' part is
:func:`~lsdask.models.hdp_sticks.surrogate_objective` with its constants).

**Global step.** The topics ``lambda = eta + S_words`` (eta fitted with
``learn_eta``), as in LDA; then ``(rho, omega)`` by
:func:`~lsdask.models.hdp_sticks.optimize_sticks` (Eq. 21-30) from the previous
sticks, kept only where the objective rises. The sticks therefore depend on the
globals they replace, not on the statistics alone: the model is a
:class:`~lsdask.learn.protocols.StepsFromPrevious`, whose previous sticks the
learning loops pass on (:meth:`HDPModel.carry`; a checkpoint keeps them, and a
resumed run restores them, :meth:`HDPModel.restore_globals`). Without
previous sticks the search starts from nearly uniform weights
(:func:`~lsdask.models.hdp_sticks.init_sticks`, ``"uniform"``). Neither step
lowers the objective at the current statistics. Birth, merge and delete moves
are not built yet: K stays what it is.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import scipy.sparse as sp

from lsdask.models.dirichlet_logs import DirichletPosterior
from lsdask.models.hdp_deletes import target_notes
from lsdask.models.hdp_moves import (
    PAIR_FIELDS,
    MoveOutcome,
    MovePlan,
    MoveSettings,
    apply_move_map,
    choose_plan,
    judge_moves,
    topic_cosines,
)
from lsdask.models.hdp_rests import Rest, rest_lists, rests_of
from lsdask.models.hdp_sticks import (
    expected_beta,
    init_sticks,
    optimize_sticks,
    surrogate_objective,
)
from lsdask.models.lda import LDAGlobals, LDAModel, as_csr_batch
from lsdask.models.stats import SparseBlock, Stat, SuffStats

#: how the sticks start without previous ones (see :func:`init_sticks`)
STICK_START: Literal["prior", "uniform"] = "uniform"


@dataclass(frozen=True, eq=False)
class HDPGlobals(LDAGlobals):
    """The HDP's globals: the topics, the stick posteriors ``q(u_k) = Beta(rho_k
    omega_k, (1 - rho_k) omega_k)`` and the document-topic prior the local step
    uses, ``alpha`` (K,) ``= alpha E[beta_k]`` and ``alpha_rest = alpha
    E[beta_{K+1}]`` (the leftover's).

    Build it with :meth:`of_sticks`; the constructor takes the prior as given
    (a test may set one that no sticks give, such as LDA's ``alpha / K`` with no
    leftover, ``alpha_rest = 0``).
    """

    rho: np.ndarray
    omega: np.ndarray
    alpha_rest: float
    plan: MovePlan | None = None  # the moves the lap under way prepares
    resting: tuple[Rest, ...] = ()  # topics a plan leaves out (lsdask.models.hdp_rests)
    delete_budget: float | None = None  # the lap's delete work (None: MoveSettings.delete_work)

    def __post_init__(self) -> None:
        super().__post_init__()
        K = self.alpha.shape[0]
        rho = np.asarray(self.rho, dtype=np.float64)
        omega = np.asarray(self.omega, dtype=np.float64)
        if rho.shape != (K,) or not (np.isfinite(rho).all() and 0 < rho.min() and rho.max() < 1):
            raise ValueError(f"rho must hold {K} values strictly between 0 and 1; got {self.rho!r}")
        if omega.shape != (K,) or not (np.isfinite(omega).all() and omega.min() > 0):
            raise ValueError(f"omega must hold {K} positive finite values; got {self.omega!r}")
        rest = float(self.alpha_rest)
        if not (np.isfinite(rest) and rest >= 0):
            raise ValueError(f"alpha_rest must be a finite number >= 0; got {self.alpha_rest!r}")
        object.__setattr__(self, "rho", rho)
        object.__setattr__(self, "omega", omega)
        object.__setattr__(self, "alpha_rest", rest)

    @classmethod
    def of_sticks(
        cls, topics: DirichletPosterior, concentration: float, rho: Any, omega: Any
    ) -> HDPGlobals:
        """The topics with the sticks ``(rho, omega)`` and the document prior they
        give at the concentration alpha: ``alpha E[beta]``."""
        beta = expected_beta(rho)
        K = beta.shape[0] - 1
        return cls(
            topics.logs, topics.stored, concentration * beta[:K], rho, omega,
            concentration * float(beta[K]),
        )  # fmt: skip

    @property
    def topic_weights(self) -> np.ndarray:
        """``E[beta]`` (K + 1,): each topic's expected weight, the leftover's last."""
        return expected_beta(self.rho)

    def for_workers(self) -> HDPGlobals:
        """What a local step reads: E[log phi]'s stored entries and the prior."""
        return HDPGlobals(
            self.logs, None, self.alpha, self.rho, self.omega, self.alpha_rest, self.plan
        )

    def with_plan(self, plan: MovePlan | None) -> HDPGlobals:
        """These globals with the move plan ``plan``."""
        return dataclasses.replace(self, plan=plan)


@dataclass(frozen=True)
class HDPModel(LDAModel):
    """The HDP topic model with K topics (the truncation) over V words.

    An :class:`LDAModel` whose document-topic prior is ``alpha E[beta_k]`` with
    learned sticks: it shares LDA's local step, statistics (with ``S``, ``W`` and
    ``Cdir`` always kept, ``S`` with the leftover's entry) and topic step.

    Parameters
    ----------
    n_components : int
        K, the most topics.
    vocab_size : int
        V.
    alpha : float
        The document concentration (> 0): ``pi_d ~ Dir(alpha beta)``.
    eta : float
        Topic-word Dirichlet pseudo-count; where eta is learned, the start of every fit.
    options : LocalStepOptions
    learn_alpha : bool
        Must be False: the HDP learns the prior's shape through its sticks.
    learn_eta : bool
        Fit a symmetric eta, jointly with the topics, in every global step (as LDA).
    gamma : float
        The top-level stick concentration (> 0): ``u_k ~ Beta(1, gamma)``.
    moves : MoveSettings
        The delete and merge moves each lap prepares (:mod:`lsdask.models.hdp_moves`);
        none by default. With moves, the statistics also carry ``Dused`` (documents
        using each topic), with merges ``cooc`` (K, K: documents using both) and the
        pair terms, and a lap's plan rides on the globals (:attr:`HDPGlobals.plan`).
    """

    gamma: float = 1.0
    moves: MoveSettings = dataclasses.field(default_factory=MoveSettings)

    def __post_init__(self) -> None:
        alpha = self.alpha
        if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real):
            raise ValueError(
                "alpha of the HDP is the document concentration, one positive number "
                f"(each topic's prior is alpha E[beta_k]); got {alpha!r}"
            )
        super().__post_init__()
        gamma = self.gamma
        ok = isinstance(gamma, numbers.Real) and not isinstance(gamma, bool)
        if not (ok and np.isfinite(gamma) and gamma > 0):
            raise ValueError(f"gamma must be a positive finite number; got {gamma!r}")
        object.__setattr__(self, "gamma", float(gamma))
        if self.learn_alpha:
            raise ValueError(
                "learn_alpha must be False for the HDP: its document-topic prior alpha E[beta] "
                "is learned through the sticks"
            )

    @property
    def concentration(self) -> float:
        """alpha, the document concentration."""
        return float(np.sum(self.alpha))

    def start_sticks(self) -> tuple[np.ndarray, np.ndarray]:
        """``(rho, omega)`` where no previous sticks are known: nearly uniform topic
        weights (:func:`~lsdask.models.hdp_sticks.init_sticks`)."""
        return init_sticks(self.n_components, self.gamma, mode=STICK_START)

    def prior_vector(self) -> np.ndarray:
        """``alpha E[beta_k]`` (K,) of the start's sticks (:meth:`start_sticks`)."""
        return self.concentration * expected_beta(self.start_sticks()[0])[: self.n_components]

    @property
    def keeps_prior_stats(self) -> bool:
        """Always: the sticks are fitted to ``S``, and the objective needs ``W`` and ``Cdir``."""
        return True

    def leftover_prior(self, glob: DirichletPosterior) -> float:
        """``a_rest = alpha E[beta_{K+1}]``: the globals' own, else the start sticks'."""
        if isinstance(glob, HDPGlobals):
            return glob.alpha_rest
        return self.concentration * float(expected_beta(self.start_sticks()[0])[-1])

    def empty_stats(self) -> SuffStats:
        stats = super().empty_stats()
        return SuffStats(
            **{**dict(stats.items()), **self._move_fields(np.zeros((0, self.n_components)))}
        )

    @property
    def has_moves(self) -> bool:
        """Whether laps prepare and judge delete or merge moves."""
        return self.moves.delete or self.moves.merge

    def _move_fields(self, doc_topic: np.ndarray) -> dict[str, Stat]:
        """``S``'s zero start and the fields the moves add (see the class docstring),
        of the documents' topic counts ``doc_topic`` (their pair terms at zero)."""
        K = self.n_components
        fields: dict[str, Stat] = {"S": np.zeros(K + 1)}
        if self.has_moves:
            fields["Dused"] = (doc_topic > 0).sum(axis=0).astype(np.float64)
        if self.moves.merge:
            used = sp.csr_matrix(doc_topic > 0, dtype=np.float64)
            both = sp.coo_matrix(used.T @ used)
            fields["cooc"] = SparseBlock(both.row, both.col, both.data, (K, K))
            for name in PAIR_FIELDS:
                fields[name] = np.zeros(self.moves.max_pairs)
        return fields

    # -- the local step with the lap's moves ------------------------------------------

    def doc_topic_step(
        self, X: Any, glob: DirichletPosterior, sparsity: int | None
    ) -> tuple[dict[str, Stat], np.ndarray, tuple[int, int, int]]:
        """LDA's local step (:meth:`LDAModel.doc_topic_step`) and what the moves
        need: ``Dused`` and ``cooc`` always (with moves), the merge pairs' terms
        where the globals' plan has pairs."""
        plan = glob.plan if isinstance(glob, HDPGlobals) else None
        pairs = [] if plan is None else [(p, j, k) for p, (j, k) in enumerate(plan.pairs) if j >= 0]
        slots = np.array([p for p, _, _ in pairs], dtype=np.int64)
        pj = np.array([j for _, j, _ in pairs], dtype=np.int64)
        pk = np.array([k for _, _, k in pairs], dtype=np.int64)
        pieces, doc_topic, info, terms = self._batch_step(X, glob, sparsity, (pj, pk))
        pieces.update(self._move_fields(doc_topic) | {"S": pieces["S"]})
        if self.moves.merge:
            a = self.doc_prior(glob)
            S = pieces["S"]
            assert isinstance(S, np.ndarray)
            H, S_pair, C_pair = terms
            for name, values in (("pair_H", H), ("pair_S", S_pair), ("pair_C", C_pair)):
                full = np.zeros(self.moves.max_pairs)
                full[slots] = values
                pieces[name] = full
            W = np.zeros(self.moves.max_pairs)
            W[slots] = a[pj] * S[pj] + a[pk] * S[pk] - (a[pj] + a[pk]) * S_pair
            pieces["pair_W"] = W
        return pieces, doc_topic, info

    def local_step(self, X: Any, glob: DirichletPosterior, sparsity: int | None) -> SuffStats:
        """The batch's statistics; where the globals' plan has delete candidates, with
        the notes of their target documents (:func:`~lsdask.models.hdp_deletes.target_notes`)."""
        X = as_csr_batch(X)
        pieces, doc_topic, _ = self.doc_topic_step(X, glob, sparsity)
        stats = SuffStats(**pieces)
        plan = glob.plan if isinstance(glob, HDPGlobals) else None
        if plan is None or not plan.deletes:
            return stats
        assert isinstance(glob, HDPGlobals)

        def step(rows: sp.csr_matrix) -> dict[str, Stat]:
            return self.doc_topic_step(rows, glob, sparsity)[0]

        prior = np.append(glob.alpha, glob.alpha_rest)
        return stats.with_notes(target_notes(X, doc_topic, step, prior, plan))

    def plan_moves(self, stats: SuffStats, glob: HDPGlobals, lap: int) -> HDPGlobals:
        """The globals with the moves lap ``lap`` prepares
        (:func:`~lsdask.models.hdp_moves.choose_plan` from the statistics of the laps
        before); no plan without moves."""
        if not self.has_moves:
            return glob
        cosines = topic_cosines(glob.concentrations)
        plan = choose_plan(stats, cosines, self.moves, lap, glob.resting, glob.delete_budget)
        return glob.with_plan(plan)

    def judge_moves(
        self, stats: SuffStats, glob: HDPGlobals, entries: Iterable[SuffStats], sparsity: int | None
    ) -> MoveOutcome:
        """Judge the moves of the lap that just ended
        (:func:`~lsdask.models.hdp_moves.judge_moves`)."""
        return judge_moves(self, stats, glob, entries, sparsity)

    def apply_move_map(self, move_map: dict[str, Any], stats: SuffStats) -> SuffStats:
        """One batch's memo entry under accepted moves
        (:func:`~lsdask.models.hdp_moves.apply_move_map`)."""
        return apply_move_map(move_map, stats, self.vocab_size)

    def resized(self, n_components: int) -> HDPModel:
        """This model with ``n_components`` topics (after accepted moves)."""
        return dataclasses.replace(self, n_components=int(n_components))

    # -- the global step --------------------------------------------------------

    def fitted_sticks(
        self, stats: SuffStats, carried: Mapping[str, Any] | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(rho, omega)`` of the global step: the maximizer of the sticks' surrogate
        objective (Eq. 21) given the whole-data ``S`` and D, searched from the previous
        sticks ``carried`` (or :meth:`start_sticks`) and kept only where it rises
        (:func:`~lsdask.models.hdp_sticks.optimize_sticks`); the start itself for
        statistics without ``S`` (an initialization's) or without documents."""
        rho, omega = self.start_sticks() if carried is None else self._sticks_of(carried)
        D = self.row_count(stats)
        if "S" not in stats.keys() or D <= 0:
            return rho, omega
        rho, omega, _ = optimize_sticks(
            stats.array("S"), D, self.concentration, self.gamma, rho, omega
        )
        return rho, omega

    def _sticks_of(self, carried: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        K = self.n_components
        try:
            rho = np.asarray(carried["rho"], dtype=np.float64)
            omega = np.asarray(carried["omega"], dtype=np.float64)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(
                f"the previous sticks must be a mapping of 'rho' and 'omega' ({K} numbers "
                f"each); got {carried!r}"
            ) from exc
        if rho.shape != (K,) or omega.shape != (K,):
            raise ValueError(
                f"the previous sticks must hold K={K} values each; got rho of shape "
                f"{rho.shape} and omega of shape {omega.shape}"
            )
        return rho, omega

    def globals_with_sticks(self, stats: SuffStats, rho: Any, omega: Any) -> HDPGlobals:
        """The topics of the statistics (``lambda = eta + S_words``, eta fitted where
        learned) with the given sticks: the globals as a global step left them."""
        topics = DirichletPosterior.from_counts(stats.array("words"), self.fitted_eta(stats))
        return HDPGlobals.of_sticks(topics, self.concentration, rho, omega)

    def global_step_from(self, stats: SuffStats, carried: Mapping[str, Any] | None) -> HDPGlobals:
        """The globals given whole-data statistics: the topics as LDA's, then the sticks
        by :meth:`fitted_sticks` from ``carried`` (the previous sticks, see
        :meth:`carry`; None: from :meth:`start_sticks`); the lap's move plan as
        ``carried`` has it."""
        glob = self.globals_with_sticks(stats, *self.fitted_sticks(stats, carried))
        return _with_carried(glob, carried)

    def restore_globals(self, stats: SuffStats, carried: Mapping[str, Any]) -> HDPGlobals:
        """The globals a global step on ``stats`` left with the sticks ``carried``
        (:meth:`carry`'s): the topics recomputed, the sticks and plan as they were."""
        glob = self.globals_with_sticks(stats, *self._sticks_of(carried))
        return _with_carried(glob, carried)

    def global_step(self, stats: SuffStats) -> HDPGlobals:
        """:meth:`global_step_from` without previous sticks."""
        return self.global_step_from(stats, None)

    def carry(self, glob: HDPGlobals) -> dict[str, list[float]]:
        """The sticks of ``glob``, from which the next global step starts, and the
        lap's move plan, as lists of floats (JSON keeps them exactly)."""
        out = {"rho": [float(x) for x in glob.rho], "omega": [float(x) for x in glob.omega]}
        if glob.plan is not None:
            out["plan"] = glob.plan.to_list()
        out.update(rest_lists(glob.resting))
        if glob.delete_budget is not None:
            out["delete_budget"] = [float(glob.delete_budget)]
        return out

    # -- the objective ------------------------------------------------------------

    def surrogate_allocation(self, stats: SuffStats, glob: HDPGlobals) -> float:
        """The allocation and stick terms of the surrogate ELBO at the globals' sticks,
        with the statistics' ``q(pi_d)``: ``D E_q[surrogate c_Dir(alpha beta)] + alpha
        E[beta] . S + W - Cdir + E[log p(u) - log q(u)]`` (Eq. 16, 17, 19, 20)."""
        return self.allocation_value(
            glob.rho, glob.omega, stats.array("S"), self.row_count(stats),
            float(stats.array("W")[0]), float(stats.array("Cdir")[0]),
        )  # fmt: skip

    def allocation_value(
        self, rho: np.ndarray, omega: np.ndarray, S: np.ndarray, D: float, W: float, Cdir: float
    ) -> float:
        """:meth:`surrogate_allocation` of the sticks ``(rho, omega)`` and the
        statistics' ``S``, documents ``D``, ``W`` and ``Cdir``."""
        sticks = surrogate_objective(
            rho, omega, S, D, self.concentration, self.gamma, include_constants=True
        )
        return sticks + W - Cdir

    def elbo(self, stats: SuffStats, glob: DirichletPosterior) -> float:
        """The surrogate ELBO (see the module docstring) from the whole-data
        statistics: the topic terms at the globals' eta, the entropy, and
        :meth:`surrogate_allocation` at their sticks."""
        if not isinstance(glob, HDPGlobals):
            raise TypeError(f"the HDP's ELBO needs HDPGlobals; got {type(glob).__name__}")
        return (
            glob.elbo_terms(stats.array("words"))
            + float(stats.array("H")[0])
            + self.surrogate_allocation(stats, glob)
        )


def _with_carried(glob: HDPGlobals, carried: Mapping[str, Any] | None) -> HDPGlobals:
    """``glob`` with the move plan, the resting topics and the delete budget that
    ``carried`` holds."""
    resting = rests_of(carried)
    budget = None if carried is None else carried.get("delete_budget")
    if budget is not None:
        budget = _budget_of(budget)
    return dataclasses.replace(glob, plan=_plan_of(carried), resting=resting, delete_budget=budget)


def _budget_of(value: Any) -> float:
    """The delete budget that :meth:`HDPModel.carry` wrote (a list of one fraction)."""
    try:
        (budget,) = value
        budget = float(budget)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"delete_budget must be a list of one number; got {value!r}") from exc
    if not (np.isfinite(budget) and 0.0 < budget <= 1.0):
        raise ValueError(f"delete_budget must be a fraction in (0, 1]; got {budget!r}")
    return budget


def _plan_of(carried: Mapping[str, Any] | None) -> MovePlan | None:
    """The move plan that :meth:`HDPModel.carry` wrote, or None."""
    if carried is None or "plan" not in carried:
        return None
    return MovePlan.from_list(carried["plan"])
