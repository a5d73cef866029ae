"""``lsdask.LDA``: latent Dirichlet allocation with the L-sparse local step."""

from __future__ import annotations

import contextlib
import logging
import os
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from lsdask import config
from lsdask.config import PROGRESS
from lsdask.engine import make_executor
from lsdask.errors import DataError
from lsdask.estimators.learning import VariationalEstimator
from lsdask.estimators.params import AUTO, LDA_PARAMS, lda_init_names, read_only
from lsdask.estimators.state import checkpoint_settings
from lsdask.estimators.validation_split import (
    hold_out,
    scorer_of,
    uses_early_stopping,
    validation_positions,
)
from lsdask.evaluate import (
    completion_score,
    document_completion_sums,
    split_documents,
    top_word_ids,
    umass_coherence,
)
from lsdask.io.sources import BatchSource, as_batch_source, rows_at_most
from lsdask.io.stores import is_store_url
from lsdask.learn import initial_stats
from lsdask.learn.base import LearnResult, padded_trace
from lsdask.learn.early_stopping import EarlyStopping
from lsdask.learn.gibbs_start import (
    GibbsSample,
    gibbs_refusal,
    gibbs_sample,
    gibbs_sample_docs,
    within_tokens,
)
from lsdask.learn.tasks import LocalStepTask
from lsdask.models import MixtureModel, Multinomial, SuffStats, sum_stats
from lsdask.models.collapsed import DocTopicCounts, posterior_prior_stats
from lsdask.models.lda import LDAGlobals, LDAModel, LocalStepOptions, as_csr_batch
from lsdask.persist.resume import holding_checkpoint_folder, open_resume
from lsdask.validation import check_int, check_sparsity, check_word_count_bound

logger = logging.getLogger(__name__)


#: the corpus classes fit reads batch by batch (a local one, one in a store)
CORPORA = ("Corpus", "StoreCorpus")


def _is_corpus_path(X: Any) -> bool:
    """A path that is not a Zarr array: read as a corpus (whose errors then say
    what is missing, rather than a Zarr reader's)."""
    if not isinstance(X, str | os.PathLike):
        return False
    root = os.fspath(X)
    return not any(os.path.isfile(os.path.join(root, m)) for m in (".zarray", "zarr.json"))


def _check_resumed_vocabulary(resumed: dict, digest: str | None, source: BatchSource) -> None:
    """Refuse to resume a checkpoint written over other words than the corpus's
    (same size, other words: its memo and topics would stand for the wrong words)."""
    saved = resumed["config"]["params"].get("vocabulary_sha256")
    if saved is not None and digest is not None and saved != digest:
        raise ValueError(
            f"checkpoint {resumed['path']} was written by a fit over another vocabulary than "
            f"that of {source.description} (the same {source.n_features} ids, other words). "
            "Resume over the vocabulary of the first corpus (ingest new documents with "
            "`lsdask ingest ... --vocab FIRST_CORPUS`), or start a new checkpoint folder"
        )


def _check_words(vocabulary: Any, n_features: int) -> list[str]:
    """``vocabulary=`` of a matrix: one distinct string per column, as a sequence
    or a mapping from column to word (gensim's ``Dictionary``/``id2word``)."""
    if isinstance(vocabulary, str):
        raise TypeError("vocabulary must be a sequence of words, one per column; got a string")
    if isinstance(vocabulary, Mapping) or hasattr(vocabulary, "id2token"):
        keys = sorted(vocabulary.keys())
        if keys != list(range(len(keys))):
            raise ValueError(
                "vocabulary as a mapping must map the columns 0, 1, ..., V-1 to words; its "
                f"keys run from {keys[0] if keys else None} to {keys[-1] if keys else None} "
                f"with {len(keys)} of them"
            )
        vocabulary = [vocabulary[k] for k in keys]
    words = list(vocabulary)
    bad = next((i for i, w in enumerate(words) if not isinstance(w, str)), None)
    if bad is not None:
        raise TypeError(
            f"vocabulary[{bad}] is {words[bad]!r}, not a word (str); give the words of the "
            "columns, not their ids"
        )
    if len(words) != n_features:
        raise ValueError(
            f"vocabulary has {len(words)} words, but X has {n_features} columns; give one "
            "word per column (e.g. CountVectorizer.get_feature_names_out())"
        )
    seen: dict[str, int] = {}
    for i, w in enumerate(words):
        if w in seen:
            raise ValueError(f"vocabulary[{seen[w]}] and vocabulary[{i}] are both {w!r}")
        seen[w] = i
    return words


def _check_has_tokens(X: Any, source: BatchSource) -> None:
    """A DataError if the documents to fit hold no tokens at all (every word list
    empty, or every count 0): there is nothing to learn topics from."""
    # the Parquet store is imported where a corpus is used: it loads pyarrow,
    # which `import lsdask` should not pay for
    from lsdask.io.corpus.source import CorpusRows

    if isinstance(source.batches[0], CorpusRows):
        total = sum(b.batch.n_tokens for b in source.batches)
    elif sp.issparse(X) or isinstance(X, np.ndarray):
        total = float(X.sum())
    else:
        return  # an out-of-core array: not read here (its batches are checked when read)
    if total == 0:
        raise DataError(
            f"{source.description}: its {source.n_rows} documents hold no tokens (every word "
            "list is empty or every count 0); there is nothing to learn topics from. Check "
            "the ingest step (its vocabulary bounds may have pruned every word)."
        )


def _sampler_alpha(model: LDAModel) -> float | np.ndarray:
    """The document-topic prior the Gibbs start samples with: the model's where it is
    fixed; where it is learned, ``config.GIBBS_LEARNED_ALPHA_START`` per topic, from
    which the sampler fits it (a larger prior than LDA's default lets the chain move
    documents between topics sooner, and the fit brings it down to the data's)."""
    if model.learn_alpha:
        return np.full(model.n_components, config.GIBBS_LEARNED_ALPHA_START)
    return model.total_alpha


def _topic_stats(counts: np.ndarray, n_docs: float, **prior: np.ndarray) -> SuffStats:
    """Statistics of topic-word ``counts`` (K, V) standing for ``n_docs`` documents
    (and, for a learned alpha, the prior's statistics ``S``, ``W``, ``Cdir``)."""
    counts = np.asarray(counts, dtype=np.float64)
    return SuffStats(
        words=counts,
        H=np.zeros(1),
        alloc=np.zeros(1),
        N=counts.sum(axis=1),
        n_docs=np.array([float(n_docs)]),
        **prior,
    )


