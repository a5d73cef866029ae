"""Estimator parameters: one table per estimator, and scikit-learn's conventions over it.

Every parameter is a :class:`Param`: its name, default, check, one line of
help and, where ``lsdask`` has one, its command-line :class:`Option`. An
estimator's :class:`ParamTable` lists its parameters in the order of its
``__init__`` signature, composed from entries shared by all estimators. The
table is the one place that says what a parameter accepts and means:
``fit`` checks the parameters by it (:meth:`ParamTable.check`) and the
command line builds its options from it (:mod:`lsdask.cli.params`).

The estimators keep explicit ``__init__`` signatures, which scikit-learn and
:class:`Parameters` read; a test holds every signature to its table (names,
order and defaults). ``__init__`` only stores its arguments
(:meth:`Parameters._store`); :class:`Parameters` reads them back
(``get_params``), changes them (``set_params``) and shows those that differ
from their defaults (``repr``); :func:`clone` makes an unfitted copy.
"""

from __future__ import annotations

import argparse
import copy
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import numpy as np

from lsdask import config
from lsdask.learn import ALGORITHMS, INIT_METHODS
from lsdask.validation import (
    check_bool,
    check_choice,
    check_int,
    check_positive_float,
    check_random_state,
    check_sparsity,
    parse_nonnegative_float,
    parse_nonnegative_int,
    parse_positive_float,
    parse_positive_int,
)

E = TypeVar("E", bound="Parameters")

#: ``check(name, value, estimator)`` raises ValueError when ``value`` is not
#: accepted (the estimator is there for checks that depend on other parameters)
Check = Callable[[str, Any, Any], object]

#: the ``init`` names LDA takes (besides an array of topic-word counts)
LDA_INIT_METHODS = ("auto", *INIT_METHODS, "gibbs")

#: ``GaussianMixture(covariance_type=)``
COVARIANCE_TYPES = ("zero-mean", "full", "diag")

#: :attr:`Option.default` of an option whose default is the parameter's
SAME = object()


def lda_init_names() -> str:
    """``'auto', 'kmeans++', 'random', 'gibbs'``: the method names, for messages."""
    return ", ".join(repr(name) for name in LDA_INIT_METHODS)


# --------------------------------------------------------------------------- checks


def integer(low: int, high: int | None = None, *, hint: str = "", none: bool = False) -> Check:
    """An integer in ``[low, high]`` (``none``: or None)."""

    def check(name: str, value: Any, estimator: Any) -> None:
        if not (none and value is None):
            check_int(name, value, low, high, hint)

    return check


def positive(
    *, zero: bool = False, at_most: float | None = None, hint: str = "", none: bool = False
) -> Check:
    """A finite number > 0 (>= 0 with ``zero``), at most ``at_most`` (``none``: or None)."""

    def check(name: str, value: Any, estimator: Any) -> None:
        if none and value is None:
            return
        number = check_positive_float(name, value, hint, zero=zero)
        if at_most is not None and number > at_most:
            raise ValueError(f"{name} must be in (0, {at_most}]; got {number}")

    return check


def one_of(*choices: str) -> Check:
    """One of the names ``choices``."""

    def check(name: str, value: Any, estimator: Any) -> None:
        check_choice(name, value, choices)

    return check


def boolean(name: str, value: Any, estimator: Any) -> None:
    """True or False."""
    check_bool(name, value)


def seed(name: str, value: Any, estimator: Any) -> None:
    """What ``numpy.random.default_rng`` takes."""
    check_random_state(value)


def at_most_k(name: str, value: Any, estimator: Any) -> None:
    """A mixture's L: None (dense) or an integer in [1, K]."""
    check_sparsity(value, estimator.n_components)


def any_l(name: str, value: Any, estimator: Any) -> None:
    """LDA's L: None (dense) or an integer >= 1 (L >= K keeps every active topic)."""
    check_sparsity(value, None)


#: LDA's ``alpha``/``eta`` value that learns the prior from the data
AUTO = "auto"


