"""LDA(algorithm="svi-gibbs"): the estimator, Dask equality, bad input, the CLI."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import lsdask
from lsdask.errors import DataError
from lsdask.io.corpus import Corpus


def _corpus(rng, n_docs=300, K=5, V=80, length=40):
    topics = rng.dirichlet(np.full(V, 0.05), size=K)
    rows = []
    for _ in range(n_docs):
        theta = rng.dirichlet(np.full(K, 0.3))
        z = rng.choice(K, size=length, p=theta)
        rows.append(np.bincount([rng.choice(V, p=topics[k]) for k in z], minlength=V))
    return sp.csr_matrix(np.asarray(rows, dtype=float)), topics


@pytest.fixture(scope="module")
def data():
    return _corpus(np.random.default_rng(7))


def svi_gibbs_kw(**kw):
    """The small fits' settings, with ``kw`` over them."""
    base = dict(
        algorithm="svi-gibbs", alpha=1.0, eta=0.1, n_laps=3, minibatch_size=40,
        gibbs_burnin=2, gibbs_samples=2, random_state=3, client="sync", svi_delay=10.0,
    )  # fmt: skip
    return {**base, **kw}


def _lda(**kw):
    return lsdask.LDA(5, **svi_gibbs_kw(**kw))


def test_fit_learns_topics_and_keeps_them_sparse(data):
    X, _ = data
    m = _lda(n_laps=6).fit(X)
    assert m.n_laps_ == 6
    assert m.n_steps_ == 6 * int(np.ceil(300 / 40))
    assert m.components_.shape == (5, 80)
    np.testing.assert_allclose(m.topic_word_.sum(axis=1), 1.0)
    # lambda = eta + N-tilde: every entry >= eta, most entries exactly eta or near it
    assert (m.components_ >= 0.1).all()
    assert m.nonzero_trace_.shape == (6,) and m.nonzero_trace_[-1] <= 5 * 80
    assert 0.0 < m.driver_share_ < 1.0
    # better than the topics at the prior, close to memoized VI
    memo = lsdask.LDA(5, alpha=1.0, eta=0.1, client="sync", random_state=0, n_laps=10).fit(X)
    # topics at the prior (lambda = eta, uniform topics) score -log V per token
    from lsdask.evaluate import document_completion, split_documents

    A, B = split_documents(X, 0.8, 0)
    prior = document_completion(A, B, np.full((5, 80), 1.0 / 80), m.alpha_)
    np.testing.assert_allclose(prior, -np.log(80), rtol=1e-9)
    assert m.score(X) > prior + 0.5
    assert m.score(X) > memo.score(X) - 0.15


def test_callback_sees_every_epoch_and_can_score_it(data):
    from lsdask.evaluate import document_completion, split_documents, umass_coherence

    X, _ = data
    A, B = split_documents(X[:50], 0.8, 0)
    seen = []

    def score(result):
        topics = result.globals.topics
        umass = umass_coherence(topics, X, 5)
        seen.append((result.n_laps, document_completion(A, B, topics, 1.0), umass.min()))
        assert result.nonzero_trace[-1] == np.count_nonzero(result.globals.lam - 0.1)

    m = _lda(n_laps=3).fit(X, callback=score)
    assert [e for e, _, _ in seen] == [1, 2, 3]
    assert all(np.isfinite(h) and np.isfinite(u) for _, h, u in seen)
    np.testing.assert_allclose(m.topic_word_, m.posterior_.topics)


def test_local_cluster_equals_in_process(data, tmp_path, dask_client):
    X, _ = data
    path = tmp_path / "c"
    Corpus.write(path, X, [f"w{i}" for i in range(X.shape[1])], docs_per_row_group=50)
    from lsdask.io import doc_stream

    doc_stream._CACHE.clear()
    doc_stream._CACHE_BYTES[0] = 0
    there = _lda(client=dask_client).fit(str(path))
    # the workers read their own row groups: the driver read none of them
    assert not [b for b in doc_stream._CACHE if str(path) in str(b.path)]
    here = _lda().fit(str(path))
    assert len(doc_stream._CACHE) == 300 // 50  # in process, this process read them
    np.testing.assert_array_equal(here.components_, there.components_)
    np.testing.assert_array_equal(here.nonzero_trace_, there.nonzero_trace_)
    # the corpus's documents and the matrix's differ only in their ids (the draws' keys)
    assert here.vocabulary_ == [f"w{i}" for i in range(X.shape[1])]


def test_same_seed_same_topics_other_seed_other_topics(data):
    X, _ = data
    a, b, c = _lda().fit(X), _lda().fit(X), _lda(random_state=4).fit(X)
    np.testing.assert_array_equal(a.components_, b.components_)
    assert not np.array_equal(a.components_, c.components_)


def test_a_fitted_model_saves_loads_and_transforms(data, tmp_path):
    X, _ = data
    m = _lda().fit(X)
    lsdask.persist.save_model(m, tmp_path / "m")
    back = lsdask.persist.load_model(tmp_path / "m")
    np.testing.assert_array_equal(back.components_, m.components_)
    assert back.transform(X[:5]).shape == (5, 5)


