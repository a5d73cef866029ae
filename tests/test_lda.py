"""LDA: model invariants, the estimator, and Dask equality."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import linear_sum_assignment

import lsdask
from lsdask.engine import SerialExecutor
from lsdask.evaluate import document_completion, split_documents
from lsdask.io.corpus import Corpus
from lsdask.io.sources import as_batch_source
from lsdask.learn import MemoizedVI
from lsdask.models import SuffStats, sum_stats
from lsdask.models.lda import LDAModel, LocalStepOptions


def _corpus(rng, n_docs=600, K=6, V=120, length=60):
    topics = rng.dirichlet(np.full(V, 0.05), size=K)
    rows = []
    for _ in range(n_docs):
        theta = rng.dirichlet(np.full(K, 0.3))
        z = rng.choice(K, size=length, p=theta)
        words = [rng.choice(V, p=topics[k]) for k in z]
        rows.append(np.bincount(words, minlength=V))
    return sp.csr_matrix(np.asarray(rows, dtype=float)), topics


@pytest.fixture(scope="module")
def corpus_data():
    return _corpus(np.random.default_rng(2024))


def _random_globals(model, rng):
    from lsdask.models import SuffStats

    K, V = model.n_components, model.vocab_size
    return model.global_step(
        SuffStats(
            words=rng.gamma(0.3, 10.0, size=(K, V)), H=np.zeros(1), alloc=np.zeros(1),
            N=np.zeros(K), n_docs=np.zeros(1),
        )
    )  # fmt: skip


@pytest.mark.parametrize("restarts,rtol", [(False, 1e-7), (True, 1e-3)])
def test_sparsity_K_equals_dense(corpus_data, restarts, rtol):
    """Run to convergence, L = K gives the dense fixed points. With restarts
    they agree to 1e-3 rather than to rounding: a topic a proposal dropped is
    exactly zero in the sparse step, while dense responsibilities cannot be
    zero, and it keeps about exp(psi(alpha/K)) (~4e-6 here) of every token,
    enough to be proposed, and dropped, again."""
    X, _ = corpus_data
    K = 6
    options = LocalStepOptions(max_iters=2000, conv_thresh=1e-10, restarts=restarts)
    model = LDAModel(K, X.shape[1], 0.5, 0.1, options)
    glob = _random_globals(model, np.random.default_rng(0))
    dense = model.local_step(X[:200], glob, None)
    full = model.local_step(X[:200], glob, K)
    assert full.allclose(dense, rtol=rtol, atol=rtol)
    assert model.elbo(full, glob) == pytest.approx(model.elbo(dense, glob), rel=rtol / 100)


def test_memoized_statistics_and_elbo_equal_recomputation(corpus_data):
    X, _ = corpus_data
    model = LDAModel(6, X.shape[1], 0.5, 0.1)
    rng = np.random.default_rng(1)
    source = as_batch_source(X, 100)
    L = 4
    result = MemoizedVI(n_laps=3, tol=1e-12, batches_per_update=1).run(
        model, SerialExecutor(), source.batches, _random_globals(model, rng), rng, L
    )
    recomputed = sum_stats(result.memo)
    assert result.stats.allclose(recomputed, rtol=1e-12, atol=1e-9)
    assert model.elbo(recomputed, model.global_step(recomputed)) == pytest.approx(
        result.elbo_trace[-1], rel=1e-12
    )
    # per-batch statistics are stored at their nonzero entries, within the batch's vocabulary
    block = result.memo[0]["words"]
    assert set(np.unique(block.cols)) <= set(np.unique(X[:100].indices))
    assert np.all(block.values != 0)
    assert block.values.size == np.count_nonzero(block.toarray())  # each pair once
    assert block.values.size <= L * X[:100].nnz  # a document's word gives at most L topics


def test_recovers_topics_and_scores(corpus_data):
    X, topics = corpus_data
    model = lsdask.LDA(6, sparsity=4, n_laps=25, client="sync", random_state=0, batch_size=150)
    model.fit(X[:500])
    cost = np.abs(model.topic_word_[:, None, :] - topics[None]).sum(-1)
    rows, cols = linear_sum_assignment(cost)
    assert cost[rows, cols].max() < 0.35
    heldout = model.score(X[500:])
    uniform = -np.log(X.shape[1])
    assert uniform + 0.5 < heldout < 0.0
    weights = model.transform(X[500:510])
    assert sp.issparse(weights) and np.all(
        (np.diff(weights.indptr) >= 1) & (np.diff(weights.indptr) <= 4)
    )
    np.testing.assert_allclose(np.asarray(weights.sum(1)).ravel(), 1.0)
    assert len(model.top_words(5)) == 6 and all(len(t) == 5 for t in model.top_words(5))
    assert np.all(model.coherence(X, 5) <= 0)


def test_transform_keeps_only_the_topics_a_document_uses(corpus_data):
    """No filler: topics without mass in a document (which all share the prior's
    weight, so would fill the top L lowest-numbered first) are left out; an
    empty document gets an empty row."""
    X, _ = corpus_data
    model = lsdask.LDA(6, sparsity=4, n_laps=5, client="sync", random_state=0, batch_size=150)
    model.fit(X[:300])
    docs = sp.vstack([X[300:360], sp.csr_matrix((1, X.shape[1]))], format="csr")
    weights = model.transform(docs)
    _, doc_topic, _ = model.model_.doc_topic_step(docs, model.posterior_, 4)
    eps, prior = model.model_.options.eps, model.model_.alpha / 6
    for d in range(docs.shape[0]):
        used = np.flatnonzero(doc_topic[d] > eps)
        expected = np.sort(used[np.argsort(-doc_topic[d, used], kind="stable")][:4])
        row = weights[d]
        np.testing.assert_array_equal(row.indices, expected)
        theta = doc_topic[d, expected] + prior
        np.testing.assert_allclose(row.data, theta / theta.sum(), rtol=1e-12)
    sizes = np.diff(weights.indptr)
    assert sizes[-1] == 0 and (sizes[:-1] < 4).any() and (sizes[:-1] >= 1).all()


def test_partial_fit_adds_new_documents(corpus_data):
    X, _ = corpus_data
    model = lsdask.LDA(6, sparsity=4, n_laps=3, client="sync", random_state=0, batch_size=100)
    model.fit(X[:300])
    docs_before = model.stats_["n_docs"][0]
    model.partial_fit(X[300:450])
    assert model.stats_["n_docs"][0] == docs_before + 150
    assert len(model.elbo_trace_) == len(model.lap_trace_) == len(model.time_trace_)
    fresh = lsdask.LDA(6, client="sync", random_state=0, batch_size=100).partial_fit(X[:100])
    assert fresh.stats_["n_docs"][0] == 100


def test_corpus_path_equals_in_memory_and_local_cluster_equals_in_process(
    corpus_data, tmp_path, dask_client
):
    X, _ = corpus_data
    path = tmp_path / "corpus"
    Corpus.write(path, X, [f"w{i}" for i in range(X.shape[1])], docs_per_row_group=100)
    kw = dict(sparsity=4, n_laps=3, random_state=3, batches_per_update=2)
    a = lsdask.LDA(6, client="sync", batch_size=100, **kw).fit(X)
    b = lsdask.LDA(6, client="sync", **kw).fit(str(path))
    c = lsdask.LDA(6, client=dask_client, **kw).fit(str(path))
    np.testing.assert_allclose(b.elbo_trace_, a.elbo_trace_, rtol=1e-12)
    np.testing.assert_allclose(c.elbo_trace_, a.elbo_trace_, rtol=1e-10)
    np.testing.assert_allclose(c.components_, a.components_, rtol=1e-9)
    assert b.top_words(2)[0][0].startswith("w")


@pytest.mark.parametrize("algorithm", ["svi", "vb"])
def test_other_algorithms_improve_the_heldout_score(corpus_data, algorithm):
    """Ten laps of SVI or VB score better than one lap of VB from the same start.
    The start is k-means++: the default Gibbs start of 1,000 sweeps already sits
    at the optimum of this small corpus (one VB lap -3.4260 nats/token, ten SVI
    steps -3.4286, noise), which leaves the algorithms nothing to improve."""
    X, _ = corpus_data
    common = dict(client="sync", random_state=0, batch_size=100, init="kmeans++")
    before = lsdask.LDA(6, n_laps=1, algorithm="vb", **common)
    after = lsdask.LDA(6, n_laps=10, algorithm=algorithm, **common)
    s0 = before.fit(X[:500]).score(X[500:])
    s1 = after.fit(X[:500]).score(X[500:])
    assert s1 > s0


def test_lda_bad_input(corpus_data):
    X, _ = corpus_data
    bad = X.copy().astype(float)
    bad.data[5] = -2.0
    with pytest.raises(ValueError, match=r"X batch 0 \(rows 0:100\): word counts must be finite"):
        lsdask.LDA(3, client="sync", batch_size=100).fit(bad)
    with pytest.raises(ValueError, match=r"sparsity must be an integer >= 1; got 0"):
        lsdask.LDA(3, sparsity=0, client="sync").fit(X)
    with pytest.raises(ValueError, match="eta must be a positive finite number"):
        lsdask.LDA(3, eta=0, client="sync").fit(X)
    with pytest.raises(ValueError, match="restarts must be True or False; got 'no'"):
        lsdask.LDA(3, restarts="no", client="sync").fit(X)
    with pytest.raises(ValueError, match="random_state must be None, an integer >= 0 or a numpy"):
        lsdask.LDA(3, random_state="x", client="sync").fit(X)
    model = lsdask.LDA(3, n_laps=1, client="sync", batch_size=300).fit(X)
    with pytest.raises(ValueError, match="X has 10 words in its vocabulary, but this model"):
        model.transform(X[:, :10])
    # the entry is named where a batch context is not: transform, score
    row = int(np.searchsorted(bad.indptr, 5, side="right") - 1)
    named = rf"document \(row\) {row}, word id {bad.indices[5]} has -2\.0 \(1 such entries"
    with pytest.raises(ValueError, match=named):
        model.transform(bad)
    with pytest.raises(ValueError, match=named):
        model.score(bad)


def test_a_corpus_over_other_words_of_the_same_number_is_refused(corpus_data, tmp_path):
    from lsdask.io.corpus import Corpus

    X, _ = corpus_data
    V = X.shape[1]
    Corpus.write(tmp_path / "a", X[:300], [f"w{i}" for i in range(V)])
    Corpus.write(tmp_path / "b", X[300:400], [f"v{i}" for i in range(V)])
    model = lsdask.LDA(3, n_laps=1, client="sync", gibbs_sweeps=10).fit(str(tmp_path / "a"))
    match = rf"Parquet corpus .*b is over another vocabulary than this model's: {V} of its {V} "
    for method in (model.transform, model.score, model.partial_fit):
        with pytest.raises(ValueError, match=match + r".*--vocab TRAINING_CORPUS"):
            method(str(tmp_path / "b"))
    assert model.vocabulary_[0] == "w0"  # partial_fit did not take the other words in
    model.partial_fit(X[400:450])  # a matrix carries no words: only its size is checked


def test_lda_refuses_documents_without_tokens(tmp_path):
    from lsdask.errors import DataError
    from lsdask.io.corpus import Corpus

    empty = sp.csr_matrix((10, 50))
    with pytest.raises(DataError, match=r"its 10 documents hold no tokens .* nothing to learn"):
        lsdask.LDA(5, client="sync").fit(empty)
    zeros = sp.csr_matrix((np.zeros(5), (np.arange(5), np.arange(5))), shape=(10, 50))
    with pytest.raises(DataError, match=r"hold no tokens"):
        lsdask.LDA(5, client="sync").fit(zeros)
    Corpus.write(tmp_path / "c", empty, [f"w{i}" for i in range(50)])
    with pytest.raises(DataError, match=r"Parquet corpus .*c: its 10 documents hold no tokens"):
        lsdask.LDA(5, client="sync").fit(str(tmp_path / "c"))


def test_init_from_topic_word_counts_starts_there(corpus_data):
    """An array ``init`` is the first q(phi) = Dir(eta + init): one full-batch VB
    lap from it equals one local step against those topics, summed by hand."""
    X, topics = corpus_data
    X = X[:300]
    start = topics * 1000.0
    est = lsdask.LDA(6, sparsity=4, n_laps=1, algorithm="vb", init=start, client="sync")
    est.fit(X)
    model = est.model_
    glob = model.global_step(
        SuffStats(words=start, H=np.zeros(1), alloc=np.zeros(1), N=start.sum(1), n_docs=[300.0])
    )
    np.testing.assert_allclose(glob.lam, start + model.eta, rtol=1e-15)
    by_hand = model.global_step(model.local_step(X, glob, 4))
    np.testing.assert_allclose(est.components_, by_hand.lam, rtol=1e-12)


def test_init_from_the_true_topics_beats_kmeanspp_after_one_lap(corpus_data):
    X, topics = corpus_data
    kw = dict(sparsity=4, n_laps=1, client="sync", random_state=0, batch_size=100)
    near = lsdask.LDA(6, init=topics * 3000.0, **kw).fit(X[:500])
    seeded = lsdask.LDA(6, init="kmeans++", **kw).fit(X[:500])
    assert near.elbo_trace_[-1] > seeded.elbo_trace_[-1]
    assert near.score(X[500:]) > seeded.score(X[500:])


def test_init_array_round_trips_through_save_and_load(corpus_data, tmp_path):
    X, topics = corpus_data
    est = lsdask.LDA(6, n_laps=1, init=topics, client="sync", batch_size=300).fit(X)
    from lsdask.persist import load_lda, save_lda

    save_lda(est, tmp_path / "m")
    back = load_lda(tmp_path / "m", client="sync")
    np.testing.assert_array_equal(back.init, topics)
    np.testing.assert_array_equal(back.components_, est.components_)


@pytest.mark.parametrize(
    "init,match",
    [
        (
            np.ones((5, 120)),
            r"init: expected topic-word counts of shape \(n_components, V\) = "
            r"\(6, 120\); got shape \(5, 120\)",
        ),
        (np.ones((6, 100)), r"= \(6, 120\); got shape \(6, 100\)"),
        (np.ones(6), r"got shape \(6,\)"),
        (np.full((6, 120), -1.0), r"must be finite and >= 0; init\[0, 0\] is -1.0 \(720 such"),
        (np.where(np.eye(6, 120) > 0, np.nan, 1.0), r"init\[0, 0\] is nan \(6 such entries\)"),
        (
            "plusplus",
            r"init must be one of 'auto', 'kmeans\+\+', 'random', 'gibbs'; got 'plusplus'",
        ),
        (
            [["a"] * 120] * 6,
            r"init must be 'auto', 'kmeans\+\+', 'random', 'gibbs' or an array .* got list",
        ),
    ],
)
def test_init_bad_values(corpus_data, init, match):
    X, _ = corpus_data
    with pytest.raises(ValueError, match=match):
        lsdask.LDA(6, init=init, client="sync").fit(X)


def test_partial_fit_from_given_topics(corpus_data):
    """A first ``partial_fit`` starts from ``init`` as ``fit`` does: its one
    update is the local step against Dir(eta + init), added to nothing."""
    X, topics = corpus_data
    start = topics * 1000.0
    est = lsdask.LDA(6, sparsity=4, init=start, client="sync", batch_size=300).partial_fit(X[:300])
    model = est.model_
    glob = model.global_step(
        SuffStats(words=start, H=np.zeros(1), alloc=np.zeros(1), N=start.sum(1), n_docs=[300.0])
    )
    by_hand = model.global_step(model.local_step(X[:300], glob, 4))
    np.testing.assert_allclose(est.components_, by_hand.lam, rtol=1e-12)
    assert est.stats_["n_docs"][0] == 300


def test_a_corpus_is_scored_transformed_and_checked_batch_by_batch_as_a_whole(
    corpus_data, tmp_path
):
    """transform, score and coherence read a corpus one row group at a time
    and give what they give on all its documents at once."""
    X, _ = corpus_data
    model = lsdask.LDA(6, sparsity=4, n_laps=3, client="sync", random_state=0, batch_size=150)
    model.fit(X[:300])
    docs = X[300:]
    corpus = Corpus.write(tmp_path / "c", docs, [f"w{i}" for i in range(X.shape[1])],
                          docs_per_row_group=70)  # fmt: skip
    assert len(corpus.batches) > 2
    whole = sp.csr_matrix(docs)
    step, sizes = model.model_.doc_topic_step, []

    def counted(X, *args):
        sizes.append(X.shape[0])
        return step(X, *args)

    object.__setattr__(model.model_, "doc_topic_step", counted)  # the model is frozen
    by_batch = model.transform(corpus)
    assert sizes == [b.n_docs for b in corpus.batches]  # one row group at a time
    object.__delattr__(model.model_, "doc_topic_step")
    assert (by_batch != model.transform(whole)).nnz == 0
    np.testing.assert_array_equal(model.coherence(corpus, 5), model.coherence(whole, 5))
    A, B = split_documents(whole, 0.8, 4)
    expected = document_completion(A, B, model.topic_word_, model.alpha)
    assert model.score(corpus, random_state=4) == pytest.approx(expected, rel=1e-12)


def test_one_batch_runs_in_process_with_the_default_client(corpus_data, monkeypatch):
    """Starting a cluster for a single batch costs seconds and saves nothing
    (partial_fit on a mini-batch paid it on every call)."""
    import lsdask.engine.dask_executor as dask_executor

    def no_cluster(*args, **kwargs):
        raise AssertionError("a cluster was started for one batch")

    monkeypatch.setattr(dask_executor.DaskExecutor, "__init__", no_cluster)
    X, _ = corpus_data
    model = lsdask.LDA(4, sparsity=2, n_laps=2, random_state=0, gibbs_sweeps=20)
    model.fit(X[:200]).partial_fit(X[200:300])
    expected = lsdask.LDA(4, sparsity=2, n_laps=2, random_state=0, gibbs_sweeps=20, client="sync")
    expected.fit(X[:200]).partial_fit(X[200:300])
    np.testing.assert_array_equal(model.components_, expected.components_)
    with pytest.raises(AssertionError, match="a cluster was started"):
        lsdask.LDA(4, n_laps=1, batch_size=100, gibbs_sweeps=20).fit(X[:200])
