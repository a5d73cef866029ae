"""LDA(init="gibbs"): the collapsed Gibbs kernel, the sampler on a sample, the option."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import lsdask
from lsdask.kernels.gibbs import FULL_SUMS, apply_moves, gibbs_sweep_moves, sparse_gibbs_sweep
from lsdask.learn.gibbs_start import gibbs_sample, split_by_tokens, tokens_of, within_tokens
from lsdask.persist import load_lda, save_lda
from lsdask.synthetic import make_bars_corpus, match_topics


def _counts(doc_ptr, words, z, K, V):
    doc_of = np.repeat(np.arange(doc_ptr.shape[0] - 1), np.diff(doc_ptr))
    ndk = np.zeros((doc_ptr.shape[0] - 1, K), dtype=np.int32)
    nwk = np.zeros((V, K), dtype=np.int32)
    np.add.at(ndk, (doc_of, z), 1)
    np.add.at(nwk, (words, z), 1)
    return ndk, nwk, np.bincount(z, minlength=K).astype(np.int64)


def _conditional(ndk_row, nwk_col, nk, a, eta, V):
    """p(z = k | rest) of one token whose counts are already out of the table."""
    weights = (ndk_row + a) * (nwk_col + eta) / (nk + V * eta)
    return weights / weights.sum()


def _grid_frequencies(doc_ptr, words, z0, K, V, a, eta, j=0, before=None, n_grid=20_000):
    """Topic frequencies of token ``j``'s draw (a token of document 0) over a
    grid of its uniform, after tokens ``0..j-1`` were drawn with the uniforms
    ``before`` (only tokens ``0..j`` are swept; the rest only hold counts);
    with the exact conditional of the counts as they stand at that draw, and
    how many of the grid's draws of token ``j`` summed the prior's part over
    all K topics (the two-bucket draw, without word lists)."""
    before = np.empty(0) if before is None else np.asarray(before, dtype=np.float64)
    ndk0, nwk0, nk0 = _counts(doc_ptr, words, z0, K, V)
    word_total = nwk0.sum(axis=1, dtype=np.int64)
    prefix = np.array([0, j])  # the state when token j is drawn: the kernel over 0..j-1
    z, ndk, nwk, nk = z0.copy(), ndk0.copy(), nwk0.copy(), nk0.copy()
    prefix_sums = sparse_gibbs_sweep(prefix, words, z, ndk, nwk, nk, word_total, a, eta, before)
    w, k = words[j], z[j]
    ndk[0, k] -= 1
    nwk[w, k] -= 1
    nk[k] -= 1
    want = _conditional(ndk[0], nwk[w], nk, a, eta, V)
    drawn = np.empty(n_grid, dtype=np.int64)
    full_sums = 0
    for g, u in enumerate((np.arange(n_grid) + 0.5) / n_grid):
        z, ndk, nwk, nk = z0.copy(), ndk0.copy(), nwk0.copy(), nk0.copy()
        uniforms = np.full(words.shape[0], 0.5)
        uniforms[:j], uniforms[j] = before, u
        sums = sparse_gibbs_sweep(
            np.array([0, j + 1]), words, z, ndk, nwk, nk, word_total, a, eta, uniforms
        )
        full_sums += (sums - prefix_sums)[FULL_SUMS] > 0  # token j's own draw's
        drawn[g] = z[j]
    return np.bincount(drawn, minlength=K) / n_grid, want, full_sums


@pytest.mark.parametrize("a", [0.002, 0.3, 5.0])
@pytest.mark.parametrize("doc_length", [1, 2, 9])
def test_sparse_draw_has_the_exact_conditional(a, doc_length):
    """The first token's draw, over a fine grid of its uniform, picks each topic
    with the plain formula's probability: the document bucket, the prior bucket
    and the split between them are exact (up to the grid's resolution), for a
    document with no other topics (D = 0), a few, and a small, medium or large a."""
    rng = np.random.default_rng(doc_length)
    K, V, eta = 7, 11, 0.2
    doc_words = rng.integers(V, size=doc_length).astype(np.int32)
    doc_z = rng.integers(3, size=doc_length).astype(np.int32)  # topics 0-2: 3-6 are prior-only
    other = rng.integers(V, size=300).astype(np.int32)  # other documents: the words' topics
    other_z = rng.integers(K, size=300).astype(np.int32)
    words = np.concatenate([doc_words, other])
    doc_ptr = np.array([0, doc_length, words.shape[0]], dtype=np.int64)
    z0 = np.concatenate([doc_z, other_z])
    got, want, full_sums = _grid_frequencies(doc_ptr, words, z0, K, V, a, eta)
    np.testing.assert_allclose(got, want, atol=2e-3)
    assert full_sums > 0  # the prior bucket's path ran


@pytest.mark.parametrize("seed", range(6))
def test_sparse_draw_is_exact_in_the_middle_of_a_document(seed):
    """A token drawn after earlier tokens of its document moved (topics left
    and joined the document's list, counts went down and up) still gets the
    exact conditional of the counts as they stand then."""
    rng = np.random.default_rng(100 + seed)
    K, V = int(rng.integers(2, 7)), int(rng.integers(2, 6))
    a, eta = float(rng.choice([0.01, 0.1, 1.0])), float(rng.choice([0.05, 0.5]))
    n0 = int(rng.integers(3, 8))
    words = rng.integers(V, size=n0 + 40).astype(np.int32)
    z0 = rng.integers(K, size=n0 + 40).astype(np.int32)
    doc_ptr = np.array([0, n0, n0 + 40], dtype=np.int64)
    j = int(rng.integers(1, n0))  # the gridded token; tokens 0..j-1 are drawn first
    got, want, _ = _grid_frequencies(doc_ptr, words, z0, K, V, a, eta, j, rng.random(j))
    np.testing.assert_allclose(got, want, atol=2e-3)


def test_sparse_draw_is_exact_after_a_topic_left_and_another_took_its_place():
    """Token 0 leaves topic 0 (the document's first listed topic: the last one,
    topic 2, takes its place) and token 1 moves too; token 2's draw must see
    the list as it is then (the review's case, where a wrong place in the
    list drew [0.045, 0.024, 0.932] instead of [0.030, 0.338, 0.632])."""
    K = V = 3
    a = eta = 0.1
    words = np.array([0, 1, 2] * 3, dtype=np.int32)
    z0 = np.array([0, 1, 2] * 3, dtype=np.int32)
    doc_ptr = np.array([0, 3, 9], dtype=np.int64)
    before = np.array([0.22, 0.06])
    got, want, _ = _grid_frequencies(doc_ptr, words, z0, K, V, a, eta, 2, before)
    np.testing.assert_allclose(got, want, atol=2e-3)


def test_sparse_draw_is_exact_when_the_token_leaves_the_smallest_topic():
    """Word 1 only in topic 1, the smallest (2 tokens), and a document that is
    mostly topic 0: the prior bucket's total is close to its bound, and taking
    the token out lowers the smallest n_k from 2 to 1, so a bound computed from
    the count before would be too small and the prior bucket (nearly all
    topic 1) drawn about 0.035 too rarely."""
    K, V, a, eta = 2, 2, 1.0, 0.5
    words = np.array([1] + [0] * 20 + [1], dtype=np.int32)
    z0 = np.array([1] + [0] * 20 + [1], dtype=np.int32)
    doc_ptr = np.array([0, 21, 22], dtype=np.int64)
    got, want, full_sums = _grid_frequencies(doc_ptr, words, z0, K, V, a, eta)
    np.testing.assert_allclose(got, want, atol=2e-3)
    assert full_sums > 0


def _log_joint(doc_of, words, z, K, V, a, eta):
    """log p(w, z) up to a constant, collapsed over pi and phi."""
    from scipy.special import gammaln

    ndk = np.zeros((doc_of.max() + 1, K))
    nwk = np.zeros((V, K))
    np.add.at(ndk, (doc_of, z), 1)
    np.add.at(nwk, (words, z), 1)
    return gammaln(ndk + a).sum() + gammaln(nwk + eta).sum() - gammaln(nwk.sum(0) + V * eta).sum()


@pytest.mark.parametrize("a", [0.01, 0.8])
def test_sparse_sampler_visits_the_exact_posterior(a):
    """Over many sweeps from a fixed seed, how often two tokens share a topic
    (for every pair; a statistic the topics' labels do not change) equals the
    exact posterior probability, enumerated over all K^n states of a corpus of
    7 tokens: the draws and every count update (the active topics, the lowest
    n_k) keep the chain on its target."""
    K, V, eta = 3, 4, 0.3
    doc_ptr = np.array([0, 3, 4, 7], dtype=np.int64)
    words = np.array([0, 1, 1, 2, 0, 3, 3], dtype=np.int32)
    doc_of = np.repeat(np.arange(3), np.diff(doc_ptr))
    n = words.shape[0]
    states = np.array(np.meshgrid(*[np.arange(K)] * n, indexing="ij")).reshape(n, -1).T
    log_p = np.array([_log_joint(doc_of, words, s, K, V, a, eta) for s in states])
    p = np.exp(log_p - log_p.max())
    p /= p.sum()
    same = states[:, :, None] == states[:, None, :]
    exact = np.einsum("s,sij->ij", p, same)
    rng = np.random.default_rng(0)
    z = rng.integers(K, size=n).astype(np.int32)
    ndk, nwk, nk = _counts(doc_ptr, words, z, K, V)
    word_total = nwk.sum(axis=1, dtype=np.int64)
    sweeps = 60_000
    seen = np.zeros((n, n))
    for _ in range(sweeps):
        sparse_gibbs_sweep(doc_ptr, words, z, ndk, nwk, nk, word_total, a, eta, rng.random(n))
        seen += z[:, None] == z[None, :]
    for got, want in zip((ndk, nwk, nk), _counts(doc_ptr, words, z, K, V), strict=True):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(seen / sweeps, exact, atol=0.015)


def test_sparse_sweep_keeps_the_counts_of_z_on_a_larger_corpus():
    """After sweeps over a few hundred documents (empty ones included), the
    counts equal those rebuilt from z, and each token's topic is a valid id."""
    rng = np.random.default_rng(4)
    K, V = 30, 50
    lengths = rng.integers(0, 40, size=200)
    doc_ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    words = rng.integers(V, size=doc_ptr[-1]).astype(np.int32)
    z = rng.integers(K, size=doc_ptr[-1]).astype(np.int32)
    ndk, nwk, nk = _counts(doc_ptr, words, z, K, V)
    word_total = nwk.sum(axis=1, dtype=np.int64)
    for _ in range(5):
        uniforms = rng.random(z.shape[0])
        sparse_gibbs_sweep(doc_ptr, words, z, ndk, nwk, nk, word_total, 0.01, 0.1, uniforms)
    assert z.min() >= 0 and z.max() < K
    for got, want in zip((ndk, nwk, nk), _counts(doc_ptr, words, z, K, V), strict=True):
        np.testing.assert_array_equal(got, want)


def test_apply_moves_equals_numpy():
    rng = np.random.default_rng(5)
    nwk = rng.integers(5, 9, size=(6, 4)).astype(np.int32)
    nk = nwk.sum(axis=0).astype(np.int64)
    words = rng.integers(6, size=30).astype(np.int32)
    old, new = rng.integers(4, size=(2, 30)).astype(np.int32)
    want_nwk, want_nk = nwk.copy(), nk.copy()
    np.add.at(want_nwk, (words, old), -1)
    np.add.at(want_nwk, (words, new), 1)
    np.add.at(want_nk, old, -1)
    np.add.at(want_nk, new, 1)
    apply_moves(nwk, nk, words, old, new)
    np.testing.assert_array_equal(nwk, want_nwk)
    np.testing.assert_array_equal(nk, want_nk)


def test_split_by_tokens_balances_and_covers_every_document():
    doc_ptr = np.concatenate([[0], np.cumsum([5, 0, 90, 3, 3, 3, 0, 96])]).astype(np.int64)
    bounds = split_by_tokens(doc_ptr, 2)
    np.testing.assert_array_equal(bounds, [0, 5, 8])  # 101 and 99 tokens
    for parts in (1, 3, 7, 20):  # more parts than documents: some are empty
        bounds = split_by_tokens(doc_ptr, parts)
        assert bounds[0] == 0 and bounds[-1] == 8 and np.all(np.diff(bounds) >= 0)


def test_a_run_of_documents_records_its_moves_and_reads_its_own_uniforms():
    """``gibbs_sweep_moves`` over documents 3 to 8 makes the draws of the serial
    kernel over them (its uniforms start at the run's first token) and records
    exactly the tokens whose topic changed."""
    X, _ = make_bars_corpus(n_docs=12, doc_length=25, random_state=5)
    K, rng = 6, np.random.default_rng(11)
    doc_ptr, words = tokens_of(X)
    z0 = rng.integers(K, size=words.shape[0]).astype(np.int32)
    run = doc_ptr[3:10]
    lo, hi = int(run[0]), int(run[-1])
    uniforms = rng.random(words.shape[0])
    states = []
    for record in (False, True):
        z = z0.copy()
        ndk, nwk, nk = _counts(doc_ptr, words, z, K, X.shape[1])
        word_total = nwk.sum(axis=1, dtype=np.int64)
        if record:
            moves = np.full((3, hi - lo), -1, dtype=np.int32)
            _, n = gibbs_sweep_moves(
                run, words, z, ndk[3:9], nwk, nk, word_total, 0.1, 0.1, uniforms[lo:hi], moves
            )
        else:
            sparse_gibbs_sweep(run, words, z, ndk[3:9], nwk, nk, word_total, 0.1, 0.1, uniforms)
        states.append((z, nwk))
    np.testing.assert_array_equal(states[0][0], states[1][0])
    np.testing.assert_array_equal(states[0][1], states[1][1])
    z = states[1][0]
    changed = np.flatnonzero(z != z0)
    assert 0 < n == changed.size and np.all((changed >= lo) & (changed < hi))
    np.testing.assert_array_equal(moves[:, :n], [words[changed], z0[changed], z[changed]])


def test_a_run_refuses_buffers_too_small_for_its_tokens():
    X, _ = make_bars_corpus(n_docs=4, doc_length=10, random_state=6)
    doc_ptr, words = tokens_of(X)
    z = np.zeros(words.shape[0], dtype=np.int32)
    ndk, nwk, nk = _counts(doc_ptr, words, z, 3, X.shape[1])
    word_total = nwk.sum(axis=1, dtype=np.int64)
    n = words.shape[0]
    args = (doc_ptr, words, z, ndk, nwk, nk, word_total, 0.1, 0.1)
    with pytest.raises(ValueError, match="fewer uniforms"):
        gibbs_sweep_moves(*args, np.full(n - 1, 0.5), np.empty((3, n), dtype=np.int32))
    with pytest.raises(ValueError, match="moves must be"):
        gibbs_sweep_moves(*args, np.full(n, 0.5), np.empty((3, n - 1), dtype=np.int32))
    _, moved = gibbs_sweep_moves(*args, np.full(n, 0.5), np.empty((3, 0), dtype=np.int32))
    assert moved == 0  # (3, 0): nothing recorded


def test_parts_work_with_any_bit_generator():
    """The parts' own generators are seeded from the caller's, whatever its bit
    generator (Philox cannot spawn)."""
    X, _ = make_bars_corpus(n_docs=40, doc_length=20, random_state=7)
    runs = [
        gibbs_sample(X, 5, 1.0, 0.1, 3, np.random.Generator(np.random.Philox(key=1)), parts=2)
        for _ in "ab"
    ]
    np.testing.assert_array_equal(runs[0].topic_word, runs[1].topic_word)


def test_one_part_is_the_exact_serial_sampler():
    """``parts=1`` makes exactly the draws of the serial kernel from the same
    stream of random numbers."""
    X, _ = make_bars_corpus(n_docs=60, doc_length=30, random_state=3)
    K, alpha, eta, sweeps = 10, 1.0, 0.1, 4
    got = gibbs_sample(X, K, alpha, eta, sweeps, np.random.default_rng(9), parts=1).topic_word
    rng = np.random.default_rng(9)
    doc_ptr, words = tokens_of(X)
    z = rng.integers(K, size=words.shape[0]).astype(np.int32)
    ndk, nwk, nk = _counts(doc_ptr, words, z, K, X.shape[1])
    word_total = nwk.sum(axis=1, dtype=np.int64)
    for _ in range(sweeps):
        uniforms = rng.random(words.shape[0])
        sparse_gibbs_sweep(doc_ptr, words, z, ndk, nwk, nk, word_total, alpha / K, eta, uniforms)
    np.testing.assert_array_equal(got, nwk.T)


def test_parts_are_seeded_and_take_in_each_others_moves():
    """Sweeping in parallel parts gives the same counts for the same seed, and
    after every sweep the counts are those of the tokens' topics (each part's
    moves reach the shared counts once)."""
    X, _ = make_bars_corpus(n_docs=200, doc_length=30, random_state=4)
    K = 10
    runs = [gibbs_sample(X, K, 1.0, 0.1, 6, np.random.default_rng(2), parts=3) for _ in "ab"]
    runs = [r.topic_word for r in runs]
    np.testing.assert_array_equal(runs[0], runs[1])
    for sweeps in (1, 2, 5):
        rng = np.random.default_rng(2)
        drawn = gibbs_sample(X, K, 1.0, 0.1, sweeps, rng, parts=3)
        words, z, topic_word = drawn.words, drawn.z, drawn.topic_word
        want = np.zeros_like(topic_word)
        np.add.at(want, (z, words), 1)
        np.testing.assert_array_equal(topic_word, want)
    serial = gibbs_sample(X, K, 1.0, 0.1, 6, np.random.default_rng(2), parts=1).topic_word
    assert not np.array_equal(runs[0], serial)  # the parts really ran apart


def test_tokens_round_counts_and_keep_empty_documents():
    X = sp.csr_matrix(np.array([[2.0, 0, 1], [0, 0, 0], [0, 3.4, 0], [0, 0, 0.2], [0, 0, 0]]))
    doc_ptr, words = tokens_of(X)
    np.testing.assert_array_equal(doc_ptr, [0, 3, 3, 6, 6, 6])
    np.testing.assert_array_equal(words, [0, 0, 2, 1, 1, 1])


def test_sampler_recovers_bars():
    """On the bars corpus the sampler's topics alone are the true bars. Found
    bars are 0.15-0.29 (L1) from the truth, tokens at the pixels two bars
    share going either way; a bar merged with another or split in two is
    0.6-2 away, so 0.4 tells the two apart (0.2, the bound before, sat at the
    median of found bars). A chain stuck with a merged bar after 200 sweeps
    happens at 1 or 2 seeds of 48 (the sampler with the two-bucket draw, and
    with its three-bucket successor), so 4 of 5 seeds must find all bars."""
    X, true_topics = make_bars_corpus(n_docs=500, doc_length=50, random_state=1)
    found = 0
    for seed in range(5):
        rng = np.random.default_rng(seed)
        counts = gibbs_sample(X, 10, alpha=10.0, eta=0.1, sweeps=200, rng=rng).topic_word
        assert counts.shape == (10, 25)
        assert counts.sum() == X.sum()  # every token in exactly one topic
        _, distances = match_topics(true_topics, counts + 0.1)
        found += distances.max() < 0.4
    assert found >= 4


def test_init_gibbs_fit_is_seeded_and_beats_kmeans_start_after_one_lap():
    X, _ = make_bars_corpus(n_docs=400, doc_length=40, random_state=2)
    kw = dict(alpha=10.0, n_laps=1, random_state=0, client="sync", sparsity=4)
    a = lsdask.LDA(10, init="gibbs", gibbs_sweeps=40, **kw).fit(X)
    b = lsdask.LDA(10, init="gibbs", gibbs_sweeps=40, **kw).fit(X)
    np.testing.assert_array_equal(a.components_, b.components_)
    kmeans = lsdask.LDA(10, init="kmeans++", **kw).fit(X)
    assert a.elbo_trace_[-1] > kmeans.elbo_trace_[-1]


def test_gibbs_sweeps_and_tokens_are_checked_and_saved(tmp_path):
    X, _ = make_bars_corpus(n_docs=50, doc_length=20, random_state=0)
    with pytest.raises(ValueError, match="gibbs_sweeps"):
        lsdask.LDA(10, init="gibbs", gibbs_sweeps=0, client="sync").fit(X)
    with pytest.raises(ValueError, match="gibbs_tokens"):
        lsdask.LDA(10, init="gibbs", gibbs_tokens=0, client="sync").fit(X)
    kw = dict(init="gibbs", gibbs_sweeps=3, gibbs_tokens=500, n_laps=1, client="sync")
    model = lsdask.LDA(10, **kw).fit(X)
    save_lda(model, tmp_path / "m")
    loaded = load_lda(tmp_path / "m")
    assert (loaded.init, loaded.gibbs_sweeps, loaded.gibbs_tokens) == ("gibbs", 3, 500)
    np.testing.assert_array_equal(loaded.components_, model.components_)


def test_init_gibbs_refuses_fractional_counts_and_too_few_tokens():
    X, _ = make_bars_corpus(n_docs=50, doc_length=20, random_state=0)
    frequencies = sp.csr_matrix(X.multiply(1.0 / X.sum(axis=1)))
    with pytest.raises(ValueError, match=r"round to 0 tokens: the counts look fractional"):
        lsdask.LDA(10, init="gibbs", client="sync").fit(frequencies)
    short = np.zeros((1, 25))
    short[0, :3] = 2.0
    with pytest.raises(ValueError, match=r"has 6 tokens for n_components=10"):
        lsdask.LDA(10, init="gibbs", client="sync").fit(sp.csr_matrix(short))


def test_auto_init_is_gibbs_for_whole_counts_and_kmeans_otherwise(caplog):
    """The default ``init="auto"`` starts exactly as ``"gibbs"`` on word counts
    and as ``"kmeans++"`` (saying why, in the log) on fractional counts."""
    X, _ = make_bars_corpus(n_docs=120, doc_length=30, random_state=5)
    kw = dict(n_laps=1, random_state=0, client="sync", gibbs_sweeps=5)
    auto = lsdask.LDA(10, **kw).fit(X)
    assert auto.init == "auto"
    np.testing.assert_array_equal(
        auto.components_, lsdask.LDA(10, init="gibbs", **kw).fit(X).components_
    )
    frequencies = sp.csr_matrix(X.multiply(1.0 / X.sum(axis=1)))
    with caplog.at_level("INFO", logger="lsdask.estimators.lda"):
        auto = lsdask.LDA(10, **kw).fit(frequencies)
    assert "init='auto' starts from k-means++: init='gibbs' samples whole tokens" in caplog.text
    kmeans = lsdask.LDA(10, init="kmeans++", **kw).fit(frequencies)
    np.testing.assert_array_equal(auto.components_, kmeans.components_)


def test_within_tokens_keeps_whole_documents_up_to_the_bound():
    X = sp.csr_matrix(np.array([[1, 2, 0], [0, 0, 0], [3, 0, 0.4], [0, 1, 1], [0, 0, 0]]))
    assert within_tokens(X, 8, np.random.default_rng(0)).shape == (5, 3)  # 8 tokens: all
    rows = X.toarray().tolist()
    for cap in (3, 5, 6, 7):
        kept = within_tokens(X, cap, np.random.default_rng(cap)).toarray()
        assert 0 < np.rint(kept).sum() <= cap
        assert all(row in rows for row in kept.tolist())  # whole documents, no new ones
        order = [rows.index(row) for row in kept.tolist() if any(row)]
        assert order == sorted(order)  # in their order in X


def _record_gibbs_samples(monkeypatch) -> list:
    import lsdask.estimators.lda as lda_estimator

    seen = []

    def recording(sample, *args, **kwargs):
        seen.append(sample)
        return gibbs_sample(sample, *args, **kwargs)

    monkeypatch.setattr(lda_estimator, "gibbs_sample", recording)
    return seen


def test_gibbs_start_samples_beyond_the_kmeans_sample_and_within_its_bounds(monkeypatch):
    """The Gibbs start takes every document of a corpus within its bounds
    (more than k-means++'s sample of rows), across batches; over the token
    bound, whole documents up to it; k-means++ after "auto" keeps its own size."""
    from lsdask import config

    X, _ = make_bars_corpus(n_docs=300, doc_length=20, random_state=3)
    seen = _record_gibbs_samples(monkeypatch)
    monkeypatch.setattr(config, "INIT_SAMPLE_ROWS", 50)
    kw = dict(n_laps=1, random_state=0, client="sync", gibbs_sweeps=2, batch_size=40)
    lsdask.LDA(10, **kw).fit(X)
    assert seen[-1].shape[0] == 300 and seen[-1].sum() == X.sum()
    lsdask.LDA(10, init="gibbs", gibbs_tokens=1000, **kw).fit(X)
    assert 950 < seen[-1].sum() <= 1000  # documents of 20 tokens up to the bound
    # 150 batches: all are read but early stopping's 3 validation batches of 2 documents
    lsdask.LDA(10, **{**kw, "batch_size": 2}).fit(X)
    assert seen[-1].shape[0] == 294
    lsdask.LDA(10, early_stopping=False, **{**kw, "batch_size": 2}).fit(X)
    assert seen[-1].shape[0] == 300 and seen[-1].sum() == X.sum()
    # 30 documents' int32 counts of 10 topics; the bound takes K into account
    monkeypatch.setattr(config, "GIBBS_SAMPLE_DOC_TOPIC_BYTES", 30 * 4 * 10)
    lsdask.LDA(10, init="gibbs", **kw).fit(X)
    assert seen[-1].shape[0] == 30
    lsdask.LDA(5, init="gibbs", **kw).fit(X)
    assert seen[-1].shape[0] == 60
    frequencies = sp.csr_matrix(X.multiply(1.0 / X.sum(axis=1)))
    monkeypatch.setattr(config, "GIBBS_SAMPLE_DOC_TOPIC_BYTES", 300 * 4 * 10)
    import lsdask.estimators.lda as lda_estimator

    chosen = []
    original = lda_estimator.initial_stats

    def recording_kmeans(model, sample, method, rng):
        chosen.append(sample.shape[0])
        return original(model, sample, method, rng)

    monkeypatch.setattr(lda_estimator, "initial_stats", recording_kmeans)
    lsdask.LDA(10, **kw).fit(frequencies)
    assert chosen == [50]


def test_without_a_bar_the_sampler_logs_every_tenth_of_its_sweeps(caplog):
    X, _ = make_bars_corpus(n_docs=40, doc_length=20, random_state=0)
    with caplog.at_level("INFO", logger="lsdask.learn.gibbs_start"):
        gibbs_sample(X, 5, 1.0, 0.1, 30, np.random.default_rng(0), progress=False)
    lines = [r.getMessage() for r in caplog.records]
    assert [line.split(" in ")[0] for line in lines[:-1]] == [
        f"Gibbs init: {n} of 30 sweeps" for n in range(3, 30, 3)
    ]
    assert lines[-1].startswith("Gibbs init: 30 sweeps (of 30 at most) over 40 documents")


def test_the_recent_mean_covers_the_latest_quarter_to_half_of_the_chain():
    from lsdask.learn.gibbs_start import CHECK_EVERY, RecentMean

    rng = np.random.default_rng(0)
    samples = {}
    recent = RecentMean((3, 2))
    for made in range(CHECK_EVERY, 401, CHECK_EVERY):
        samples[made] = rng.integers(0, 50, size=(3, 2))
        recent.add(samples[made], made)
        # reference: the samples the two sums hold, replayed from the closing rule
        kept = _recent_window(sorted(samples), CHECK_EVERY)
        np.testing.assert_allclose(
            recent.mean_transposed(samples[made], made),
            np.mean([samples[m] for m in kept], axis=0).T,
        )
        assert (
            made / 4
            <= (kept[-1] - kept[0] + CHECK_EVERY)
            <= max(2 * CHECK_EVERY, made / 2 + 2 * CHECK_EVERY)
        )
    live = rng.integers(0, 50, size=(3, 2))  # counts after a sweep between samples
    kept = _recent_window(sorted(samples), CHECK_EVERY)
    np.testing.assert_allclose(
        recent.mean_transposed(live, 405), np.mean([samples[m] for m in kept] + [live], axis=0).T
    )


def _recent_window(sweeps, every):
    """The sweeps whose samples RecentMean holds: blocks close once they hold
    samples of a quarter of the sweeps made; the closed block before the latest
    is dropped when the next one closes."""
    blocks, current = [], []
    for made in sweeps:
        current.append(made)
        if len(current) * every >= made / 4:
            blocks.append(current)
            current = []
    return (blocks[-1] if blocks else []) + current


def test_the_start_takes_the_mean_of_its_recent_samples(monkeypatch):
    X, _ = make_bars_corpus(n_docs=200, doc_length=20, random_state=1)
    drawn = gibbs_sample(X, 5, 1.0, 0.1, 60, np.random.default_rng(0), progress=False)
    assert drawn.topic_word_mean.shape == drawn.topic_word.shape == (5, X.shape[1])
    # every sample holds all tokens: so does the mean, per word
    np.testing.assert_allclose(drawn.topic_word_mean.sum(axis=0), np.asarray(X.sum(axis=0))[0])
    assert not np.array_equal(drawn.topic_word_mean, drawn.topic_word)
    est = lsdask.LDA(5, init="gibbs", gibbs_sweeps=60, n_laps=1, random_state=0,
                     client="sync", early_stopping=False, progress=False)  # fmt: skip
    seen = _record_gibbs_samples(monkeypatch)
    starts = []
    original = est._initial_stats

    def recording(*args, **kw):
        starts.append(original(*args, **kw))
        return starts[-1]

    monkeypatch.setattr(est, "_initial_stats", recording)
    est.fit(X)
    assert seen and starts[0].array("words").shape == (5, X.shape[1])
    assert not np.allclose(starts[0].array("words"), np.rint(starts[0].array("words")))
