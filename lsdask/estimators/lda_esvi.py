"""``LDA(algorithm="esvi")``: the fit by ESVI (:mod:`lsdask.learn.esvi`).

The topic-word parameters stay cut into ``n_blocks`` vocabulary blocks, one
per worker, for the whole run; only the K topic totals travel to the driver
after every sub-step. After ``fit`` the blocks stay where the run left them
(:class:`ESVIFitted`, the estimator's *partitioned model*): ``transform`` and
``score`` fetch only their documents' word columns, and saving writes the
model block by block, each worker its own (:mod:`lsdask.persist.esvi_model`).
The whole of lambda (K x V) comes to the driver only when the user asks for
it: reading ``components_``, ``topic_word_``, ``posterior_`` or ``stats_``.
A fit that started its own cluster (``client=None``) gathers at its end,
since its workers close with it.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from lsdask.config import LOST_WORKER_RETRIES
from lsdask.engine.partitions import open_partitions, reopen_partitions
from lsdask.errors import ClusterError, DataError
from lsdask.estimators.params import read_only
from lsdask.learn import esvi, esvi_nomadic
from lsdask.models.esvi_lda import ESVILDA, VocabPartition
from lsdask.models.stats import SuffStats
from lsdask.persist.esvi_store import ESVIStore, checkpoint_store

#: the fitted attributes that hold all of lambda (K x V): made when first read
GATHERED = ("components_", "topic_word_", "posterior_", "stats_")

logger = logging.getLogger(__name__)
_package_logger = logging.getLogger("lsdask")


def kept_topics(est: Any, K: int) -> Any:
    """C, the topics an entry keeps: ``topk``, else the estimator's ``sparsity`` L
    (all K where it is None), so that ESVI keeps what memoized VI's local step
    keeps: sparse responsibilities cost less and, at many topics, score higher
    on heldout documents than dense ones (docs/esvi.md)."""
    if est.topk is not None:
        return est.topk
    return K if est.sparsity is None else min(int(est.sparsity), K)


def check_esvi_settings(est: Any, vocab_size: int) -> tuple[int, int]:
    """``(P, C)`` for a fit over ``vocab_size`` words, or a ValueError naming the
    parameter and the fix."""
    for name in ("alpha", "eta"):
        if isinstance(getattr(est, name), str):
            raise ValueError(
                f"{name}='auto' is not supported with algorithm='esvi': the priors are fixed "
                f"during the rotations; give a number ({name}=0.5) or use algorithm='memo'"
            )
    default_p = 1 if isinstance(est.client, str) and est.client == "sync" else est.n_workers or 2
    P = est.n_blocks or default_p
    if P > vocab_size:
        raise ValueError(
            f"n_blocks={P} is larger than the vocabulary ({vocab_size} words): every block "
            f"needs at least one word. Use n_blocks <= {vocab_size}"
        )
    K = est.n_components
    C = kept_topics(est, K)
    if not 1 <= C <= K:
        raise ValueError(f"topk must be an integer in [1, {K}] (K); got {C!r}")
    if est.schedule == "nomadic" and est.pi_sync == "exact":
        raise ValueError(
            "schedule='nomadic' with pi_sync='exact' is refused: exact totals need every "
            "part to wait for all the others after each sub-step, which is the barrier the "
            "nomadic schedule leaves out. Use pi_sync='stale' with it (lsdask fit: --pi-sync "
            "stale), or schedule='rotation' for exact totals"
        )
    return P, C


def fit_esvi(est: Any, source: Any, vocab: list[str] | None, *, callback: Any = None) -> Any:
    """Fit the LDA estimator ``est`` to the batches of ``source`` by ESVI, on the
    rotation or the nomadic schedule (``est.schedule``); ``n_laps`` rotations in
    all at most (fewer when the relative ELBO change of a rotation falls below
    ``tol``). With ``checkpoint_dir``, every rotation is
    written block by block to its ``esvi/`` folder; with ``resume``, the fit goes
    on from the last complete rotation there (same settings and batches), up to
    ``n_laps`` rotations in all; without it, a folder that holds a checkpoint is
    refused. A worker lost during a rotation, its checkpoint or the final gather
    is recovered from there too, by itself. Returns ``est``."""
    V, K = source.n_features, est.n_components
    P, C = check_esvi_settings(est, V)
    if est.n_laps < 1:
        raise ValueError("n_laps must be at least 1 with algorithm='esvi' (rotations to run)")
    priors = est._priors()
    rng = np.random.default_rng(est.random_state)
    # "auto" is memoized VI's start (Gibbs where the counts are whole tokens):
    # switching the algorithm keeps the start; "random" is the paper's cold start
    warm = not (isinstance(est.init, str) and est.init == "random")
    model = ESVILDA(
        K, V, np.full(K, priors["alpha"] / K), priors["eta"], C, est.topk_rule,
        int(rng.integers(2**31)), est.esvi_iters, warm, est.esvi_dtype, est.esvi_tol,
    )  # fmt: skip

    def start_counts() -> np.ndarray:
        """The start's topic-word counts (K, V), made in the driver (init='gibbs',
        'kmeans++' or an array) as for memoized VI, from a generator of its own
        seeded with ``random_state``: the same seed gives memoized VI's start."""
        lda = est._model(V)
        start_rng = np.random.default_rng(est.random_state)
        sample, counts = est._init_inputs(lda, source, start_rng)
        stats = est._initial_stats(lda, sample, start_rng, counts, source.n_rows)
        return np.asarray(stats.array("words"), dtype=np.float64)

    store = checkpoint_store(est.checkpoint_dir, est.resume)
    settings = {
        "K": K, "V": V, "P": P, "C": C, "rule": est.topk_rule, "alpha": priors["alpha"],
        "eta": priors["eta"], "seed": model.seed, "esvi_iters": est.esvi_iters,
        "dtype": est.esvi_dtype, "pi_sync": est.pi_sync,
        "init": est.init if isinstance(est.init, str) else "counts",
        "batches": [str(getattr(b, "key", i)) for i, b in enumerate(source.batches)],
    }  # fmt: skip
    if est.schedule != "rotation":  # checkpoints of the rotation schedule keep their settings
        settings["schedule"] = est.schedule
    if est.esvi_tol != 0:  # checkpoints from before the tolerance made every pass: tol 0
        settings["esvi_tol"] = est.esvi_tol
    previous_level = _package_logger.level
    if est.verbose:
        _package_logger.setLevel(logging.INFO if est.verbose == 1 else logging.DEBUG)
    drop_partitioned(est)
    parts, owned = open_partitions(est.client, P, est.n_workers)
    kept = False
    try:
        run = None
        if store is not None and est.resume:
            run = esvi.resume(model, parts, store, settings)
        if run is None:
            run = esvi.start(
                model, parts, source.batches, VocabPartition.balanced, rng,
                start_counts if warm else None,
            )  # fmt: skip
            if est.pi_sync == "stale":
                run.stale = esvi.StaleTotals.start(run.pi, P)
        converged = False
        losses = 0
        while True:
            try:
                while len(run.elbo_trace) < est.n_laps and not converged:
                    if est.schedule == "nomadic":
                        esvi_nomadic.rotate(model, parts, run, 1, model.seed)
                    else:
                        esvi.rotate(model, parts, run, 1)
                    if store is not None:
                        esvi.checkpoint(model, parts, run, store, settings)
                    losses = 0
                    if callback is not None:
                        callback(run)
                    trace = run.elbo_trace
                    if len(trace) > 1 and est.tol > 0:
                        converged = abs(trace[-1] - trace[-2]) <= est.tol * abs(trace[-2])
                # the blocks must still be there: a worker lost after the last
                # rotation is recovered from like one lost during it
                parts.wait(run.blocks)
                parts.settle()  # each worker left with its one block, under one key
                break
            except ClusterError as exc:
                # a worker lost in a rotation, in its checkpoint or in the final
                # gather: go on from the last complete rotation written
                latest = None if store is None else store.latest()
                if latest is None or losses >= LOST_WORKER_RETRIES:
                    raise
                losses += 1
                logger.warning("%s; resuming from rotation %s", exc, latest["rotation"])
                parts.release(run.blocks + run.shards)
                parts = reopen_partitions(parts, P)
                resumed = esvi.resume(model, parts, store, settings)
                assert resumed is not None  # store.latest() was checked
                run = resumed
        parts.release(run.shards)
        run.shards = []
        fitted = ESVIFitted(model, parts, run, float(source.n_rows))
        if owned:  # the cluster closes with the fit: the whole model comes here first
            fitted.set_gathered(est, vocab)
            parts.release(run.blocks)
        else:
            kept = True
            fitted.set_partitioned(est, vocab)
    finally:
        if not kept:
            for obj in owned:
                obj.close()
        _package_logger.setLevel(previous_level)
    est.elbo_trace_ = np.asarray(run.elbo_trace)
    est.substep_elbo_trace_ = np.asarray(run.substep_elbo)
    est.time_trace_ = np.asarray(run.time_trace)
    est.lap_trace_ = np.arange(1, len(run.elbo_trace) + 1, dtype=float)
    est.size_trace_ = np.full(len(run.elbo_trace), run.n_tokens)
    est.alpha_trace_ = np.full(len(run.elbo_trace), float(model.alpha.sum()))
    est.n_laps_ = len(run.elbo_trace)
    est.converged_ = converged
    est.n_features_in_ = V
    est._components_trace = []
    est.block_mass_ = np.asarray(run.partition.mass)
    est._record_fit_params()
    return est