@pytest.mark.parametrize(
    "kw, error, match",
    [
        (dict(gibbs_burnin=-1), ValueError, "gibbs_burnin"),
        (dict(gibbs_samples=0), ValueError, "gibbs_samples"),
        (dict(svi_kappa=0.5), ValueError, r"svi_kappa must be in \(0.5, 1\]"),
        (dict(svi_kappa=0.3), ValueError, r"svi_kappa must be in \(0.5, 1\]"),
        (dict(svi_kappa=1.2), ValueError, "svi_kappa"),
        (dict(svi_delay=0.0), ValueError, "svi_delay"),
        (dict(svi_delay=-1.0), ValueError, "svi_delay"),
        (dict(minibatch_size=301), ValueError, "minibatch_size=301 is larger than"),
        (dict(minibatch_size=0), ValueError, "minibatch_size"),
        (dict(eta="auto"), ValueError, "eta='auto' is not supported"),
    ],
)
def test_bad_input(data, kw, error, match):
    X, _ = data
    with pytest.raises(error, match=match):
        _lda(**kw).fit(X)


def test_small_priors_are_warned_about(data, caplog):
    X, _ = data
    with caplog.at_level("WARNING", logger="lsdask"):
        _lda(n_laps=1, eta=0.1, alpha=0.02, gibbs_weights="geometric").fit(X)
    text = caplog.text
    assert "eta=0.3-0.4, or gibbs_weights='mean', is recommended" in text and "alpha=0.5" in text
    caplog.clear()
    with caplog.at_level("WARNING", logger="lsdask"):
        _lda(n_laps=1, eta=0.4, alpha=1.0, gibbs_weights="geometric").fit(X)
    assert "svi-gibbs" not in caplog.text
    # the posterior mean does not freeze at a small eta: no warning
    with caplog.at_level("WARNING", logger="lsdask"):
        _lda(n_laps=1, eta=0.1, alpha=1.0).fit(X)
    assert "svi-gibbs" not in caplog.text


def test_partial_fit_is_refused(data):
    X, _ = data
    with pytest.raises(ValueError, match="partial_fit is not supported with algorithm='svi-gibbs'"):
        _lda().partial_fit(X)


def test_an_empty_stream_is_refused(tmp_path):
    with pytest.raises(DataError, match="holds no documents"):
        _lda().fit(sp.csr_matrix((0, 10)))
    Corpus.write(tmp_path / "e", sp.csr_matrix((0, 10)), [f"w{i}" for i in range(10)])
    with pytest.raises(DataError, match="holds no documents"):
        _lda().fit(str(tmp_path / "e"))


def test_fractional_counts_are_refused_naming_the_minibatch(data):
    X, _ = data
    Y = X.copy()
    Y.data = Y.data * 0.5
    with pytest.raises(DataError, match="whole tokens"):
        _lda().fit(Y)


def test_cli_fit_svi_gibbs(data, tmp_path, capsys):
    from lsdask.cli import main

    X, _ = data
    Corpus.write(tmp_path / "c", X, [f"w{i}" for i in range(X.shape[1])], docs_per_row_group=50)
    argv = ["fit", str(tmp_path / "c"), "--topics", "5", "--out", str(tmp_path / "m"), "--sync"]
    opts = ["--algorithm", "svi-gibbs", "--gibbs-burnin", "1", "--gibbs-samples", "2"]
    assert main([*argv, *opts, "--minibatch-size", "60", "--laps", "2", "--alpha", "1"]) == 0
    printed = capsys.readouterr().out
    # SVI-Gibbs computes no ELBO: it says so, and draws no empty ELBO pictures
    assert "final ELBO: none (algorithm=svi-gibbs computes no ELBO" in printed
    assert "nan" not in printed and not (tmp_path / "m" / "elbo.png").exists()
    m = lsdask.persist.load_model(tmp_path / "m")
    assert m.algorithm == "svi-gibbs" and m.gibbs_samples == 2 and m.minibatch_size == 60
    assert m.n_laps_ == 2
    # a checkpoint, then a resume with a heldout corpus scored after every epoch
    Corpus.write(tmp_path / "h", X[:30], [f"w{i}" for i in range(X.shape[1])])
    ck = ["--checkpoint", str(tmp_path / "ck")]
    more = [*opts, "--minibatch-size", "60", "--alpha", "1", "--overwrite"]
    assert main([*argv, *more, "--laps", "1", *ck]) == 0
    resume = ["--resume", str(tmp_path / "ck"), "--heldout", str(tmp_path / "h")]
    assert main([*argv, *more, "--laps", "1", *resume]) == 0
    assert lsdask.persist.load_model(tmp_path / "m").n_laps_ == 2
    assert "heldout" in capsys.readouterr().out
    bad = ["fit", str(tmp_path / "c"), "--topics", "5", "--out", str(tmp_path / "h"), "--sync"]
    assert main([*bad, "--model", "hdp", "--gibbs-samples", "2"]) != 0
    assert "--gibbs-samples" in capsys.readouterr().err
    assert main([*bad, "--model", "hdp", "--blocks", "2"]) != 0  # nor ESVI's
    assert "--blocks: an option of LDA's --algorithm svi-gibbs or esvi" in capsys.readouterr().err
