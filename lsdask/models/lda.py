"""Latent Dirichlet allocation with the L-sparse local step (lsparse Sec. 5, App. C-D).

Documents are rows of word counts. Topics ``phi_k ~ Dir(eta)`` with posterior
``q(phi_k) = Dir(lambda_k)``, ``lambda = eta + S`` where
``S[k, v] = sum_d sum_u c_du r_duk [w_du = v]``; document frequencies
``pi_d ~ Dir(alpha/K)`` and ``q(pi_d) = Dir(N_d + alpha/K)`` are inferred
afresh at every visit (cold start, App. D.4) and summarized per batch into:

- ``words``: S at its nonzero (topic, word) pairs (a :class:`SparseBlock`,
  16 bytes per entry), all within the batch's own vocabulary: at most
  K x V_b entries, not K x V, and a small share of K x V_b under the L-sparse step;
- ``H``: the assignment entropy ``-sum c r log r``;
- ``alloc``: ``sum_d c_Dir(alpha/K) - c_Dir(N_d + alpha/K)``, the document
  allocation terms at their optimal ``q(pi_d)``;
- ``N``: tokens per topic; ``n_docs``.

The ELBO (App. C) is then exact from the statistics:
``sum_kv S_kv E[log phi_kv] - sum_k KL(Dir(lambda_k) || Dir(eta)) + H + alloc``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from lsdask.kernels.lda import lda_batch_step
from lsdask.models.dirichlet_logs import DirichletPosterior
from lsdask.models.observation import Rows
from lsdask.models.stats import SparseBlock, Stat, SuffStats


@dataclass(frozen=True)
class LocalStepOptions:
    """Tunables of the per-document iterations (lsparse Sec. 5)."""

    max_iters: int = 100
    conv_thresh: float = 0.05
    eps: float = 1e-8
    restarts: bool = True
    max_restarts: int = 5  # proposals per document, smallest-mass topics first
    restart_iters: int = 3  # iterations per proposal (2-5 in the HDP supplement, Sec. E)


def as_csr_batch(X: Rows) -> sp.csr_matrix:
    """A batch of documents as CSR with int64 indptr, int32 ids, float64 counts."""
    X = X if sp.issparse(X) else sp.csr_matrix(np.asarray(X))
    X = sp.csr_matrix(X)
    data = np.asarray(X.data, dtype=np.float64)
    if data.size and (not np.isfinite(data).all() or data.min() < 0):  # every batch: fast
        bad = ~(np.isfinite(data) & (data >= 0))
        i = int(np.argmax(bad))
        row = int(np.searchsorted(X.indptr, i, side="right") - 1)
        raise ValueError(
            f"word counts must be finite and non-negative; document (row) {row}, word id "
            f"{int(X.indices[i])} has {float(data[i])!r} ({int(bad.sum())} such entries in all)"
        )
    return X


@dataclass(frozen=True)
class LDAModel:
    """LDA with K topics over V words.

    Parameters
    ----------
    n_components : int
        K.
    vocab_size : int
        V.
    alpha : float
        Total document-topic concentration; each topic gets alpha / K.
    eta : float
        Topic-word Dirichlet pseudo-count.
    options : LocalStepOptions
    """

    n_components: int
    vocab_size: int
    alpha: float = 0.5
    eta: float = 0.1
    options: LocalStepOptions = LocalStepOptions()

    def check_data(self, X: Rows) -> None:
        X = as_csr_batch(X)
        if X.shape[1] != self.vocab_size:
            raise ValueError(
                f"expected count vectors over V={self.vocab_size} words; got {X.shape[1]} columns"
            )

    def doc_topic_step(
        self, X: Rows, glob: DirichletPosterior, sparsity: int | None
    ) -> tuple[dict[str, Stat], np.ndarray, tuple[int, int, int]]:
        """Run the local step on a batch: ``(stats pieces, doc-topic counts N_d,
        (iterations, restarts tried, restarts accepted))``."""
        X = as_csr_batch(X)
        K = self.n_components
        cols, local = np.unique(X.indices, return_inverse=True)
        C = glob.logs.rows(cols)  # E[log phi] of the batch's own words only
        out_words = np.zeros((K, cols.size))
        doc_topic = np.zeros((X.shape[0], K))
        o = self.options
        L = 0 if sparsity is None else int(sparsity)
        entropy, alloc, iters, tried, accepted = lda_batch_step(
            X.indptr.astype(np.int64), local.astype(np.int32), X.data.astype(np.float64),
            C,
            self.alpha / K, L, o.max_iters, o.conv_thresh, o.eps,
            o.max_restarts if o.restarts else 0, o.restart_iters,
            out_words, doc_topic,
        )  # fmt: skip
        pieces: dict[str, Stat] = {
            "words": SparseBlock.from_columns(cols, out_words, self.vocab_size),
            "H": np.array([entropy]),
            "alloc": np.array([alloc]),
            "N": out_words.sum(axis=1),
            "n_docs": np.array([float(X.shape[0])]),
        }
        return pieces, doc_topic, (iters, tried, accepted)

    def local_step(self, X: Rows, glob: DirichletPosterior, sparsity: int | None) -> SuffStats:
        pieces, _, _ = self.doc_topic_step(X, glob, sparsity)
        return SuffStats(**pieces)

    def empty_stats(self) -> SuffStats:
        K = self.n_components
        return SuffStats(
            words=np.zeros((K, self.vocab_size)),
            H=np.zeros(1),
            alloc=np.zeros(1),
            N=np.zeros(K),
            n_docs=np.zeros(1),
        )

    def for_local_step(self, glob: DirichletPosterior) -> DirichletPosterior:
        """What the workers need: the stored entries of E[log phi] only."""
        return glob.for_workers()

    def row_count(self, stats: SuffStats) -> float:
        """Documents summarized in the statistics."""
        return float(stats.array("n_docs")[0])

    def token_count(self, stats: SuffStats) -> float:
        """Word tokens summarized in the statistics."""
        return float(stats.array("N").sum())

    def data_size(self, stats: SuffStats) -> float:
        """What the ELBO is reported per: tokens."""
        return self.token_count(stats)

    def global_step(self, stats: SuffStats) -> DirichletPosterior:
        return DirichletPosterior.from_counts(stats.array("words"), self.eta)

    def elbo(self, stats: SuffStats, glob: DirichletPosterior) -> float:
        return (
            glob.elbo_terms(stats.array("words"))
            + float(stats.array("H")[0])
            + float(stats.array("alloc")[0])
        )