class ESVIFitted:
    """A fitted ESVI model whose blocks stay on the workers the fit left them on.

    Only K-vectors and the columns of the words a caller asks for come to the
    driver; :meth:`lam` gathers the whole of lambda, one block at a time, when
    the user asks for the final model. The blocks live as long as the Dask
    client (and its workers) of the fit: save the model
    (:func:`lsdask.persist.save_model`) or read ``components_`` before closing
    it.
    """

    def __init__(
        self, model: ESVILDA, parts: Any, run: esvi.ESVIRun, n_docs: float,
        owned: list[Any] | None = None,
    ) -> None:  # fmt: skip
        self.model = model
        self.parts = parts
        self.run = run
        self.n_docs = n_docs
        self.owned = owned or []

    def __reduce__(self) -> Any:
        raise TypeError(
            "an LDA fitted by ESVI keeps its topic blocks on the Dask workers and cannot be "
            "pickled; save it with lsdask.persist.save_model (block by block), or read "
            "components_ first (which gathers the whole model into this process)"
        )

    @property
    def n_parts(self) -> int:
        return int(self.parts.n_parts)

    def check(self) -> None:
        """A ClusterError when the blocks are gone (the client closed, a worker lost)."""
        client = getattr(self.parts, "client", None)
        lost = None
        if client is not None and client.status != "running":
            lost = f"its Dask client is {client.status}"
        elif client is not None:
            try:
                self.parts.check_workers()
            except ClusterError as exc:
                lost = str(exc)
        if lost is not None:
            raise ClusterError(
                "this LDA was fitted by ESVI and its topic blocks stayed on the Dask workers, "
                f"but they are gone ({lost}). Save the model (lsdask.persist.save_model) or "
                "read components_ before closing the client, or fit again"
            )

    def lam(self) -> np.ndarray:
        """``lambda`` (K, V), gathered block by block."""
        self.check()
        V = self.model.vocab_size
        lam = np.empty((self.model.n_topics, V))
        for _, block in esvi.gather_blocks(self.parts, self.run):
            lam[:, block.words] = block.lam.T
        return lam

    def log_rows(self, words: np.ndarray) -> np.ndarray:
        """``E[log phi]`` (len(words), K) of sorted word ids, from the blocks."""
        self.check()
        return esvi.topic_log_rows(self.model, self.parts, self.run, words)

    def columns(self, words: np.ndarray) -> np.ndarray:
        """``E[phi]`` (K, len(words)) of sorted word ids, from the blocks."""
        self.check()
        return esvi.topic_columns(self.model, self.parts, self.run, words)

    def release(self) -> None:
        """Let the workers drop the blocks (and close a connection the model opened)."""
        self.parts.release(self.run.blocks)
        for obj in self.owned:
            obj.close()

    def save_blocks(self, store: ESVIStore) -> None:
        """Every block written into ``store`` by the worker that holds it."""
        self.check()
        esvi.save_blocks(
            self.model, self.parts, self.run, store,
            {"block_dtype": self.model.block_dtype, "K": self.model.n_topics,
             "V": self.model.vocab_size},
        )  # fmt: skip

    def _stats(self, counts: np.ndarray) -> SuffStats:
        sums = self.run.sums
        return SuffStats(
            words=counts,
            H=np.array([sums.get("H", np.nan)]),
            alloc=np.array([sums.get("alloc", np.nan)]),
            N=counts.sum(axis=1),
            n_docs=np.array([self.n_docs]),
        )

    def set_gathered(self, est: Any, vocab: list[str] | None) -> None:
        """The estimator's fitted attributes from the whole of lambda."""
        lda = est._model(self.model.vocab_size)
        stats = self._stats(self.lam() - self.model.eta)
        est._set_fitted(lda, lda.global_step(stats), stats, vocab)
        est.__dict__.pop("_esvi_fitted", None)

    def set_partitioned(self, est: Any, vocab: list[str] | None) -> None:
        """The estimator's fitted attributes without lambda: those of :data:`GATHERED`
        are made from the blocks when first read."""
        lda = est._model(self.model.vocab_size)
        for name in GATHERED:
            est.__dict__.pop(name, None)
        est.model_ = lda
        est.alpha_ = read_only(lda.prior_vector())
        est.eta_ = float(self.model.eta)
        est.vocabulary_ = vocab
        est._esvi_fitted = self
        est._esvi_vocab = vocab