def _sampled_stats(model: LDAModel, drawn: GibbsSample, n_docs: float) -> SuffStats:
    """The statistics of the Gibbs start's sample: the mean topic-word counts of
    its recent sweeps and, where
    alpha is learned (the first global step fits it to the sampled documents), the
    prior's statistics of its document-topic counts."""
    prior: dict[str, np.ndarray] = {}
    if model.learn_alpha:
        S, W, Cdir = posterior_prior_stats(DocTopicCounts.of(drawn.doc_topic), drawn.alpha)
        prior = {"S": S, "W": np.array([W]), "Cdir": np.array([Cdir])}
    return _topic_stats(drawn.topic_word_mean, n_docs, **prior)


class LDA(VariationalEstimator):
    """Latent Dirichlet allocation learned by L-sparse variational inference.

    Parameters
    ----------
    n_components : int
        K, the number of topics.
    sparsity : int or None
        L: topics kept per word type in each document (lsparse Sec. 5); None
        runs the dense step (Alg. 2, left). L >= K keeps every active topic.
    alpha : float or "auto"
        Document-topic concentration; each topic's pseudo-count is alpha / K.
        ``"auto"``: an asymmetric prior ``alpha_k``, one per topic, fitted in every
        global step to the documents' ``E[log pi_d]`` (Minka's Newton method on the
        ELBO's allocation term, from the default's alpha / K), so that topics used by
        many documents get larger pseudo-counts (``alpha_``, ``alpha_trace_``).
    eta : float or "auto"
        Topic-word Dirichlet pseudo-count. ``"auto"``: a symmetric eta fitted in every
        global step, jointly with the topics, to the topic-word counts (``eta_``).
        Learned priors need ``algorithm="memo"`` or ``"vb"``: SVI holds no
        whole-corpus statistics to fit them to. ``algorithm="svi-gibbs"`` learns
        ``alpha`` (not ``eta``): it keeps a running estimate of the corpus's
        sampled document-topic counts and refits ``alpha_k`` to it after every
        minibatch, starting at 0.1 per topic (online EM; docs/algorithms.md).
    algorithm : {"memo", "svi", "vb", "svi-gibbs", "esvi"}
        ``"svi-gibbs"``: stochastic VI with a sparse Gibbs local step (Mimno, Hoffman
        & Blei 2012; docs/algorithms.md): minibatches of ``minibatch_size`` documents
        drawn at random across row groups, each document's topics sampled
        (``gibbs_burnin`` sweeps discarded, ``gibbs_samples`` kept), the topics
        updated sparsely with ``rho_t = (svi_delay + t) ** -svi_kappa``; ``n_laps``
        counts epochs; a corpus that grows during the fit is taken in between
        minibatches. ``alpha`` is the total here too (alpha / K per topic in the
        sampler's Eq. 9): at large K raise it (the paper's 0.1 per topic is
        ``alpha=0.1 * K``). ``sparsity``, ``init``, ``n_init`` and the local-step
        options are not used; ``elbo_trace_`` is nan (no ELBO is computed) and
        ``nonzero_trace_`` gives the stored entries of the topics after each epoch.
        ``"esvi"``: model-parallel ESVI (docs/esvi.md): the topic-word parameters cut
        into ``n_blocks`` vocabulary blocks, one per worker, rotated between workers;
        ``n_laps`` counts rotations. Fixed priors; ``init="random"``:
        random first responsibilities per token (no K x V array anywhere);
        ``"auto"`` (default), ``"gibbs"``, ``"kmeans++"`` or counts: memoized VI's
        start for the same ``random_state``, made in the driver, against which the first rotation
        gives every token its first responsibilities (``substep_elbo_trace_`` is
        nan during it); each token keeps ``topk`` topics, by default ``sparsity``
        (L, as memoized VI's local step keeps); checkpoints block by block in
        ``checkpoint_dir``/esvi, ``resume`` goes on to ``n_laps`` rotations in all.
    init : {"auto", "kmeans++", "random", "gibbs"} or array of shape (K, V)
        How the topics start. ``"kmeans++"`` / ``"random"``: from K documents
        of a sample (chosen by k-means++ under the KL divergence, or at random),
        each sample document counted in its nearest one's topic. ``"gibbs"``:
        ``gibbs_sweeps`` sweeps of collapsed Gibbs sampling over the whole
        corpus, or a sample of it beyond ``gibbs_tokens`` tokens or the
        documents whose document-topic counts fill 256 MiB (335,544 at K=200;
        ``lsdask.config.GIBBS_SAMPLE_DOC_TOPIC_BYTES``; in the driver, in two
        threads; counts rounded to whole tokens, and refused where rounding
        loses more than half their total or leaves fewer tokens than topics,
        as with frequencies; per token, work in the document's topics, all
        K only for a small fraction of the draws): slower to start, but
        memoized VI from it ends at better topics (see the README's LDA
        section). ``"auto"`` (default): ``"gibbs"`` where it is not refused,
        else ``"kmeans++"`` (logged). An array:
        topic-word counts to start from, ``q(phi_k) = Dir(eta + init[k])``,
        e.g. ``components_ - eta`` of another fit or another tool's topic-word
        counts (non-negative and finite; a row of zeros starts at the prior).
    n_laps, tol, batch_size, batches_per_update, n_init, svi_delay,
    svi_kappa, random_state, client, n_workers, verbose, progress
        As for :class:`lsdask.GaussianMixture`. ``batch_size`` applies to
        in-memory inputs; a Parquet corpus's row groups are its batches.
    early_stopping : bool or "auto"
        Memoized VI: hold out ``validation_fraction`` of the batches (at least one,
        evenly spaced), score the topics on them at the start (lap 0: the
        initial topics, from the Gibbs start by default) and after every lap by
        document completion under the model's own prior (``validation_trace_``),
        keep the best lap's topics and priors (``best_lap_``; 0: the start's) and
        end the fit after
        ``n_iter_no_change`` laps without a better score. On some corpora the
        topics memoized VI climbs to predict new documents worse than those of
        its first laps (docs/math.md, "Why heldout can fall while the ELBO
        rises"). ``"auto"`` (default): on where the data has at least 20
        batches (``lsdask.config.EARLY_STOPPING_MIN_BATCHES``), below which a
        held-out batch is too large a share of the data. Off for the other
        algorithms.
    validation_fraction : float
        Share of the batches held out by early stopping (default 0.02).
    n_iter_no_change : int
        Laps without a better validation score after which early stopping ends
        the fit (default 3).
    gibbs_sweeps : int
        Sweeps of ``init="gibbs"`` (default 1,000, ``lsdask.config.GIBBS_SWEEPS``),
        paid once per fit (per start with ``n_init`` > 1): the sampled topics
        still improve over hundreds of sweeps, and memoized VI keeps what the
        sampler reached; fewer sweeps start sooner at worse topics. With
        ``alpha="auto"`` the sampler learns the prior too: it starts at 0.1 per
        topic (``lsdask.config.GIBBS_LEARNED_ALPHA_START``) and refits it to the
        sampled documents every 10 sweeps (Minka's fixed point, as tomotopy's
        ``optim_interval`` and MALLET do); variational LDA's prior then starts
        from the sampled documents' posteriors.
    gibbs_tol : float or None
        The Gibbs start stops before ``gibbs_sweeps`` once its joint
        log-likelihood per token (computed every 10 sweeps), averaged over 50
        sweeps, rose by less than this many nats over the 50 sweeps before; 0
        makes every sweep. None (default): 0.01
        (``lsdask.config.GIBBS_TOL_LEARNED``) where alpha is learned, whose chain
        settles within a few hundred sweeps, else 0: under a small fixed prior
        the chain mixes slowly and its topics still improve after its
        likelihood flattens.
    gibbs_tokens : int
        Tokens of the documents ``init="gibbs"`` samples at most (default
        16,000,000, ``lsdask.config.GIBBS_SAMPLE_TOKENS``): the whole corpus
        when it holds fewer, else whole documents drawn at random up to it.
        The start's time and memory grow with it (16 bytes per token); more
        documents give better topics.
    gibbs_burnin, gibbs_samples, minibatch_size : int
        ``algorithm="svi-gibbs"``'s B, S and documents per minibatch.
    gibbs_estimator : {"rao-blackwell", "rao-blackwell-doc", "draws"}
        ``algorithm="svi-gibbs"``: what a kept sweep counts for a token, an
        unbiased estimate of its conditional in sixteenths of a token, of lower
        variance than its draw (``"rao-blackwell-doc"``: lower still, denser
        topics), or its drawn topic (docs/algorithms.md).
    gibbs_weights : {"mean", "geometric"}
        ``algorithm="svi-gibbs"``: what each document's topics are sampled
        against. ``"mean"`` (default): the topics' posterior mean
        ``E[phi] = lambda / lambda_k.``, the weight collapsed Gibbs sampling
        draws against; it works at the usual ``eta=0.1``. ``"geometric"``:
        ``exp E[log phi]``, the paper's Eq. 9 (the ELBO's own coordinate
        step), which needs ``eta`` 0.3-0.4 to keep the topics from freezing
        (docs/algorithms.md).
    gibbs_prune : float
        ``algorithm="svi-gibbs"``: every 1,600 documents the topic-word entries
        whose count has decayed below ``gibbs_prune * eta`` are dropped
        (default 0.3). An entry decays at every step but never vanishes, so
        without this a stream's topics keep every (word, topic) pair ever
        sampled; 0 keeps them all (the paper's update exactly).
    n_blocks : int or None
        ESVI: P, the vocabulary blocks and workers (default ``n_workers``, or 1
        with ``client="sync"``).
    topk : int or None
        ESVI: C, the topics kept per token, 1..K (default ``sparsity``, the L
        of memoized VI's local step; all K with ``sparsity=None``).
    topk_rule : {"lsparse", "paper"}
        ESVI with C < K: drop the left-over mass (the L-sparse rule, an exact
        coordinate step) or spread it evenly over the other topics (the paper's).
    pi_sync : {"exact", "stale"}
        ESVI: the topic totals are all-reduced after every sub-step (exact: every
        sub-step is an exact coordinate step), or each part reads its own view
        of them, refreshed in turn by a circulating token (stale: the paper's
        round-robin totals; a view misses other parts' changes of the last
        2P - 1 sub-steps at most).
    schedule : {"rotation", "nomadic"}
        ESVI: the blocks are passed on in lockstep sub-steps, every part waiting
        for the others (rotation), or routed at random to idle parts as each
        part finishes, with no barrier but at a rotation's end (nomadic, the
        paper's asynchronous schedule; needs ``pi_sync="stale"``).
    esvi_iters : int
        ESVI: passes over each document's tokens per sub-step against the block
        it meets, the document's topic counts written after each pass (1, the
        default: every update reads the sub-step's snapshot, the paper's Alg. 5;
        more: fewer rotations to the same ELBO, each one dearer); with
        ``esvi_tol`` > 0, the most passes a document makes.
    esvi_tol : float
        ESVI: a document stops its passes of a sub-step once one moves none of
        its topic counts by ``esvi_tol`` or more (``max_k |Delta n_dk|``, the rule
        of memoized VI's local step, and its default 0.05), so each document gets
        the passes it needs; 0: always ``esvi_iters`` passes. No effect with one
        pass.
    esvi_dtype : {"float64", "float32"}
        ESVI: the element type of the topic-word blocks the workers hold and
        move; float32 halves their bytes (the updates and every sum are still
        computed in float64).
    restarts : bool
        Restart proposals in the local step (Sec. 5).
    max_local_iters : int
        Iterations per document at most (100 in the paper).
    local_conv_thresh : float
        Stop a document's iterations when ``max |Delta N_dk|`` falls below this.
    checkpoint_dir, resume
        Checkpoints and resuming, as for :class:`lsdask.GaussianMixture`; a
        resumed corpus may have gained or lost Parquet files (scheduled
        retraining).

    Attributes
    ----------
    components_ : (K, V) topic-word pseudo-counts ``lambda`` (rows normalize to E[phi])
    topic_word_ : (K, V) ``E[phi]``
    alpha_ : (K,) the document-topic prior ``alpha_k`` of each topic (alpha / K each
        unless learned)
    eta_ : float, the topic-word prior (``eta`` unless learned)
    alpha_trace_ : (n_laps_,) ``sum_k alpha_k`` after every lap of ``fit`` (nan for
        laps made before a resumed fit started)
    vocabulary_ : list of str or None
    elbo_trace_, n_laps_, converged_
    validation_trace_ : (n_laps_ + 1,) the validation score (nats per token) of the
        start (lap 0) and after every lap, empty without early stopping
    best_lap_ : int or None, the lap whose topics the model keeps (0: the start's;
        None without early stopping)
    nonzero_trace_, n_steps_, driver_share_
        ``algorithm="svi-gibbs"`` only: stored entries of the topics after each epoch,
        minibatches made, and the share of the run's time spent in the driver.
    """

    param_table = LDA_PARAMS

    def __init__(
        self,
        n_components: int = 10,
        *,
        sparsity: int | None = 8,
        alpha: float | str = 0.5,
        eta: float | str = 0.1,
        algorithm: str = "memo",
        n_laps: int = 10,
        tol: float = config.DEFAULT_TOL,
        early_stopping: bool | str = "auto",
        validation_fraction: float = config.VALIDATION_FRACTION,
        n_iter_no_change: int = config.EARLY_STOPPING_PATIENCE,
        batch_size: int | None = None,
        batches_per_update: int | None = None,
        restarts: bool = True,
        max_local_iters: int = 100,
        local_conv_thresh: float = 0.05,
        init: str = "auto",
        gibbs_sweeps: int = config.GIBBS_SWEEPS,
        gibbs_tol: float | None = None,
        gibbs_tokens: int = config.GIBBS_SAMPLE_TOKENS,
        gibbs_burnin: int = config.SVI_GIBBS_BURNIN,
        gibbs_samples: int = config.SVI_GIBBS_SAMPLES,
        gibbs_estimator: str = config.SVI_GIBBS_ESTIMATOR,
        gibbs_weights: str = config.SVI_GIBBS_WEIGHTS,
        gibbs_prune: float = config.SVI_GIBBS_PRUNE,
        minibatch_size: int = config.SVI_GIBBS_MINIBATCH,
        n_blocks: int | None = None,
        topk: int | None = None,
        topk_rule: str = "lsparse",
        pi_sync: str = "exact",
        schedule: str = "rotation",
        esvi_iters: int = 1,
        esvi_tol: float = 0.05,
        esvi_dtype: str = "float64",
        n_init: int = 1,
        svi_delay: float = config.SVI_DELAY,
        svi_kappa: float = config.SVI_KAPPA,
        random_state: Any = None,
        client: Any = None,
        n_workers: int | None = None,
        verbose: int = 0,
        progress: bool | None = None,
        checkpoint_dir: str | None = None,
        resume: bool = False,
        storage_options: dict | None = None,
    ) -> None:
        self._store(locals())

    # -- parameters and data --------------------------------------------------
    def check_params(self, n_features: int | None = None) -> None:
        """Raise ValueError for a parameter the table does not accept, or for
        ``init`` counts of another shape than (K, ``n_features``) where the
        vocabulary's size is known (``fit`` checks them against its data)."""
        super().check_params()
        if n_features is not None:
            self._init_counts(n_features)

    def _init_counts(self, vocab_size: int | None, init: Any = None) -> np.ndarray | None:
        """``init`` (default ``self.init``) as float64 topic-word counts (K, V),
        checked; None for a method name."""
        init = self.init if init is None else init
        if isinstance(init, str):
            return None
        expected = f"(n_components, V) = ({self.n_components}, {vocab_size or 'V'})"
        try:
            counts = np.array(init.toarray() if sp.issparse(init) else init, float)
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"init must be {lda_init_names()} or an array of topic-word counts of shape "
                f"{expected}; got {type(init).__name__} ({exc})"
            ) from None
        if counts.ndim != 2 or (
            vocab_size is not None and counts.shape != (self.n_components, vocab_size)
        ):
            raise ValueError(
                f"init: expected topic-word counts of shape {expected}; got shape "
                f"{counts.shape}. Give one row per topic and one column per vocabulary word."
            )
        bad = ~np.isfinite(counts) | (counts < 0)
        if bad.any():
            k, v = np.argwhere(bad)[0]
            raise ValueError(
                f"init: topic-word counts must be finite and >= 0; init[{k}, {v}] is "
                f"{float(counts[k, v])!r} ({int(bad.sum())} such entries). Pass counts, not log "
                "probabilities (for a fitted lsdask model: components_ - eta)."
            )
        return counts

    def _source(self, X: Any, vocabulary: Any = None) -> tuple[BatchSource, list[str] | None]:
        """X's batches and words: a corpus's or a table's own, or ``vocabulary``
        for a matrix."""
        from lsdask.io.corpus.source import corpus_source
        from lsdask.io.tables import TableOptions

        if isinstance(X, TableOptions):
            source, words = self._table_source(X)
            if vocabulary is not None and list(vocabulary) != words:
                raise ValueError(
                    f"vocabulary= is given, but {source.description} has words of its own, "
                    "which differ; give the table its vocabulary (its vocabulary= option)"
                )
            return source, words
        if is_store_url(X) or _is_corpus_path(X) or type(X).__name__ in CORPORA:
            source, words = corpus_source(X, self.storage_options)
            if vocabulary is not None and list(vocabulary) != words:
                raise ValueError(
                    f"vocabulary= is given, but {source.description} has words of its own, "
                    "which differ; a corpus needs no vocabulary argument"
                )
            return source, words
        check_word_count_bound(X)  # before sums of such counts overflow
        source = as_batch_source(X, self.batch_size)
        if vocabulary is None:
            return source, None
        words = _check_words(vocabulary, source.n_features)
        return source, words

    def _table_source(self, table: Any) -> tuple[BatchSource, list[str]]:
        """A table's batches and vocabulary; a vocabulary built from the table is
        counted on ``client``'s workers (in this process with the default client
        or "sync")."""
        executor = None
        if table.builds_vocabulary and self.client is not None and self.client != "sync":
            executor = make_executor(self.client, self.n_workers)
        try:
            return table.source(executor)
        finally:
            if executor is not None and executor is not self.client:
                executor.close()  # only what it opened itself (a scheduler address's client)

    def _priors(self) -> dict[str, Any]:
        """The model's prior settings: ``alpha`` and ``eta`` (the fixed values, or the
        defaults that learned ones start from) and ``learn_alpha``, ``learn_eta``."""
        learn_alpha = isinstance(self.alpha, str) and self.alpha == AUTO
        learn_eta = isinstance(self.eta, str) and self.eta == AUTO
        return {
            "alpha": float(LDA_PARAMS["alpha"].default if learn_alpha else self.alpha),
            "eta": float(LDA_PARAMS["eta"].default if learn_eta else self.eta),
            "learn_alpha": learn_alpha,
            "learn_eta": learn_eta,
        }

    def _model(self, vocab_size: int) -> LDAModel:
        options = LocalStepOptions(
            max_iters=self.max_local_iters,
            conv_thresh=self.local_conv_thresh,
            restarts=bool(self.restarts),
        )
        return LDAModel(self.n_components, vocab_size, options=options, **self._priors())

    def _initial_stats(
        self,
        model: LDAModel,
        sample: sp.csr_matrix | None,
        rng,
        counts: np.ndarray | None = None,
        n_docs: float = 0.0,
        on_snapshot: Callable[[SuffStats], None] | None = None,
    ) -> SuffStats:
        """Topics from ``counts`` (``init``'s, standing for ``n_docs`` documents),
        from collapsed Gibbs sampling on the sample (``init="gibbs"``, or
        ``"auto"`` where it can start), or from
        documents of the sample chosen by k-means++ under the KL divergence.
        ``on_snapshot`` is given the sampler's statistics so far every
        ``config.GIBBS_SNAPSHOT_SECONDS`` while it runs."""
        method = self.init if counts is None else None
        if method == "auto":
            refusal = gibbs_refusal(sample, model.n_components)
            method = "gibbs" if refusal is None else "kmeans++"
            if refusal is not None:
                logger.info("init='auto' starts from k-means++: %s", refusal)
        if method == "gibbs":
            assert sample is not None
            n_sampled = float(sample.shape[0])
            drawn = gibbs_sample(
                sample, model.n_components, _sampler_alpha(model), model.eta, self.gibbs_sweeps,
                rng, self.progress, learn_alpha=model.learn_alpha, tol=self._gibbs_tol(model),
                on_snapshot=None if on_snapshot is None else (
                    lambda now: on_snapshot(_sampled_stats(model, now, n_sampled))
                ),
                snapshot_every=config.GIBBS_SNAPSHOT_SECONDS,
            )  # fmt: skip
            return _sampled_stats(model, drawn, n_sampled)
        if counts is None:
            sample = rows_at_most(sample, config.INIT_SAMPLE_ROWS, rng)  # "auto" read more
            seeds = MixtureModel(
                Multinomial(lam=model.eta).with_data_defaults(sample),
                model.n_components,
                model.total_alpha,
            )
            counts = initial_stats(seeds, sample, method, rng)["words"]
        if sample is not None:
            n_docs = sample.shape[0]
        return _topic_stats(counts, n_docs)

    def _hold_out_validation(self, source: BatchSource, resumed: Any) -> BatchSource:
        """``source`` less the validation batches of early stopping (those of the
        resumed checkpoint where it names some), whose documents the scorer of
        :meth:`_early_stopping` keeps (none without early stopping)."""
        self._validation = None
        if not uses_early_stopping(self.early_stopping, self.algorithm, source.n_batches):
            return source
        keys = [str(getattr(b, "key", i)) for i, b in enumerate(source.batches)]
        recorded = None if resumed is None else resumed["state"].validation_keys
        positions = validation_positions(
            source.n_batches, self.validation_fraction, keys, recorded,
            rows_per_batch=source.n_rows / source.n_batches,
        )  # fmt: skip
        source, held = hold_out(source, positions)
        self._validation = (scorer_of(held), [keys[i] for i in positions])
        return source

    def _early_stopping(self) -> EarlyStopping | None:
        held = getattr(self, "_validation", None)
        if held is None:
            return None
        scorer, keys = held
        return EarlyStopping(scorer, self.n_iter_no_change, keys=list(keys))

    def _start_snapshots(
        self, model: LDAModel, callback: Any
    ) -> Callable[[SuffStats], None] | None:
        """What the Gibbs start does with its statistics so far (None: nothing to
        do): score their topics on the validation documents of early stopping
        (logged) and call ``callback`` with a :class:`LearnResult` of lap 0 (its
        ``validation_trace`` that score), so that a long start shows how far it
        got while it runs."""
        held = getattr(self, "_validation", None)
        if held is None and callback is None:
            return None

        def report(stats: SuffStats) -> None:
            glob = model.global_step(stats)
            result = LearnResult(glob, stats, model=model)
            if held is not None:
                score = float(held[0](model, glob))
                result.validation_trace = [score]
                logger.info("Gibbs start: validation score %.5f", score, extra=PROGRESS)
            if callback is not None:
                callback(result)

        return report

    def _gibbs_tol(self, model: LDAModel) -> float:
        """``gibbs_tol``, or its default for the model's prior (see the class docstring)."""
        if self.gibbs_tol is not None:
            return float(self.gibbs_tol)
        return config.GIBBS_TOL_LEARNED if model.learn_alpha else 0.0

    def _init_inputs(
        self, model: LDAModel, source: BatchSource, rng
    ) -> tuple[sp.csr_matrix | None, np.ndarray | None]:
        """``(sample, counts)``: ``init``'s topic-word counts, checked once, or the
        documents to choose the first topics from."""
        counts = self._init_counts(model.vocab_size)
        if counts is not None:
            return None, counts
        if self.init in ("gibbs", "auto"):  # the sampler takes a larger sample
            sample = source.sample(
                gibbs_sample_docs(model.n_components), rng, check=model.check_data,
                max_batches=None, oversample=1, max_total=self.gibbs_tokens,
            )  # fmt: skip
            return within_tokens(as_csr_batch(sample), self.gibbs_tokens, rng), None
        sample = source.sample(config.INIT_SAMPLE_ROWS, rng, check=model.check_data)
        return as_csr_batch(sample), None

    # -- fitting ----------------------------------------------------------------
    @holding_checkpoint_folder
    def fit(self, X: Any, y: Any = None, *, callback: Any = None, vocabulary: Any = None) -> LDA:
        """Learn topics from a Parquet corpus (path or Corpus), a table read in
        place (:class:`lsdask.ParquetTable`, :class:`lsdask.DeltaTable`), a
        scipy sparse matrix or a dense array of word counts (documents x
        vocabulary).

        ``vocabulary``, for a matrix: the word of each column (e.g. a
        CountVectorizer's ``get_feature_names_out()``, or gensim's ``id2word``
        in id order), kept as ``vocabulary_`` for ``top_words`` and checked
        against later inputs; a corpus brings its own.

        ``callback``, if given, is called after every lap with the run's
        :class:`lsdask.learn.base.LearnResult` so far (e.g. to score heldout
        documents with ``result.globals.topics``), and during the Gibbs start
        about every ``config.GIBBS_SNAPSHOT_SECONDS`` with the start's topics so
        far (``result.n_laps`` 0); with ``algorithm="esvi"``, after every
        rotation with the :class:`lsdask.learn.esvi.ESVIRun`."""
        from lsdask.io.corpus.vocabulary import vocabulary_digest

        # the corpus top_documents ranks by default (a matrix is not kept)
        self._fit_corpus = X if _is_corpus_path(X) or type(X).__name__ in CORPORA else None
        if self.algorithm == "esvi":
            from lsdask.estimators.lda_esvi import fit_esvi

            self.check_params()
            source, vocab = self._source(X, vocabulary)
            _check_has_tokens(X, source)
            return fit_esvi(self, source, vocab, callback=callback)

        self.check_params()
        if self.algorithm == "svi-gibbs":
            from lsdask.estimators.lda_svi_gibbs import fit_svi_gibbs
            from lsdask.io.tables import TableOptions

            if isinstance(X, TableOptions):
                raise ValueError(
                    "algorithm='svi-gibbs' streams documents from an lsdask corpus or a matrix, "
                    "not from a table read in place; fit the table with algorithm='memo' (or "
                    "svi, vb, esvi), or ingest it into a corpus (lsdask ingest)"
                )
            return fit_svi_gibbs(self, X, callback, vocabulary, _check_words)
        rng = np.random.default_rng(self.random_state)
        source, vocab = self._source(X, vocabulary)
        _check_has_tokens(X, source)
        asked = {"vocab_size": source.n_features, **self._priors()}
        self._vocabulary_sha256 = None if vocab is None else vocabulary_digest(vocab)
        resumed = open_resume(checkpoint_settings(self), asked)
        source = self._hold_out_validation(source, resumed)
        if resumed is not None:
            _check_resumed_vocabulary(resumed, self._vocabulary_sha256, source)
            model, sample, counts = resumed["model"], None, None
        else:
            model = self._model(source.n_features)
            sample, counts = self._init_inputs(model, source, rng)
        alpha_totals = _AlphaTotals(callback)
        try:
            result = self._learn(
                model,
                source,
                lambda r: self._initial_stats(
                    model, sample, r, counts, source.n_rows, self._start_snapshots(model, callback)
                ),
                rng,
                resumed,
                alpha_totals,
            )
        finally:
            self._validation = None  # the held-out documents are not part of the model
        model = result.model if result.model is not None else model  # resized by moves
        self._components_trace = list(result.components_trace)
        self._set_fitted(model, result.globals, result.stats, vocab)
        self.alpha_trace_ = alpha_totals.trace(result)
        self._record_fit_params()
        return self

    def partial_fit(self, X: Any, y: Any = None, *, vocabulary: Any = None) -> LDA:
        """Take in new documents: one streaming update (Broderick et al. 2013).

        Every batch of X runs the local step against the current topics; their
        statistics are added to those accumulated so far (by ``fit`` or earlier
        ``partial_fit`` calls) and the topics are updated once. Documents are
        counted once per call: do not pass the same documents twice.
        ``vocabulary`` names a matrix's columns, as in :meth:`fit`.
        ``elbo_trace_`` gains the ELBO of all documents taken in so far, which
        falls as documents are added (compare it per token: ``size_trace_``
        gains their tokens); ``lap_trace_``
        repeats ``n_laps_`` (an update is no lap) and ``time_trace_`` adds the
        call's seconds. With the default
        client a call on one batch (an array of at most ``batch_size`` rows,
        or a corpus of one row group) runs in this process; a call on more
        starts a LocalCluster and closes it when done (seconds each time), so
        a stream of many calls should pass one ``client`` (a
        ``distributed.Client``, kept open) or ``client="sync"``.
        """
        started = time.perf_counter()
        self.check_params()
        if self.algorithm == "svi-gibbs":
            raise ValueError(
                "partial_fit is not supported with algorithm='svi-gibbs': fit streams by "
                "itself (parts appended to the corpus during a fit are taken in; a finished "
                "fit resumed from its checkpoint_dir takes in the parts added since)"
            )
        source, vocab = self._source(X, vocabulary)
        first = not hasattr(self, "posterior_")
        if first:
            _check_has_tokens(X, source)  # the first call starts the topics from X
            rng = np.random.default_rng(self.random_state)
            model = self._model(source.n_features)
            sample, counts = self._init_inputs(model, source, rng)
            glob = model.global_step(self._initial_stats(model, sample, rng, counts, source.n_rows))
            total = model.empty_stats()
            self.elbo_trace_ = np.zeros(0)
            self.lap_trace_ = np.zeros(0)
            self.time_trace_ = np.zeros(0)
            self.size_trace_ = np.zeros(0)
            self.alpha_trace_ = np.zeros(0)
            self.n_laps_ = 0
            self.converged_ = False
        else:
            model, glob, total = self.model_, self.posterior_, self.stats_
            self._check_vocab(source, vocab)
            vocab = vocab or self.vocabulary_
        executor = self._executor(source)
        try:
            handles = executor.register(source.batches)
            fresh = executor.map(
                LocalStepTask(model, self.sparsity),
                handles,
                executor.broadcast(model.for_local_step(glob)),
            )
        finally:
            if executor is not self.client:
                executor.close()
        total = total + sum_stats(fresh)
        glob = model.global_step(total)
        # one entry per update in every trace; a partial_fit is no lap: n_laps_ stays
        self.elbo_trace_ = np.append(self.elbo_trace_, model.elbo(total, glob))
        self.lap_trace_ = np.append(self._trace("lap_trace_"), self.n_laps_)
        self.size_trace_ = np.append(self._trace("size_trace_"), model.data_size(total))
        times = self._trace("time_trace_")
        before = float(times[np.isfinite(times)][-1]) if np.isfinite(times).any() else 0.0
        self.time_trace_ = np.append(times, before + time.perf_counter() - started)
        self.n_features_in_ = source.n_features
        self._set_fitted(model, glob, total, vocab)
        if first:
            self._record_fit_params()
        return self

    def _trace(self, name: str) -> np.ndarray:
        """A trace of the fit before this update (nan where a model saved before
        it was kept does not reach back)."""
        return padded_trace(getattr(self, name, None), len(self.elbo_trace_) - 1)

    def _set_fitted(self, model: LDAModel, glob: LDAGlobals, stats: SuffStats, vocab) -> None:
        self.model_ = model
        self.posterior_ = glob
        self.stats_ = stats
        self.components_ = read_only(glob.lam)
        self.topic_word_ = read_only(glob.topics)
        self.alpha_ = read_only(glob.alpha)
        self.eta_ = glob.eta
        self.vocabulary_ = vocab

    # -- a model fitted by ESVI keeps its blocks on the workers ---------------------
    def __getattr__(self, name: str) -> Any:
        """The fitted attributes that hold all of lambda, made from the blocks of an
        ESVI fit when first read (the user asks for the whole model)."""
        from lsdask.estimators.lda_esvi import GATHERED, gather_partitioned

        if name in GATHERED and self.__dict__.get("_esvi_fitted") is not None:
            gather_partitioned(self)
            return self.__dict__[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _check_fitted(self) -> None:
        if self.__dict__.get("_esvi_fitted") is None:
            super()._check_fitted()

    def _load_esvi_blocks(self, store: Any, fitted: Any, arrays: Any, vocab: Any) -> None:
        """A saved ESVI model's blocks read back (:mod:`lsdask.persist.esvi_model`)."""
        from lsdask.estimators.lda_esvi import load_partitioned

        load_partitioned(self, store, fitted, arrays, vocab)

    # -- inference ----------------------------------------------------------------
    def _check_vocab(self, source: BatchSource, vocab: list[str] | None) -> None:
        """X must be over the fitted vocabulary: its size, and its words where both
        X (a corpus) and the model (fitted on one) know them."""
        from lsdask.io.corpus.vocabulary import vocabulary_difference

        if source.n_features != self.model_.vocab_size:
            raise ValueError(
                f"X has {source.n_features} words in its vocabulary, but this model was "
                f"fitted with {self.model_.vocab_size}"
            )
        known = getattr(self, "vocabulary_", None)
        difference = None if vocab is None or known is None else vocabulary_difference(known, vocab)
        if difference is not None:
            raise ValueError(
                f"{source.description} is over another vocabulary than this model's: "
                f"{difference}. Encode the documents with the model's vocabulary (`lsdask "
                "ingest ... --vocab TRAINING_CORPUS`; in Python vocab=the training corpus)"
            )

    def _row_batches(self, X: Any) -> Iterator[sp.csr_matrix]:
        """X's documents batch by batch (one batch in memory at a time)."""
        source, vocab = self._source(X)
        self._check_vocab(source, vocab)
        for batch in source.batches:
            yield as_csr_batch(batch.load())

    def fit_transform(self, X: Any, y: Any = None, **fit_params: Any) -> sp.csr_matrix:
        """``fit(X, **fit_params)``, then ``transform(X)``: X's document-topic weights."""
        return self.fit(X, **fit_params).transform(X)

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """The names of transform's columns, ``lda0 .. lda{K-1}`` (scikit-learn's
        convention for LatentDirichletAllocation)."""
        self._check_fitted()
        return np.array([f"lda{k}" for k in range(self.model_.n_components)], dtype=object)

    def transform(self, X: Any) -> sp.csr_matrix:
        """Document-topic weights ``E[pi_d]`` over the topics each document uses.

        A CSR matrix (documents x K): row d holds the topics given mass in
        document d (``N_dk > eps``), at most its L largest (``sparsity``), with
        ``E[pi_dk] = (N_dk + alpha_k) / (N_d + sum_k alpha_k)`` renormalized over them
        (``alpha_k = alpha_``, alpha / K unless learned).
        Topics a document does not use are left out rather than filled in at
        the prior's weight, so a document of fewer than L topics has fewer
        entries, and one without words (or only words outside the vocabulary)
        an empty row. A corpus is read batch by batch. With ``client`` a Dask
        client (or a scheduler's address), the batches are transformed as tasks
        on that cluster; otherwise in this process.
        """
        task = self.transform_task()
        source, vocab = self._source(X)
        self._check_vocab(source, vocab)
        from lsdask.estimators.lda_esvi import partitioned, transform_partitioned

        blocks = partitioned(self)
        if blocks is not None:
            return transform_partitioned(task, blocks, source)
        with self._batch_executor(source.n_batches) as executor:
            handles = executor.register(source.batches)
            done = executor.map(task, handles, executor.broadcast(self.posterior_))
        return sp.vstack([weights for _, weights in done], format="csr")

    def transform_task(self) -> TransformTask:
        """:meth:`transform` of one corpus batch as a task for an executor (with the
        fitted posterior as its shared argument): ``(doc_ids, weights)``."""
        self._check_fitted()
        L = check_sparsity(self.sparsity, None)  # may change after fit
        return TransformTask(self.model_, L, self.topics_per_document)

    @property
    def topics_per_document(self) -> int:
        """The most topics :meth:`transform` keeps per document: L, at most K
        (the fitted K: a new ``n_components`` counts from the next ``fit``)."""
        K = self.model_.n_components if hasattr(self, "model_") else self.n_components
        return K if self.sparsity is None else min(int(self.sparsity), K)

    def top_documents(
        self, k: int, n: int = 10, corpus: Any = None, texts: Any = None
    ) -> list[Any]:
        """Topic k's ``n`` documents of ``corpus`` most about it, best first.

        Documents are ranked by their posterior mean share of the topic,
        ``E[pi_dk] = (N_dk + alpha_k) / (N_d + sum_j alpha_j)``, over those that
        give it tokens (:mod:`lsdask.estimators.top_documents`), in one pass over
        the corpus (on the cluster where ``client`` says). Each is a
        :class:`~lsdask.estimators.top_documents.DocumentHit`: ``doc_id``,
        ``name`` (the file it was ingested from, where the corpus records it),
        ``share``, ``tokens``, and ``text``: its first 30 words, read from
        ``texts``, the folder or tar archive the corpus was ingested from, where
        it is given (never from a folder the corpus names by itself). ``corpus``
        (a Parquet corpus, path or Corpus) defaults to the corpus this model was
        fitted on in this process; a loaded model needs it named (``lsdask docs
        MODEL --corpus C`` does the same from a saved model).
        """
        from lsdask.estimators.top_documents import check_topics

        self._check_fitted()
        if corpus is None:
            corpus = self.__dict__.get("_fit_corpus")
            if corpus is None:
                raise ValueError(
                    "corpus is needed: this model was not fitted on a Parquet corpus in this "
                    "process; pass corpus= the corpus to rank (e.g. the training corpus)"
                )
        if not (_is_corpus_path(corpus) or type(corpus).__name__ in CORPORA):
            raise ValueError(
                f"corpus must be a Parquet corpus (a path, store URL or Corpus), whose "
                f"documents have ids; got {type(corpus).__name__}"
            )
        (topic,) = check_topics(k, self.model_.n_components)
        n = check_int("n", n, 1)
        docs = self._open_corpus(corpus)
        with self._batch_executor(len(docs.batches)) as executor:
            return self.rank_documents(docs, (topic,), n, 30, executor, texts)[topic]

    def _open_corpus(self, corpus: Any) -> Any:
        """A corpus object from a corpus, a folder or a store URL (its newest version)."""
        from lsdask.io.corpus.on_store import StoreCorpus
        from lsdask.io.corpus.store import Corpus

        if isinstance(corpus, Corpus | StoreCorpus):
            return corpus
        if is_store_url(corpus):
            return StoreCorpus.open(corpus, self.storage_options)
        return Corpus.open(corpus, rescan=True)

    @contextlib.contextmanager
    def _batch_executor(self, n_batches: int) -> Iterator[Any]:
        """Where the tasks of ``n_batches`` batches run: on ``client``, in this
        process without one or for a single batch (no cluster started for it);
        an executor opened here (a connection to an address) is closed after."""
        here = self.client is None or n_batches <= 1
        executor = make_executor("sync" if here else self.client, self.n_workers)
        try:
            yield executor
        finally:
            if executor is not self.client:
                executor.close()

    def rank_documents(
        self,
        corpus: Any,
        topics: tuple[int, ...],
        n: int,
        text_words: int,
        executor: Any,
        texts: Any = None,
    ) -> dict[int, list[Any]]:
        """Each of ``topics``' ``n`` documents of the :class:`Corpus` ``corpus`` most
        about it, on ``executor``, with their first ``text_words`` words read from
        ``texts`` where given (:func:`lsdask.estimators.top_documents.rank_documents`);
        the corpus must be over this model's vocabulary."""
        from lsdask.estimators.top_documents import TopDocumentsTask, rank_documents
        from lsdask.io.corpus.source import corpus_source

        self._check_fitted()
        source, vocab = corpus_source(corpus, self.storage_options)
        self._check_vocab(source, vocab)
        task = TopDocumentsTask(self.model_, self.transform_task().L, tuple(topics), n)
        return rank_documents(task, corpus, self.posterior_, executor, text_words, texts)

    def score_sums(self, X: Any, *, random_state: int = 0) -> tuple[float, float]:
        """The sums behind :meth:`score`: the log-likelihood of the scored tokens
        and how many tokens were scored (those of each document's 20% of word
        types, B, predicted from the other 80%, A); the split drawn batch by
        batch from one Generator seeded ``random_state``."""
        self._check_fitted()
        from lsdask.estimators.lda_esvi import partitioned, score_sums_partitioned

        blocks = partitioned(self)
        rng = np.random.default_rng(random_state)
        loglik = tokens = 0.0
        for rows in self._row_batches(X):
            A, B = split_documents(rows, 0.8, rng)
            if blocks is not None:  # only the batch's word columns come here
                part, n = score_sums_partitioned(blocks, A, B, self.alpha_)
            else:
                part, n = document_completion_sums(A, B, self.topic_word_, self.alpha_)
            loglik, tokens = loglik + part, tokens + n
        return float(loglik), float(tokens)

    def score(self, X: Any, y: Any = None, *, random_state: int = 0) -> float:
        """Heldout document completion (lsparse App. E), nats per token, with the
        document-topic prior ``alpha_``; a corpus is read batch by batch."""
        return completion_score(*self.score_sums(X, random_state=random_state))

    def top_words(self, n: int = 10) -> list[list[str]]:
        """Each topic's n most probable words (word ids as strings without a
        vocabulary), at most the vocabulary's size."""
        self._check_fitted()
        n = check_int("n", n, 1)
        ids = top_word_ids(self.topic_word_, n)
        vocab = self.vocabulary_
        return [[vocab[i] if vocab is not None else str(i) for i in row] for row in ids]

    def coherence(self, X: Any, n: int = 10) -> np.ndarray:
        """UMass coherence of each topic's top n words over documents X (Eq. 13)."""
        self._check_fitted()
        n = check_int("n", n, 1)
        return umass_coherence(self.topic_word_, self._row_batches(X), n)

    def report(
        self, path: Any, corpus: Any = None, *, n_terms: int = 30, n_docs: int = 10,
        texts: Any = None, overwrite: bool = False,
    ) -> str:  # fmt: skip
        """Write the topics as one self-contained HTML page (an intertopic map, terms
        by relevance, top documents, coherence, traces) to ``path``, returned
        (:mod:`lsdask.estimators.topic_report`). ``corpus`` (a Parquet corpus)
        defaults to the one fitted on in this process; None: no documents or
        coherence. ``texts``: the documents' folder or tar archive, for their
        first words (as :meth:`top_documents`)."""
        from lsdask.estimators.topic_report import write_model_report

        self._check_fitted()
        if corpus is None:
            corpus = self.__dict__.get("_fit_corpus")
        return write_model_report(
            self, path, corpus=corpus, n_terms=n_terms, n_docs=n_docs, overwrite=overwrite,
            texts=texts,
        )  # fmt: skip


@dataclass(frozen=True)
class TransformTask:
    """:meth:`LDA.transform` of one batch: a pure function of (batch, posterior),
    so it runs as a Dask task like the local step's (``lsdask transform`` on a
    cluster) and a rerun after a lost worker gives the same weights.

    ``model`` is the fitted model, ``L`` the local step's sparsity (None: dense)
    and ``keep`` the most topics kept per document.
    """

    model: Any
    L: int | None
    keep: int

    def __call__(self, batch: Any, posterior: Any) -> tuple[np.ndarray | None, sp.csr_matrix]:
        rows = batch.load()
        if hasattr(rows, "doc_ids"):  # a corpus row group: its doc_ids go with it
            return rows.doc_ids, self.weights(rows.to_csr(self.model.vocab_size), posterior)
        return None, self.weights(as_csr_batch(rows), posterior)

    def weights(self, X: sp.csr_matrix, posterior: Any) -> sp.csr_matrix:
        """Rows ``E[pi_d]`` over each document's top topics (see :meth:`LDA.transform`)."""
        model = self.model
        _, doc_topic, _ = model.doc_topic_step(X, posterior, self.L)
        K = model.n_components  # as fitted, whatever set_params said since
        # the largest among the topics the document uses: a topic it does not use
        # never displaces one it does, whatever its prior
        theta = np.where(
            doc_topic > model.options.eps, doc_topic + model.doc_prior(posterior), -np.inf
        )
        top = np.argsort(-theta, axis=1, kind="stable")[:, : self.keep]
        vals = np.take_along_axis(theta, top, axis=1)
        used = np.isfinite(vals)
        vals = np.where(used, vals, 0.0)
        sums = vals.sum(axis=1, keepdims=True)
        vals = np.divide(vals, sums, out=np.zeros_like(vals), where=sums > 0)
        indptr = np.concatenate([[0], np.cumsum(used.sum(axis=1))])
        out = sp.csr_matrix((vals[used], top[used], indptr), shape=(X.shape[0], K))
        out.sort_indices()
        return out


class _AlphaTotals:
    """A fit's callback: records ``sum_k alpha_k`` of the globals after every lap of
    each run (``n_init`` > 1 makes several), then calls the user's ``callback``."""

    def __init__(self, callback: Any = None) -> None:
        self.callback = callback
        # per run: its result (weakly: the runs not kept are freed) and totals by lap
        self.runs: list[tuple[weakref.ref, dict[int, float]]] = []

    def _totals(self, result: Any) -> dict[int, float] | None:
        return next((totals for ref, totals in self.runs if ref() is result), None)

    def __call__(self, result: Any) -> None:
        totals = self._totals(result)
        if totals is None:
            totals = {}
            self.runs.append((weakref.ref(result), totals))
        totals[int(result.n_laps)] = float(np.sum(result.globals.alpha))
        if self.callback is not None:
            self.callback(result)

    def trace(self, result: Any) -> np.ndarray:
        """The totals of ``result``'s run by lap, nan for laps it did not make (a
        resumed run's laps before it started)."""
        out = np.full(int(result.n_laps), np.nan)
        for lap, total in (self._totals(result) or {}).items():
            if 1 <= lap <= out.size:
                out[lap - 1] = total
        return out
