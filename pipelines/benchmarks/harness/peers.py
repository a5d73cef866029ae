"""The peers lsdask is compared with, each with its exact settings.

Topic models (at the priors of :mod:`harness.priors`; their topic-word
matrices are scored by :mod:`harness.scoring` like lsdask's):

- gensim ``LdaModel`` (online VB): ``alpha=ALPHA/K, eta=ETA``,
  ``chunksize`` documents per update, ``update_every=1, eval_every=None``;
  topics ``get_topics()``;
- scikit-learn ``LatentDirichletAllocation(learning_method="online")``:
  ``doc_topic_prior=ALPHA/K, topic_word_prior=ETA``, ``partial_fit`` per
  minibatch of ``batch_size`` documents (its default 128), ``n_jobs=1``;
  topics ``components_`` row-normalized;
- tomotopy ``LDAModel`` (collapsed Gibbs sampling): ``alpha=ALPHA/K, eta=ETA``,
  ``optim_interval=0`` (alpha stays fixed), ``train(1, workers)`` per
  iteration; topics its counts + eta over the whole vocabulary (eta for
  words it never saw), row-normalized.

Gaussian mixtures: scikit-learn ``BayesianGaussianMixture`` with full
covariances and a Dirichlet(1/K) weight prior, one EM iteration per
``fit`` call (:func:`sklearn_mixture`).

The ``train_*`` functions run one budgeted training run on a
:class:`~harness.budget.Recorder` and return what the report says about it
(why it stopped, its cores).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import scipy.sparse as sp

from harness.budget import BudgetStop, Recorder
from harness.priors import ALPHA, ETA


def gensim_bow(X: sp.csr_matrix) -> list[list[tuple[int, float]]]:
    """gensim's bag-of-words documents of X: (word id, count) pairs."""
    return [
        list(
            zip(
                X.indices[X.indptr[d] : X.indptr[d + 1]].tolist(),
                X.data[X.indptr[d] : X.indptr[d + 1]].tolist(),
                strict=True,
            )
        )
        for d in range(X.shape[0])
    ]


def train_gensim(
    X: sp.csr_matrix, K: int, rec: Recorder, *, seed: int, max_passes: int, chunksize: int
) -> dict:
    """gensim's online VB, stopped by the budget at a chunk boundary or a pass end."""
    from gensim.models import LdaModel
    from gensim.models.callbacks import Metric
    from threadpoolctl import threadpool_info

    bow = gensim_bow(X)
    state: dict[str, Any] = {"passes": 0, "model": None}

    class BudgetCorpus:
        """The corpus; stops the run at a chunk boundary once the budget is spent."""

        def __len__(self) -> int:
            return len(bow)

        def __iter__(self):
            for i, doc in enumerate(bow):
                if i % chunksize == 0 and i > 0 and rec.stop_mid_pass():
                    state["mid_pass_docs"] = i
                    raise BudgetStop()
                yield doc

    class PassHook(Metric):
        """Called by gensim at the end of every pass (after its last M-step)."""

        def __init__(self) -> None:
            self.logger = None
            self.title = "bench-pass"
            self.viz_env = None

        def get_value(self, **kwargs: Any) -> float:
            state["passes"] += 1
            model = state["model"]
            stop = rec.over_budget() or state["passes"] >= max_passes
            rec.pass_end(state["passes"], model.get_topics, force=stop)
            if rec.over_budget():
                raise BudgetStop()
            return 0.0

    rec.start()
    model = LdaModel(
        num_topics=K,
        id2word={i: str(i) for i in range(X.shape[1])},
        alpha=ALPHA / K,
        eta=ETA,
        chunksize=chunksize,
        update_every=1,
        eval_every=None,
        random_state=seed,
        callbacks=[PassHook()],
    )
    state["model"] = model
    reason = "max passes"
    try:
        model.update(BudgetCorpus(), passes=max_passes)
    except BudgetStop:
        reason = "budget"
        if "mid_pass_docs" in state:
            frac = state["passes"] + state["mid_pass_docs"] / len(bow)
            rec.pass_end(frac, model.get_topics, force=True)
    blas = [lib.get("num_threads") for lib in threadpool_info() if lib.get("user_api") == "blas"]
    return {
        "stop": reason,
        "cores": 1,
        "cores_note": f"1 process + BLAS ({blas[0] if blas else '?'} threads)",
        "dtype": str(np.dtype(model.dtype)),
    }


def train_sklearn(
    X: sp.csr_matrix, K: int, rec: Recorder, *, seed: int, max_passes: int, batch_size: int
) -> dict:
    """scikit-learn's online LDA, ``partial_fit`` per minibatch, stopped by the budget
    at a minibatch boundary or a pass end."""
    from sklearn.decomposition import LatentDirichletAllocation

    D = X.shape[0]
    bs = batch_size
    rec.start()
    lda = LatentDirichletAllocation(
        n_components=K,
        doc_topic_prior=ALPHA / K,
        topic_word_prior=ETA,
        learning_method="online",
        batch_size=bs,
        total_samples=D,
        n_jobs=1,
        random_state=seed,
    )

    def topics() -> np.ndarray:
        c = lda.components_
        return c / c.sum(axis=1, keepdims=True)

    reason = "max passes"
    for p in range(1, max_passes + 1):
        stopped_at = None
        for s in range(0, D, bs):
            if s > 0 and rec.stop_mid_pass():
                stopped_at = s
                break
            lda.partial_fit(X[s : s + bs])
        if stopped_at is not None:
            reason = "budget"
            rec.pass_end(p - 1 + stopped_at / D, topics, force=True)
            break
        stop = rec.over_budget()
        rec.pass_end(p, topics, force=stop or p == max_passes)
        if stop:
            reason = "budget"
            break
    return {"stop": reason, "cores": 1, "cores_note": "n_jobs=1 (+BLAS)"}