def positive_or_auto(what: str) -> Check:
    """A finite number > 0, or ``"auto"``: a prior learned in the global step, which
    ``algorithm="svi"`` cannot do (``what`` names the statistics it would need)."""

    def check(name: str, value: Any, estimator: Any) -> None:
        if isinstance(value, str) and value == AUTO:
            # svi-gibbs learns alpha from its sampled document-topic counts
            learns = estimator.algorithm == "svi-gibbs" and name == "alpha"
            if estimator.algorithm in ("svi", "svi-gibbs") and not learns:
                raise ValueError(
                    f"{name}='auto' is not supported with algorithm={estimator.algorithm!r}: the "
                    "prior is fitted "
                    f"to {what} of the whole corpus, which SVI never holds (its statistics "
                    "are a running average of rescaled batches, each fitted under other "
                    f"globals). Use algorithm='memo' or 'vb', or a fixed {name}"
                )
            return
        check_positive_float(name, value, f"Use {name}='auto' to learn it from the data.")

    return check


def parse_positive_or_auto(text: str) -> float | str:
    """Command-line text of ``auto`` or a finite number > 0 (an argparse ``type``)."""
    if text == AUTO:
        return AUTO
    try:
        return parse_positive_float(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected a positive number or 'auto', got {text!r}"
        ) from None


def lda_init(name: str, value: Any, estimator: Any) -> None:
    """A method name; an array of counts is checked against the data's vocabulary."""
    if isinstance(value, str):
        check_choice(name, value, LDA_INIT_METHODS)


# --------------------------------------------------------------------------- entries


@dataclass(frozen=True)
class Option:
    """How ``lsdask`` takes a parameter on its command line.

    ``flag`` with an argparse ``type`` or ``choices``; ``metavar`` defaults to
    the flag's name in capitals. ``default`` is the command line's where it
    differs from the parameter's (the commands' runs are seeded). ``off``:
    the flag sets the parameter to False (``--no-restarts``); ``none_flag`` and
    ``none_help``: a second flag, exclusive with the first, that sets it to
    None (``--dense``).
    """

    flag: str
    type: Callable[[str], Any] | None = None
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    default: Any = SAME
    required: bool = False
    off: bool = False
    none_flag: str | None = None
    none_help: str | None = None


@dataclass(frozen=True)
class Param:
    """One estimator parameter: its ``name``, ``default``, ``check`` (None: any
    value), ``help`` (one line; ``{default}`` stands for the default, as the
    command line shows it) and command-line ``option`` (None: none)."""

    name: str
    default: Any
    check: Check | None
    help: str
    option: Option | None = None