def drop_partitioned(est: Any) -> None:
    """Forget the blocks of an earlier ESVI fit of ``est`` (before a new fit)."""
    fitted = est.__dict__.pop("_esvi_fitted", None)
    if fitted is not None:
        try:
            fitted.release()
        except Exception:
            logger.debug("releasing the blocks of an earlier ESVI fit failed", exc_info=True)


def gather_partitioned(est: Any) -> None:
    """Make the fitted attributes of :data:`GATHERED` from the blocks (the user asked
    for the whole model); the blocks stay where they are."""
    fitted: ESVIFitted = est.__dict__["_esvi_fitted"]
    fitted.set_gathered(est, est.__dict__.get("_esvi_vocab"))
    est._esvi_fitted = fitted  # still there: transform and save keep using the blocks


def partitioned(est: Any) -> ESVIFitted | None:
    """The partitioned model of ``est`` whose lambda was never gathered, or None."""
    fitted = est.__dict__.get("_esvi_fitted")
    if fitted is None or "posterior_" in est.__dict__:
        return None
    return fitted  # type: ignore[no-any-return]


class _BlockLogs:
    """``E[log phi]`` rows read from the blocks, shaped as the local step reads a
    :class:`lsdask.models.dirichlet_logs.SparseDirichletLogs` (``rows(words)``)."""

    def __init__(self, fitted: ESVIFitted) -> None:
        self.fitted = fitted

    def rows(self, words: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(self.fitted.log_rows(np.asarray(words, dtype=np.int64)))


class _BlockPosterior:
    """What a local step reads of the posterior (``logs``, ``alpha``), from the blocks."""

    def __init__(self, fitted: ESVIFitted, alpha: np.ndarray) -> None:
        self.logs = _BlockLogs(fitted)
        self.alpha = alpha


def transform_partitioned(task: Any, fitted: ESVIFitted, source: Any) -> Any:
    """:meth:`LDA.transform` of a partitioned model, batch by batch in this process:
    each batch's local step reads ``E[log phi]`` of its own words only, fetched
    from the blocks where they lie (only those rows and the documents' K-vectors
    travel)."""
    import scipy.sparse as sp

    fitted.check()
    posterior = _BlockPosterior(fitted, task.model.prior_vector())
    out = [task(batch, posterior)[1] for batch in source.batches]
    return sp.vstack(out, format="csr")


def score_sums_partitioned(
    fitted: ESVIFitted, A: Any, B: Any, alpha: np.ndarray
) -> tuple[float, float]:
    """Document completion sums of one batch (A fitted, B scored) against a
    partitioned model: only ``E[phi]`` of the batch's words comes here."""
    import scipy.sparse as sp

    from lsdask.evaluate import document_completion_sums

    A, B = sp.csr_matrix(A), sp.csr_matrix(B)
    words = np.unique(np.concatenate([A.indices, B.indices])).astype(np.int64)
    if words.size == 0:
        return document_completion_sums(A, B, np.ones((alpha.size, 1)), alpha)
    topics = fitted.columns(words)

    def local(M: sp.csr_matrix) -> sp.csr_matrix:
        cols = np.searchsorted(words, M.indices)
        return sp.csr_matrix((M.data, cols, M.indptr), shape=(M.shape[0], words.size))

    return document_completion_sums(local(A), local(B), topics, alpha)


def load_partitioned(
    est: Any, store: ESVIStore, fitted: dict[str, Any], arrays: dict[str, np.ndarray],
    vocab: list[str] | None,
) -> None:  # fmt: skip
    """``est`` (made from a saved model's parameters) with the saved blocks read
    back, each on the worker that holds it (:func:`lsdask.persist.load_model`)."""
    from lsdask.engine.partitions import SerialPartitions

    manifest = store.latest()
    if manifest is None:
        raise DataError(
            f"{store.folder} holds no manifest: the saved ESVI model is incomplete. Save "
            "it again from a fitted model"
        )
    P = int(manifest["n_parts"])
    K, V = int(fitted["n_components"]), int(fitted["vocab_size"])
    priors = est._priors()
    C = kept_topics(est, K)
    model = ESVILDA(
        K, V, np.full(K, priors["alpha"] / K), priors["eta"], C, est.topk_rule, 0,
        est.esvi_iters, False, str(manifest.get("block_dtype", "float64")),
    )  # fmt: skip
    client = est.client
    if client is None or (isinstance(client, str) and client == "sync"):
        parts: Any = SerialPartitions(P)
        owned: list[Any] = []
    else:
        parts, owned = open_partitions(client, P, P)
    run, _ = esvi.load_blocks(model, parts, store)
    run.sums = {k: float(v) for k, v in fitted.get("sums", {}).items()}
    for name, values in arrays.items():
        if name.endswith("trace_") or name == "block_mass_":
            setattr(est, name, values)
    run.elbo_trace = list(arrays["elbo_trace_"])
    est.n_laps_ = int(fitted["n_laps_"])
    est.converged_ = bool(fitted["converged_"])
    est.n_features_in_ = V
    est._components_trace = []
    ESVIFitted(model, parts, run, float(fitted["n_docs"]), owned).set_partitioned(est, vocab)
    est._record_fit_params()