def tomotopy_lda(
    X: sp.csr_matrix, K: int, seed: int, alpha: float | None = None, eta: float = ETA
) -> Any:
    """tomotopy's LDAModel with the benchmark's priors (or ``alpha`` per topic and
    ``eta``) holding the documents of X (word ids as strings, each repeated by its
    count)."""
    import tomotopy as tp

    mdl = tp.LDAModel(k=K, alpha=ALPHA / K if alpha is None else alpha, eta=eta, seed=seed)
    mdl.optim_interval = 0  # keep alpha fixed (tomotopy optimizes it every 10 iterations)
    tomotopy_add_docs(mdl, X)
    return mdl


def tomotopy_add_docs(mdl: Any, X: sp.csr_matrix) -> None:
    """The documents of X (word ids as strings, each repeated by its count)."""
    for d in range(X.shape[0]):
        lo, hi = X.indptr[d], X.indptr[d + 1]
        pairs = zip(X.indices[lo:hi], X.data[lo:hi], strict=True)
        words = [str(w) for w, c in pairs for _ in range(int(c))]
        if words:
            mdl.add_doc(words)


def tomotopy_pseudo_counts(
    mdl: Any, K: int, V: int, cache: dict[str, Any], eta: float = ETA
) -> np.ndarray:
    """(K, V) topic-word counts + eta of a tomotopy model over the whole vocabulary
    (eta for words it never saw); ``cache`` keeps its word ids between calls."""
    if "ids" not in cache:
        cache["ids"] = np.array([int(w) for w in mdl.vocabs], dtype=np.int64)
    ids = cache["ids"]
    lam = np.full((K, V), eta)
    for k in range(K):
        lam[k, ids] = np.asarray(mdl.get_topic_word_dist(k, normalize=False), dtype=np.float64)
    return lam


def tomotopy_train(mdl: Any, sweeps: int, workers: int) -> None:
    """``sweeps`` iterations of tomotopy's sampler on ``workers`` threads."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "training result may differ ... workers != 1"
        mdl.train(sweeps, workers=workers)


def tomotopy_counts(mdl: Any, K: int, V: int) -> np.ndarray:
    """tomotopy's (K, V) topic-word counts, without the eta it adds."""
    return np.maximum(tomotopy_pseudo_counts(mdl, K, V, {}) - ETA, 0.0)


def train_tomotopy(
    X: sp.csr_matrix, K: int, rec: Recorder, *, seed: int, max_passes: int, workers: int
) -> dict:
    """tomotopy's collapsed Gibbs sampler, one iteration per pass, stopped by the
    budget after an iteration. Adding the documents is not on the clock."""
    mdl = tomotopy_lda(X, K, seed)
    V = X.shape[1]
    cache: dict[str, Any] = {}

    def topics() -> np.ndarray:
        lam = tomotopy_pseudo_counts(mdl, K, V, cache)
        return lam / lam.sum(axis=1, keepdims=True)  # E[phi] over the whole vocabulary

    reason = "max passes"
    rec.start()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "training result may differ ... workers != 1"
        for p in range(1, max_passes + 1):
            mdl.train(1, workers=workers)
            stop = rec.over_budget()
            rec.pass_end(p, topics, force=stop or p == max_passes)
            if stop:
                reason = "budget"
                break
    return {
        "stop": reason,
        "cores": workers,
        "cores_note": f"workers={workers} threads (collapsed Gibbs sampling)",
    }


def sklearn_mixture(K: int, seed: int) -> Any:
    """scikit-learn's ``BayesianGaussianMixture`` as the mixture benchmark runs it:
    full covariances, Dirichlet(1/K) weights (= lsdask's Dir(alpha / K), alpha = 1),
    k-means++ start, one EM iteration per ``fit`` call (``warm_start``)."""
    from sklearn.mixture import BayesianGaussianMixture

    return BayesianGaussianMixture(
        n_components=K,
        covariance_type="full",
        weight_concentration_prior_type="dirichlet_distribution",
        weight_concentration_prior=1.0 / K,
        init_params="k-means++",
        max_iter=1,
        warm_start=True,
        tol=0.0,
        random_state=seed,
    )


def sklearn_em_iteration(sk: Any, X: np.ndarray) -> None:
    """One bare EM iteration of a fitted ``BayesianGaussianMixture`` (``fit`` also
    re-runs an E-step after its iteration)."""
    _, log_resp = sk._e_step(X)
    sk._m_step(X, log_resp)