@dataclass(frozen=True)
class ParamTable:
    """An estimator's parameters, in the order of its ``__init__`` signature."""

    params: tuple[Param, ...]

    def __post_init__(self) -> None:
        names = [p.name for p in self.params]
        if len(set(names)) != len(names):
            raise ValueError(f"a parameter is listed twice: {names}")

    def __getitem__(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def defaults(self) -> dict[str, Any]:
        return {p.name: p.default for p in self.params}

    def check(self, estimator: Any) -> None:
        """Check every parameter of ``estimator``, in the table's order."""
        for p in self.params:
            if p.check is not None:
                p.check(p.name, getattr(estimator, p.name), estimator)

    def with_after(self, name: str, *params: Param) -> ParamTable:
        """This table with ``params`` inserted after the parameter ``name``."""
        at = self.names.index(name) + 1
        return ParamTable((*self.params[:at], *params, *self.params[at:]))


# entries shared by every estimator ---------------------------------------------

SPARSITY = Param(
    "sparsity", None, at_most_k, "L (default: dense)", Option("--sparsity", parse_positive_int)
)
ALGORITHM = Param(
    "algorithm", "memo", one_of(*ALGORITHMS),
    "memoized VI, stochastic VI or full-batch VB (default {default})",
    Option("--algorithm", choices=tuple(ALGORITHMS)),
)  # fmt: skip
N_LAPS = Param(
    "n_laps", 10, integer(0, hint="0 trains nothing: it exports a checkpoint (resume)."),
    "maximum laps; with --resume, 0 exports the checkpoint without training (default {default})",
    Option("--laps", parse_nonnegative_int),
)  # fmt: skip
TOL = Param(
    "tol", config.DEFAULT_TOL, positive(zero=True, hint="0 never stops before n_laps."),
    "relative ELBO change between laps below which memo and vb stop (0: never)",
)  # fmt: skip


def bool_or_auto(name: str, value: Any, estimator: Any) -> None:
    """True, False or ``"auto"``."""
    if not (isinstance(value, str) and value == AUTO) and not isinstance(value, bool | np.bool_):
        raise ValueError(f'{name} must be True, False or "auto"; got {value!r}')


EARLY_STOPPING = Param(
    "early_stopping", AUTO, bool_or_auto,
    "early stopping (memo): validation batches held out, the lap whose topics predict "
    "them best kept, the fit ended after n_iter_no_change laps without a better one "
    f"(auto: on data of at least {config.EARLY_STOPPING_MIN_BATCHES} batches)",
    Option("--no-early-stopping", off=True),
)  # fmt: skip
VALIDATION_FRACTION = Param(
    "validation_fraction", config.VALIDATION_FRACTION, positive(at_most=0.5),
    "share of the batches held out for early stopping, at least one (default {default})",
)  # fmt: skip
N_ITER_NO_CHANGE = Param(
    "n_iter_no_change", config.EARLY_STOPPING_PATIENCE, integer(1),
    "laps without a better validation score after which early stopping ends the fit",
)  # fmt: skip
#: early stopping's parameters, after ``tol``
EARLY_STOPPING_PARAMS = (EARLY_STOPPING, VALIDATION_FRACTION, N_ITER_NO_CHANGE)
BATCH_SIZE = Param(
    "batch_size", None, integer(1, hint="Use None for the store's chunks.", none=True),
    "rows per batch (default chunks)", Option("--batch-size", parse_positive_int),
)  # fmt: skip
BATCHES_PER_UPDATE = Param(
    "batches_per_update", None, integer(1, none=True),
    "batches visited between global steps (default: the number of workers, 1 with --sync); "
    "the same --seed gives the same model only with the same N",
    Option("--batches-per-update", parse_positive_int, metavar="N"),
)  # fmt: skip
N_INIT = Param(
    "n_init", 1, integer(1), "independent initializations; the highest final ELBO is kept"
)
SVI_DELAY = Param(
    "svi_delay", config.SVI_DELAY, positive(), "SVI learning rate (delay + t) ** (-kappa): delay"
)
SVI_KAPPA = Param(
    "svi_kappa", config.SVI_KAPPA, positive(at_most=1),
    "SVI learning rate (delay + t) ** (-kappa): kappa, in (0, 1]",
)  # fmt: skip
RANDOM_STATE = Param(
    "random_state", None, seed, "random seed (default {default})", Option("--seed", int, default=0)
)
CLIENT = Param(
    "client", None, None,
    "where batch tasks run: None (a LocalCluster), 'sync', a Client or a scheduler address",
)  # fmt: skip
N_WORKERS = Param(
    "n_workers", None, integer(1, none=True), "worker processes of a LocalCluster started by fit"
)
VERBOSE = Param("verbose", 0, integer(0, 2), "0 warnings only, 1 a log line per lap, 2 debug")
PROGRESS = Param("progress", None, None, "progress bar per lap (None: only on a terminal)")
CHECKPOINT_DIR = Param(
    "checkpoint_dir", None, None, "folder of the checkpoints written every lap (memo, esvi)"
)
RESUME = Param("resume", False, None, "continue the latest checkpoint in checkpoint_dir")


def mapping_or_none(name: str, value: Any, estimator: Any) -> None:
    if value is not None and not isinstance(value, Mapping):
        raise ValueError(
            f"{name} must be a dict of fsspec options (e.g. {{'anon': True}}) or None; got "
            f"{type(value).__name__}"
        )


STORAGE_OPTIONS = Param(
    "storage_options", None, mapping_or_none,
    "fsspec options (credentials, endpoint) of the store URLs fit reads and writes "
    "(a corpus, checkpoint_dir); never saved with the model",
)  # fmt: skip

#: the entries after the model's own, in the signatures' order
RUN = (N_INIT, SVI_DELAY, SVI_KAPPA, RANDOM_STATE, CLIENT, N_WORKERS, VERBOSE, PROGRESS,
       CHECKPOINT_DIR, RESUME, STORAGE_OPTIONS)  # fmt: skip

# the mixtures --------------------------------------------------------------------

CLUSTERS = Param(
    "n_components", 10, integer(1), "K, the number of clusters",
    Option("--components", parse_positive_int, required=True),
)  # fmt: skip
WEIGHT_ALPHA = Param(
    "alpha", 1.0, positive(), "weight concentration (default {default})", Option("--alpha", float)
)
SEEDS = Param(
    "init", "kmeans++", one_of(*INIT_METHODS),
    "k-means++ seeds under the model's divergence, or random examples",
)  # fmt: skip
COVARIANCE_TYPE = Param(
    "covariance_type", "zero-mean", one_of(*COVARIANCE_TYPES),
    "covariance type (default {default})", Option("--covariance", choices=COVARIANCE_TYPES),
)  # fmt: skip
PRIOR_SCALE = Param(
    "prior_scale", None, positive(none=True),
    "prior expected covariance prior_scale * I (default: from the data)",
)  # fmt: skip
NU = Param("nu", None, positive(none=True), "Wishart degrees of freedom (default D + 2)")
LAM = Param("lam", 0.1, positive(), "Dirichlet pseudo-count of each cluster's word distribution")

#: the mixtures' algorithms: the shared ones and ESVI (lsdask.estimators.mixture_esvi)
MIXTURE_ALGORITHM = replace(
    ALGORITHM, check=one_of(*ALGORITHMS, "esvi"),
    help="memoized VI, stochastic VI, full-batch VB or ESVI (model-parallel; default {default})",
    option=Option("--algorithm", choices=(*ALGORITHMS, "esvi")),
)  # fmt: skip
MIXTURE_BLOCKS = Param(
    "n_blocks", None, integer(1, none=True),
    "ESVI: P, component blocks and workers (default: n_workers, or 1 with client='sync')",
    Option("--blocks", parse_positive_int, metavar="P"),
)  # fmt: skip
MIXTURE_SCHEDULE = Param(
    "schedule", "rotation", one_of("rotation", "nomadic"),
    "ESVI: component blocks passed on in lockstep sub-steps (rotation), or routed at random "
    "as parts finish, with no barrier but at a rotation's end (nomadic, the paper's)",
    Option("--schedule", choices=("rotation", "nomadic")),
)  # fmt: skip

#: every mixture's parameters
MIXTURE_PARAMS = ParamTable(
    (CLUSTERS, SPARSITY, MIXTURE_ALGORITHM, N_LAPS, TOL, BATCH_SIZE, BATCHES_PER_UPDATE,
     WEIGHT_ALPHA, SEEDS, MIXTURE_BLOCKS, MIXTURE_SCHEDULE, *RUN)
)  # fmt: skip
#: :class:`lsdask.GaussianMixture`
GAUSSIAN_PARAMS = MIXTURE_PARAMS.with_after("n_components", COVARIANCE_TYPE, PRIOR_SCALE, NU)
#: :class:`lsdask.MultinomialMixture`
MULTINOMIAL_PARAMS = MIXTURE_PARAMS.with_after("n_components", LAM)

# LDA -------------------------------------------------------------------------------

TOPICS = Param(
    "n_components", 10, integer(1), "K, the number of topics",
    Option("--topics", parse_positive_int, required=True),
)  # fmt: skip
TOPIC_SPARSITY = replace(
    SPARSITY, default=8, check=any_l, help="L (default {default})",
    option=replace(SPARSITY.option, none_flag="--dense", none_help="dense local step (no L)"),
)  # fmt: skip
DOC_ALPHA = Param(
    "alpha", 0.5,
    positive_or_auto("each document's E[log pi_d] (the memo of every q(pi_d))"),
    "document-topic concentration in total, alpha/K per topic (default {default}); auto: "
    "an asymmetric alpha_k per topic, learned in every global step from {default}/K "
    "(svi-gibbs: after every minibatch, from 0.1 per topic)",
    Option("--alpha", parse_positive_or_auto, metavar="{ALPHA,auto}"),
)  # fmt: skip
ETA = Param(
    "eta", 0.1, positive_or_auto("the topic-word counts"),
    "topic-word pseudo-count (default {default}); auto: learned in every global step, "
    "from {default}",
    Option("--eta", parse_positive_or_auto, metavar="{ETA,auto}"),
)  # fmt: skip
RESTARTS = Param(
    "restarts", True, boolean, "restart proposals in the local step",
    Option("--no-restarts", off=True),
)  # fmt: skip
MAX_LOCAL_ITERS = Param("max_local_iters", 100, integer(1), "iterations per document at most")
LOCAL_CONV_THRESH = Param(
    "local_conv_thresh", 0.05, positive(),
    "a document's iterations stop when max |Delta N_dk| falls below this",
)  # fmt: skip
TOPIC_INIT = Param(
    "init", "auto", lda_init,
    "how the topics start: collapsed Gibbs sampling on the corpus or a sample of it "
    "(gibbs: slower to start, better topics), k-means++ seed documents, random "
    "ones, the topics of a saved model over the same vocabulary, or topic-word counts "
    "(K, V) saved with numpy.save; auto (default): gibbs where the counts are whole "
    "tokens, else kmeans++",
    Option("--init", metavar="{auto,kmeans++,random,gibbs,MODEL_DIR,FILE.npy}"),
)  # fmt: skip
GIBBS_SWEEPS = Param(
    "gibbs_sweeps", config.GIBBS_SWEEPS, integer(1),
    "sweeps of the Gibbs start (--init gibbs or auto; default {default})",
    Option("--gibbs-sweeps", parse_positive_int, metavar="N"),
)  # fmt: skip
GIBBS_TOL = Param(
    "gibbs_tol", None, positive(zero=True, hint="0 runs every sweep.", none=True),
    "the Gibbs start stops before --gibbs-sweeps once its joint log-likelihood per token, "
    f"averaged over 50 sweeps, rose by less than this over the 50 before (0: never; "
    f"default {config.GIBBS_TOL_LEARNED} with a learned alpha, else 0)",
    Option("--gibbs-tol", parse_nonnegative_float, metavar="NATS"),
)  # fmt: skip
GIBBS_TOKENS = Param(
    "gibbs_tokens", config.GIBBS_SAMPLE_TOKENS, integer(1),
    "tokens the Gibbs start samples at most: the whole corpus when it holds fewer "
    "(default {default:,}); its time and memory grow with it",
    Option("--gibbs-tokens", parse_positive_int, metavar="N"),
)  # fmt: skip

# LDA by SVI-Gibbs (algorithm="svi-gibbs", lsdask.estimators.lda_svi_gibbs) -------

GIBBS_BURNIN = Param(
    "gibbs_burnin", config.SVI_GIBBS_BURNIN, integer(0, hint="0 keeps every sweep."),
    "svi-gibbs: burn-in Gibbs sweeps per document, discarded (B; default {default})",
    Option("--gibbs-burnin", parse_nonnegative_int, metavar="B"),
)  # fmt: skip
GIBBS_SAMPLES = Param(
    "gibbs_samples", config.SVI_GIBBS_SAMPLES, integer(1, hint="At least one sweep is kept."),
    "svi-gibbs: kept Gibbs sweeps per document, averaged (S; default {default})",
    Option("--gibbs-samples", parse_positive_int, metavar="S"),
)  # fmt: skip
GIBBS_ESTIMATOR = Param(
    "gibbs_estimator", config.SVI_GIBBS_ESTIMATOR,
    one_of("rao-blackwell", "rao-blackwell-doc", "draws"),
    "svi-gibbs: how the kept sweeps count a token: its conditional, Rao-Blackwellised in "
    "sixteenths (rao-blackwell: the word's topics exactly; rao-blackwell-doc: the "
    "document's too, denser), or its drawn topic (draws; default {default})",
    Option("--gibbs-estimator", choices=("rao-blackwell", "rao-blackwell-doc", "draws")),
)  # fmt: skip
GIBBS_WEIGHTS = Param(
    "gibbs_weights", config.SVI_GIBBS_WEIGHTS, one_of("mean", "geometric"),
    "svi-gibbs: what documents are sampled against: the topics' posterior mean E[phi] "
    "(mean, as collapsed Gibbs; eta 0.1 suits it) or exp E[log phi] (geometric, the "
    "paper's Eq. 9; wants eta 0.3-0.4) (default {default})",
    Option("--gibbs-weights", choices=("mean", "geometric")),
)  # fmt: skip
GIBBS_PRUNE = Param(
    "gibbs_prune", config.SVI_GIBBS_PRUNE, positive(zero=True, hint="0 keeps every entry."),
    "svi-gibbs: every 1,600 documents the topic-word entries that have decayed below "
    "gibbs_prune * eta are dropped, so a stream's topics stay sparse (0 keeps every "
    "entry, Eq. 11 exactly; default {default})",
    Option("--gibbs-prune", parse_nonnegative_float, metavar="F"),
)  # fmt: skip
MINIBATCH_SIZE = Param(
    "minibatch_size", config.SVI_GIBBS_MINIBATCH, integer(1),
    "svi-gibbs: documents per minibatch, drawn at random across row groups (default {default})",
    Option("--minibatch-size", parse_positive_int, metavar="N"),
)  # fmt: skip

# LDA by ESVI (algorithm="esvi", lsdask.estimators.lda_esvi) -----------------------

#: the algorithms LDA takes: the shared ones, SVI-Gibbs (stochastic VI with a sparse Gibbs
#: local step) and ESVI (model-parallel)
LDA_ALGORITHMS = (*ALGORITHMS, "svi-gibbs", "esvi")


def topk_in_range(name: str, value: Any, estimator: Any) -> None:
    """ESVI's C: None (the sparsity L, or every topic without it) or an integer in [1, K]."""
    K = estimator.n_components
    if value is not None:
        hint = f"C is the number of topics kept per token, 1..K={K}; use topk={K} to keep all K."
        check_int(name, value, 1, K, hint)


LDA_ALGORITHM = replace(
    ALGORITHM, check=one_of(*LDA_ALGORITHMS),
    help="memoized VI, stochastic VI, full-batch VB, svi-gibbs (stochastic VI with a sparse "
    "Gibbs local step, over minibatches of documents) or esvi (model-parallel; default "
    "{default})",
    option=Option("--algorithm", choices=LDA_ALGORITHMS),
)  # fmt: skip
N_BLOCKS = Param(
    "n_blocks", None, integer(1, none=True),
    "ESVI: P, vocabulary blocks and workers (default: n_workers, or 1 with client='sync')",
    Option("--blocks", parse_positive_int, metavar="P"),
)  # fmt: skip
TOPK = Param(
    "topk", None, topk_in_range,
    "ESVI: C, topics kept per token (default: the sparsity L; all K without it)",
    Option("--topk", parse_positive_int, metavar="C"),
)  # fmt: skip
TOPK_RULE = Param(
    "topk_rule", "lsparse", one_of("lsparse", "paper"),
    "ESVI with C < K: drop the left-over mass (lsparse, exact coordinate steps) or spread "
    "it over the other topics (paper)",
    Option("--topk-rule", choices=("lsparse", "paper")),
)  # fmt: skip
PI_SYNC = Param(
    "pi_sync", "exact", one_of("exact", "stale"),
    "ESVI: topic totals all-reduced after every sub-step (exact), or each part's view "
    "refreshed by a round-robin token (stale, the paper's)",
    Option("--pi-sync", choices=("exact", "stale")),
)  # fmt: skip
SCHEDULE = replace(
    MIXTURE_SCHEDULE,
    help="ESVI: blocks passed on in lockstep sub-steps (rotation), or routed at random as "
    "parts finish, with no barrier but at a rotation's end (nomadic, the paper's; needs "
    "pi_sync='stale')",
)  # fmt: skip
ESVI_ITERS = Param(
    "esvi_iters", 1, integer(1),
    "ESVI: passes over each document's tokens per sub-step, its topic counts written after "
    "each (default {default}: every update reads the sub-step's snapshot, the paper's)",
    Option("--esvi-iters", parse_positive_int, metavar="N"),
)  # fmt: skip
ESVI_TOL = Param(
    "esvi_tol", 0.05, positive(zero=True),
    "ESVI: a document stops its passes of a sub-step (at most esvi_iters) once one moves "
    "none of its topic counts by this much (max |Delta n_dk|, as memoized VI's local step; "
    "default {default}; 0: always esvi_iters passes)",
    Option("--esvi-tol", parse_nonnegative_float, metavar="T"),
)  # fmt: skip
ESVI_DTYPE = Param(
    "esvi_dtype", "float64", one_of("float64", "float32"),
    "ESVI: element type of the topic-word blocks the workers hold and move (float32 halves "
    "their bytes; the updates and sums are computed in float64)",
    Option("--esvi-dtype", choices=("float64", "float32")),
)  # fmt: skip

#: :class:`lsdask.LDA`
LDA_PARAMS = ParamTable(
    (TOPICS, TOPIC_SPARSITY, DOC_ALPHA, ETA, LDA_ALGORITHM, N_LAPS, TOL, *EARLY_STOPPING_PARAMS,
     BATCH_SIZE,
     BATCHES_PER_UPDATE, RESTARTS, MAX_LOCAL_ITERS, LOCAL_CONV_THRESH, TOPIC_INIT, GIBBS_SWEEPS,
     GIBBS_TOL, GIBBS_TOKENS, GIBBS_BURNIN, GIBBS_SAMPLES, GIBBS_ESTIMATOR, GIBBS_WEIGHTS,
     GIBBS_PRUNE, MINIBATCH_SIZE, N_BLOCKS, TOPK, TOPK_RULE, PI_SYNC, SCHEDULE, ESVI_ITERS,
     ESVI_TOL, ESVI_DTYPE, *RUN)
)  # fmt: skip


# HDP -------------------------------------------------------------------------------


#: the moves that change the HDP's number of topics
MOVE_NAMES = ("delete", "merge")


def move_names(name: str, value: Any, estimator: Any) -> None:
    """A tuple of distinct names among ``"delete"`` and ``"merge"`` (``()``: none)."""
    ok = isinstance(value, tuple | list) and all(isinstance(v, str) for v in value)
    if not ok or len(set(value)) != len(value) or not set(value) <= set(MOVE_NAMES):
        raise ValueError(
            f"{name}={value!r}: expected a tuple of distinct move names among "
            f"{MOVE_NAMES} (() for none), e.g. {name}=('delete', 'merge')"
        )


def parse_moves(text: str) -> tuple[str, ...]:
    """``--moves delete,merge`` (or ``none``) as a tuple."""
    text = text.strip()
    if text in ("", "none"):
        return ()
    names = tuple(part.strip() for part in text.split(","))
    if len(set(names)) != len(names) or not set(names) <= set(MOVE_NAMES):
        raise argparse.ArgumentTypeError(
            f"expected {', '.join(MOVE_NAMES)} (comma-separated) or none; got {text!r}"
        )
    return names


def memo_or_vb(name: str, value: Any, estimator: Any) -> None:
    """``"memo"`` or ``"vb"``: the HDP's sticks are fitted to the whole corpus."""
    if isinstance(value, str) and value == "svi":
        raise ValueError(
            f"{name}='svi' is not supported by HDP: its global step fits the sticks to every "
            "document's E[log pi_d] (the memo of every q(pi_d)), which SVI never holds. Use "
            f"{name}='memo' or 'vb'"
        )
    check_choice(name, value, ("memo", "vb"))


MAX_TOPICS = Param(
    "max_components", 100, integer(2, hint="The HDP needs at least 2 topics to weigh."),
    "K, the most topics (the truncation of the HDP)",
    Option("--topics", parse_positive_int, required=True),
)  # fmt: skip
HDP_ALPHA = Param(
    "alpha", 0.5, positive(),
    "document concentration: pi_d ~ Dir(alpha E[beta]) (default {default})",
    Option("--alpha", float),
)  # fmt: skip
GAMMA = Param(
    "gamma", 10.0, positive(),
    "top-level stick concentration: u_k ~ Beta(1, gamma) (default {default})",
    Option("--gamma", float),
)  # fmt: skip
MOVES = Param(
    "moves", MOVE_NAMES, move_names,
    "moves that change K, comma-separated: delete, merge, or none (default delete,merge)",
    Option("--moves", parse_moves),
)  # fmt: skip
HDP_ALGORITHM = replace(
    ALGORITHM, check=memo_or_vb, help="memoized VI or full-batch VB (default {default})",
    option=replace(ALGORITHM.option, choices=("memo", "vb")),
)  # fmt: skip

#: :class:`lsdask.HDP` (SVI is refused, so without its learning rate)
HDP_PARAMS = ParamTable(
    (MAX_TOPICS, TOPIC_SPARSITY, HDP_ALPHA, GAMMA, ETA, MOVES, HDP_ALGORITHM, N_LAPS, TOL,
     *EARLY_STOPPING_PARAMS, BATCH_SIZE, BATCHES_PER_UPDATE, RESTARTS, MAX_LOCAL_ITERS,
     LOCAL_CONV_THRESH, TOPIC_INIT, GIBBS_SWEEPS, GIBBS_TOL, GIBBS_TOKENS,
     *(p for p in RUN if p not in (SVI_DELAY, SVI_KAPPA)))
)  # fmt: skip


# --------------------------------------------------------------------------- conventions


def read_only(array: Any) -> Any:
    """A read-only view of a fitted array that aliases the model's state, so that
    an in-place edit (``components_ /= ...``) fails instead of changing the
    model behind its back; edit a copy."""
    view = np.asarray(array).view()
    view.flags.writeable = False
    return view


class Parameters:
    """Mixin: parameters are the arguments of ``__init__``, stored as attributes."""

    @classmethod
    def _param_names(cls) -> list[str]:
        signature = inspect.signature(cls.__init__)
        return sorted(
            name
            for name, p in signature.parameters.items()
            if name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        )

    def _store(self, arguments: dict[str, Any]) -> None:
        """Keep every ``__init__`` argument as the attribute of its name: an
        ``__init__`` calls ``self._store(locals())`` and does nothing else."""
        for name in self._param_names():
            setattr(self, name, arguments[name])

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The estimator's parameters by name (``deep`` is accepted for
        scikit-learn compatibility; lsdask estimators hold no sub-estimators)."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self: E, **params: Any) -> E:
        """Set parameters by name; returns the estimator."""
        valid = self._param_names()
        for name, value in params.items():
            if name not in valid:
                raise ValueError(
                    f"invalid parameter {name!r} for {type(self).__name__}; valid parameters "
                    f"are {valid}"
                )
            setattr(self, name, value)
        return self

    def __sklearn_tags__(self) -> Any:
        """scikit-learn's tags (asked only by scikit-learn, e.g. ``cross_val_score``;
        imported here so that lsdask itself does not need scikit-learn)."""
        from sklearn.utils import Tags, TargetTags

        return Tags(estimator_type=None, target_tags=TargetTags(required=False))

    def __repr__(self) -> str:
        defaults = {
            name: p.default for name, p in inspect.signature(type(self).__init__).parameters.items()
        }
        changed = []
        for name, value in self.get_params().items():
            default = defaults.get(name, inspect.Parameter.empty)
            try:
                same = bool(value is default or value == default)
            except (ValueError, TypeError):  # arrays compare elementwise
                same = False
            if not same:
                changed.append(f"{name}={value!r}")
        return f"{type(self).__name__}({', '.join(changed)})"


def clone(estimator: E) -> E:
    """A new, unfitted estimator of the same class with copies of the same
    parameters (deep copies, as scikit-learn's ``clone``: a cloned estimator's
    fit does not advance the original's random Generator), but the ``client``,
    which is shared."""
    return type(estimator)(
        **{
            name: value if name == "client" else copy.deepcopy(value)
            for name, value in estimator.get_params().items()
        }
    )
