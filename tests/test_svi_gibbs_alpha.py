"""``LDA(algorithm="svi-gibbs", alpha="auto")``: the document-topic prior learned
from each minibatch's sampled document-topic counts."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import lsdask
from lsdask.io.corpus import Corpus
from lsdask.kernels.svi_gibbs import sample_documents
from lsdask.models.collapsed import (
    STREAM_STEPS,
    DocTopicCounts,
    StreamPrior,
    fit_alpha_to_doc_counts,
)
from lsdask.models.sparse_topics import sample_counts
from tests.test_svi_gibbs import _corpus, svi_gibbs_kw
from tests.test_svi_gibbs_kernel import _topics
from tests.test_svi_gibbs_rb import rewrite_checkpoint


def _reference_histogram(X, ids, view, burnin, samples, seed) -> dict[tuple[int, int], int]:
    """(topic, count) -> how many (document, kept sweep) pairs hold ``count``
    tokens of ``topic``, counted one document and sweep at a time from the
    draws' kernel's assignments."""
    whole = X.data.astype(np.int64)
    T = int(whole.sum())
    out_w, out_t = np.empty(T * samples, np.int64), np.empty(T * samples, np.int64)
    local = np.searchsorted(view.word_ids, X.indices).astype(np.int64)
    sample_documents(
        X.indptr.astype(np.int64), local, whole, ids.astype(np.int64), np.uint64(seed),
        np.uint64(view.step), burnin, samples, view.w_indptr, view.w_topics, view.w_excess,
        view.smooth, view.alpha, view.cum_smooth, out_w, out_t,
    )  # fmt: skip
    hist: dict[tuple[int, int], int] = {}
    for s in range(samples):
        start = s * T
        for d in range(X.shape[0]):
            n = int(X[d].sum())
            for k, c in zip(*np.unique(out_t[start : start + n], return_counts=True), strict=True):
                hist[(int(k), int(c))] = hist.get((int(k), int(c)), 0) + 1
            start += n
    return hist


@pytest.mark.parametrize("estimator", ["draws", "rao-blackwell"])
def test_document_topic_counts_match_a_document_by_document_count(rng, estimator) -> None:
    """Both estimators run the same chains, so their document-topic histograms
    are the one counted document by document from the chains' assignments."""
    K, V = 6, 20
    view = _topics(rng, K, V).view(np.arange(V), np.full(K, 0.3), step=4)
    X = sp.csr_matrix(rng.poisson(0.9, size=(11, V)).astype(float))
    ids = np.arange(50, 61)
    _, hist = sample_counts(X, ids, view, 2, 3, seed=9, estimator=estimator, doc_topics=True)
    got = {(int(k % K), int(k // K)): int(c) for k, c in zip(hist.keys, hist.counts, strict=True)}
    assert got == _reference_histogram(X, ids, view, 2, 3, 9)
    # every (document, kept sweep) holds all its tokens
    assert sum(k[1] * c for k, c in got.items()) == 3 * X.sum()


def test_a_histogram_is_the_dense_counts_by_their_values(rng) -> None:
    """``DocTopicCounts.of_histogram`` of a matrix's (count, topic) pairs gives the
    fixed point the dense matrix gives; counting each document twice changes nothing."""
    counts = rng.poisson(1.2, size=(30, 5)) * (rng.random((30, 5)) < 0.5)
    dense = DocTopicCounts.of(counts)
    rows, topics = np.nonzero(counts)
    keys, mult = np.unique(counts[rows, topics] * 5 + topics, return_counts=True)
    lengths = counts.sum(axis=1)
    once = DocTopicCounts.of_histogram(5, keys, mult, lengths)
    twice = DocTopicCounts.of_histogram(5, keys, 2 * mult, lengths, times=2)
    a0 = np.full(5, 0.4)
    expected = fit_alpha_to_doc_counts(dense, a0)
    np.testing.assert_allclose(fit_alpha_to_doc_counts(once, a0), expected, rtol=1e-12)
    np.testing.assert_allclose(fit_alpha_to_doc_counts(twice, a0), expected, rtol=1e-12)


def test_the_stream_prior_settles_at_the_corpus_fixed_point() -> None:
    """Documents drawn from a Dirichlet-multinomial with an asymmetric prior, seen
    as minibatches of 100 with SVI's step sizes: the stream's prior ends within
    3% of the fixed point fitted to all the documents at once, which is itself
    within 15% of the generating prior."""
    rng = np.random.default_rng(0)
    truth = np.array([1.2, 0.6, 0.3, 0.15, 0.05])
    theta = rng.dirichlet(truth, size=4000)
    counts = np.array([rng.multinomial(60, p) for p in theta])
    batch = fit_alpha_to_doc_counts(DocTopicCounts.of(counts), np.full(5, 0.2), max_iters=5000)
    np.testing.assert_allclose(batch, truth, rtol=0.15)
    prior, t = StreamPrior.start(np.full(5, 0.2)), 0
    for _ in range(8):
        for chunk in np.array_split(rng.permutation(4000), 40):
            t += 1
            prior.update(DocTopicCounts.of(counts[chunk]), (10 + t) ** -0.6, 4000 / chunk.size)
    np.testing.assert_allclose(prior.alpha, batch, rtol=0.03)
    # the running histogram estimates the corpus's: 4000 documents of 60 tokens
    np.testing.assert_array_equal(prior.lengths, [60])
    np.testing.assert_allclose(prior.n_docs_of_length, [4000.0])


def test_an_update_mixes_the_histograms_and_refits_from_where_alpha_was(rng) -> None:
    """The running histogram is ``(1 - rho) H + rho scale H_B``, key by key, and
    alpha is :data:`STREAM_STEPS` fixed point steps on it from the last alpha."""
    first = DocTopicCounts.of(rng.poisson(2.0, size=(20, 4)))
    second = DocTopicCounts.of(rng.poisson(1.0, size=(10, 4)))
    a = np.array([0.5, 0.2, 0.1, 0.3])
    prior = StreamPrior.start(a)
    prior.update(first, 0.5, 3.0)
    np.testing.assert_allclose(prior.mult.sum(), 0.5 * 3.0 * first.mult.sum())
    after_first = prior.alpha.copy()
    expected = fit_alpha_to_doc_counts(prior.counts(), a, max_iters=STREAM_STEPS)
    np.testing.assert_array_equal(after_first, expected)
    before = {int(k): w for k, w in zip(prior.keys, prior.mult, strict=True)}
    prior.update(second, 0.25, 2.0)
    added = {int(v * 4 + k): 0.25 * 2.0 * m for k, v, m in zip(*second[:3], strict=True)}
    for key, w in zip(prior.keys, prior.mult, strict=True):
        assert w == pytest.approx(0.75 * before.get(int(key), 0.0) + added.get(int(key), 0.0))
    expected = fit_alpha_to_doc_counts(prior.counts(), after_first, max_iters=STREAM_STEPS)
    np.testing.assert_array_equal(prior.alpha, expected)
    with pytest.raises(ValueError, match="rho must be in"):
        prior.update(first, 0.0, 1.0)


@pytest.fixture(scope="module")
def many_topics():
    """20 topics' documents, fitted with twice as many topics."""
    return _corpus(np.random.default_rng(7), n_docs=600, K=20, V=400)


def test_the_learned_prior_follows_the_topics_use(many_topics) -> None:
    """With 40 topics for 20, the learned alpha_k rank as the topics' use, and the
    fitted model carries the prior and its total per epoch."""
    X, _ = many_topics
    m = lsdask.LDA(40, **svi_gibbs_kw(n_laps=6, alpha="auto")).fit(X)
    assert m.alpha_.shape == (40,) and m.alpha_trace_.shape == (6,)
    np.testing.assert_allclose(m.alpha_trace_[-1], m.alpha_.sum())
    assert m.alpha_.max() / m.alpha_.min() > 5  # asymmetric: not the start's 0.1 each
    use = m.components_.sum(axis=1) - m.eta_ * X.shape[1]
    ranks = np.argsort(np.argsort(m.alpha_)), np.argsort(np.argsort(use))
    assert np.corrcoef(*ranks)[0, 1] > 0.8


def test_a_learned_prior_resumes_exactly_and_is_refused_by_a_fixed_one(tmp_path) -> None:
    X, _ = _corpus(np.random.default_rng(3))
    kw = svi_gibbs_kw(alpha="auto")
    kw.pop("n_laps")
    straight = lsdask.LDA(5, n_laps=3, **kw).fit(X)
    ck = tmp_path / "ck"
    lsdask.LDA(5, n_laps=2, checkpoint_dir=str(ck), **kw).fit(X)
    again = lsdask.LDA(5, n_laps=1, checkpoint_dir=str(ck), resume=True, **kw).fit(X)
    np.testing.assert_array_equal(straight.components_, again.components_)
    np.testing.assert_array_equal(straight.alpha_, again.alpha_)
    np.testing.assert_array_equal(straight.alpha_trace_, again.alpha_trace_)
    with pytest.raises(ValueError, match=r"alpha: checkpoint 'auto', asked 1\.0"):
        lsdask.LDA(5, n_laps=1, checkpoint_dir=str(ck), resume=True, **{**kw, "alpha": 1.0}).fit(X)


def test_local_cluster_equals_in_process_with_a_learned_prior(tmp_path, dask_client) -> None:
    X, _ = _corpus(np.random.default_rng(5))
    path = tmp_path / "c"
    Corpus.write(path, X, [f"w{i}" for i in range(X.shape[1])], docs_per_row_group=50)
    kw = svi_gibbs_kw(alpha="auto")
    there = lsdask.LDA(5, **{**kw, "client": dask_client}).fit(str(path))
    here = lsdask.LDA(5, **kw).fit(str(path))
    np.testing.assert_array_equal(here.components_, there.components_)
    np.testing.assert_array_equal(here.alpha_, there.alpha_)


def test_a_damaged_learned_prior_is_refused_naming_the_file(tmp_path) -> None:
    from lsdask.errors import DataError

    X, _ = _corpus(np.random.default_rng(3))
    ck = tmp_path / "ck"
    kw = svi_gibbs_kw(alpha="auto", n_laps=1)
    lsdask.LDA(5, checkpoint_dir=str(ck), **kw).fit(X)

    def negate(arrays, meta):
        arrays["alpha"] = -arrays["alpha"]  # a prior must be positive

    path = rewrite_checkpoint(ck, negate)
    with pytest.raises(DataError, match=f"{path}.*learned prior 'alpha'"):
        lsdask.LDA(5, checkpoint_dir=str(ck), resume=True, **kw).fit(X)


def test_cli_fit_learns_the_prior_and_saves_it(tmp_path) -> None:
    from lsdask.cli import main

    X, _ = _corpus(np.random.default_rng(3))
    Corpus.write(tmp_path / "c", X, [f"w{i}" for i in range(X.shape[1])], docs_per_row_group=50)
    argv = ["fit", str(tmp_path / "c"), "--topics", "5", "--out", str(tmp_path / "m"), "--sync"]
    opts = ["--algorithm", "svi-gibbs", "--minibatch-size", "60", "--laps", "2"]
    assert main([*argv, *opts, "--alpha", "auto"]) == 0
    m = lsdask.persist.load_model(tmp_path / "m")
    assert m.alpha == "auto" and m.n_laps_ == 2
    assert not np.allclose(m.alpha_, 0.1)  # learned, from 0.1 per topic
    np.testing.assert_allclose(m.alpha_trace_[-1], m.alpha_.sum())


def test_a_model_with_a_learned_prior_saves_and_loads_it(tmp_path) -> None:
    X, _ = _corpus(np.random.default_rng(3))
    m = lsdask.LDA(5, **svi_gibbs_kw(alpha="auto")).fit(X)
    lsdask.persist.save_model(m, tmp_path / "m")
    back = lsdask.persist.load_model(tmp_path / "m")
    assert back.alpha == "auto"  # refitting learns it again, not a fixed total
    np.testing.assert_array_equal(back.alpha_, m.alpha_)
    np.testing.assert_array_equal(back.transform(X[:5]).toarray(), m.transform(X[:5]).toarray())


def test_a_checkpoint_from_before_the_alpha_trace_resumes_with_a_fixed_one(tmp_path) -> None:
    """A checkpoint written before the prior could be learned keeps no alpha trace:
    it resumes equal to an uninterrupted fit, its trace the fixed total."""
    X, _ = _corpus(np.random.default_rng(3))
    kw = svi_gibbs_kw(alpha=2.0)
    kw.pop("n_laps")
    straight = lsdask.LDA(5, n_laps=3, **kw).fit(X)
    ck = tmp_path / "ck"
    lsdask.LDA(5, n_laps=2, checkpoint_dir=str(ck), **kw).fit(X)
    rewrite_checkpoint(ck, lambda arrays, meta: meta.pop("alpha_trace"))
    again = lsdask.LDA(5, n_laps=1, checkpoint_dir=str(ck), resume=True, **kw).fit(X)
    np.testing.assert_array_equal(straight.components_, again.components_)
    np.testing.assert_array_equal(again.alpha_trace_, [2.0, 2.0, 2.0])
