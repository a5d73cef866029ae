"""The topic report (``lsdask report``, ``LDA.report``) without a browser: its data
against plain numpy references, and the page self-contained and safe.

The page in a real browser: tests/test_report_browser.py.
"""

from __future__ import annotations

import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.stats import spearmanr

from lsdask import HDP, LDA
from lsdask.cli import main
from lsdask.estimators.report_page import embed_json, render_page
from lsdask.estimators.topic_map import (
    LAMBDAS,
    classical_mds,
    js_distances,
    relevance_candidates,
)
from lsdask.estimators.topic_report import report_data
from lsdask.evaluate import npmi_coherence, umass_coherence
from lsdask.io.corpus import Corpus
from lsdask.io.ingest import ingest_text_folder
from lsdask.persist import save_model

THEMES = (
    "apple banana cherry grape lemon mango melon peach pear plum".split(),
    "engine wheel brake clutch piston gear axle tyre valve exhaust".split(),
    "violin cello flute oboe trumpet drum harp piano guitar organ".split(),
)
COMMON = "report about some thing".split()  # in every theme: high p(w), low lift


@pytest.fixture(scope="module")
def texts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Text files of three themes plus common words; names that look like markup."""
    root = tmp_path_factory.mktemp("texts")
    rng = np.random.default_rng(4)
    for i in range(36):
        n = int(rng.integers(8, 60))
        words = list(rng.choice(THEMES[i % 3], size=n)) + list(rng.choice(COMMON, size=n))
        if i == 5:
            words.insert(0, "</script><img")  # text that must stay text
        (root / f"doc{i:02d}<b>&amp;.txt").write_text(" ".join(words) + "\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def corpus(texts: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("corpus") / "c"
    ingest_text_folder(texts, out, docs_per_row_group=7, min_df=1, max_df=1.0)
    return out


@pytest.fixture(scope="module")
def model(corpus: Path) -> LDA:
    return LDA(3, sparsity=2, n_laps=6, init="random", random_state=0, client="sync",
               progress=False).fit(corpus)  # fmt: skip


def corpus_matrix(corpus: Path, V: int) -> sp.csr_matrix:
    """Every document of the corpus as one matrix."""
    return sp.vstack([b.load().to_csr(V) for b in Corpus.open(corpus).batches], format="csr")


def reference_ranking(phi: np.ndarray, p: np.ndarray, lam: float, R: int) -> list[int]:
    """The top R word ids by relevance over the whole vocabulary (Sievert and Shirley
    2014), plain numpy: words the corpus lacks left out, ties to the smaller id."""
    ids = np.flatnonzero(p > 0)
    r = lam * np.log(phi[ids]) + (1 - lam) * np.log(phi[ids] / p[ids])
    return [int(ids[i]) for i in sorted(range(ids.size), key=lambda i: (-r[i], ids[i]))[:R]]


def page_ranking(data: dict, k: int, lam: float) -> list[str]:
    """The page's ranking of topic k (as its script computes it), as words."""
    logp, words = data["terms"]["logp"], data["terms"]["word"]
    rows = []
    for t, lp in zip(data["cand"][k], data["logphi"][k], strict=True):
        rows.append((-(lam * lp + (1 - lam) * (lp - logp[t])), t))
    return [words[t] for _, t in sorted(rows)[: data["n_terms"]]]


def test_relevance_candidates_hold_every_lambdas_top_terms() -> None:
    rng = np.random.default_rng(3)
    K, V, R = 6, 300, 12
    phi = rng.dirichlet(np.full(V, 0.2), size=K)
    phi[:, 10] = phi[:, 11]  # two words tied in every topic and in the corpus
    counts = rng.poisson(5.0, size=V).astype(float)
    counts[11] = counts[10]
    counts[20:25] = 0  # words the corpus lacks
    phi /= phi.sum(axis=1, keepdims=True)
    p = counts / counts.sum()
    with np.errstate(divide="ignore"):
        cands = relevance_candidates(np.log(phi), np.log(p), R)
    for k in range(K):
        assert len(cands[k]) < V / 3  # a few candidates, not the vocabulary
        assert not set(cands[k]) & set(range(20, 25))
        for lam in LAMBDAS:
            c = cands[k]
            a, b = np.log(phi[k, c]), np.log(phi[k, c]) - np.log(p[c])
            r = lam * a + (1 - lam) * b
            got = [int(c[i]) for i in sorted(range(c.size), key=lambda i: (-r[i], c[i]))[:R]]
            assert got == reference_ranking(phi[k], p, lam, R), (k, lam)


def test_an_empty_topic_has_r_candidates_not_the_vocabulary() -> None:
    """A topic without tokens is flat: every word ties at every lambda. Its
    candidates are the R best with ties to the smaller word id, as the page
    ranks them, not all V words (a page of 1,000 mostly empty topics stays
    small)."""
    rng = np.random.default_rng(5)
    V, R = 400, 10
    phi = np.vstack([np.full(V, 1.0 / V), rng.dirichlet(np.full(V, 0.2))])
    p = rng.dirichlet(np.full(V, 1.0))
    p[3] = p[7]  # ties in the corpus too
    cands = relevance_candidates(np.log(phi), np.log(p), R)
    assert len(cands[0]) <= 2 * R
    for k in range(2):
        for lam in LAMBDAS:
            c = cands[k]
            r = lam * np.log(phi[k, c]) + (1 - lam) * (np.log(phi[k, c]) - np.log(p[c]))
            got = [int(c[i]) for i in sorted(range(c.size), key=lambda i: (-r[i], c[i]))[:R]]
            assert got == reference_ranking(phi[k], p, lam, R), (k, lam)


def naive_kl(a: np.ndarray, b: np.ndarray) -> float:
    """KL(a || b) in bits, 0 log 0 = 0."""
    on = a > 0
    return float(np.sum(a[on] * np.log2(a[on] / b[on])))


def naive_js(P: np.ndarray) -> np.ndarray:
    K = P.shape[0]
    D = np.zeros((K, K))
    for i in range(K):
        for j in range(K):
            m = (P[i] + P[j]) / 2
            D[i, j] = np.sqrt(max(0.0, (naive_kl(P[i], m) + naive_kl(P[j], m)) / 2))
    return D


def test_js_distances_equal_a_plain_reference() -> None:
    rng = np.random.default_rng(0)
    P = rng.dirichlet(np.full(50, 0.3), size=9)
    P[0, :10] = 0  # zeros: 0 log 0 = 0
    P[0] /= P[0].sum()
    P[8] = P[7]  # identical topics: distance 0
    got = js_distances(P, threads=3)
    np.testing.assert_allclose(got, naive_js(P), atol=1e-7)
    assert got[7, 8] == pytest.approx(0.0, abs=1e-7) and np.all(np.diag(got) == 0)
    disjoint = np.array([[0.5, 0.5, 0, 0], [0, 0, 0.5, 0.5]])
    assert js_distances(disjoint)[0, 1] == pytest.approx(1.0)  # the most: 1 bit


def test_mds_recovers_a_planar_configuration() -> None:
    rng = np.random.default_rng(1)
    X = rng.normal(size=(30, 2))
    D = np.linalg.norm(X[:, None] - X[None], axis=2)
    Y = classical_mds(D)
    np.testing.assert_allclose(np.linalg.norm(Y[:, None] - Y[None], axis=2), D, atol=1e-9)


def test_the_map_keeps_the_order_of_the_js_distances() -> None:
    # topics that drift along two latent directions: their JS distances are near-planar
    rng = np.random.default_rng(2)
    latent = rng.uniform(-2, 2, size=(40, 2))
    logits = latent @ rng.normal(size=(2, 400)) + rng.normal(scale=0.05, size=(40, 400))
    phi = np.exp(logits)
    phi /= phi.sum(axis=1, keepdims=True)
    D = js_distances(phi)
    Y = classical_mds(D)
    i, j = np.triu_indices(40, 1)
    rho = spearmanr(D[i, j], np.linalg.norm(Y[i] - Y[j], axis=1)).statistic
    assert rho > 0.95


def test_report_data_equals_the_references(model: LDA, corpus: Path, texts: Path) -> None:
    data = report_data(model, corpus, n_terms=8, n_docs=4, texts=texts)
    V = model.components_.shape[1]
    X = corpus_matrix(corpus, V)
    np.testing.assert_allclose(data["topics"]["umass"], umass_coherence(model.topic_word_, X, 10))
    np.testing.assert_allclose(data["topics"]["npmi"], npmi_coherence(model.topic_word_, X, 10))
    counts = np.asarray(X.sum(axis=0)).ravel()
    vocab = model.vocabulary_
    for word, count in zip(data["terms"]["word"], data["terms"]["count"], strict=True):
        assert count == counts[vocab.index(word)]
    p = counts / counts.sum()
    for k in range(3):
        for lam in (0.0, 0.37, 1.0):
            expected = reference_ranking(model.topic_word_[k], p, lam, 8)
            assert page_ranking(data, k, lam) == [vocab[w] for w in expected]
        hits = model.top_documents(k, 4, corpus, texts)
        assert [d[:2] for d in data["docs"][k]] == [[h.doc_id, h.name] for h in hits]
        assert [d[4] for d in data["docs"][k]] == [h.text for h in hits]
        assert all(d[4] for d in data["docs"][k])  # every document's text was read
    mass = np.maximum(model.components_ - model.eta_, 0).sum(axis=1)
    np.testing.assert_allclose(data["topics"]["share"], mass / mass.sum(), rtol=1e-5)
    assert data["traces"][0]["name"] == "ELBO" and len(data["traces"][0]["x"]) >= 6


def test_without_a_corpus_the_frequencies_are_the_training_counts(model: LDA) -> None:
    data = report_data(model)
    assert data["docs"] is None and data["topics"]["umass"] is None
    assert data["freq_source"] == "model"
    train = np.maximum(model.components_ - model.eta_, 0).sum(axis=0)
    vocab = model.vocabulary_
    for word, count in zip(data["terms"]["word"], data["terms"]["count"], strict=True):
        assert count == pytest.approx(train[vocab.index(word)])


class _Tags(HTMLParser):
    """Checks that elements nest and close, and gathers attributes."""

    VOID = frozenset({"meta", "input", "br", "img", "link"})

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.attrs: list[tuple[str, str, str | None]] = []

    def handle_starttag(self, tag, attrs):
        self.attrs += [(tag, name, value) for name, value in attrs]
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, (self.stack[-5:], tag)
        self.stack.pop()


def check_self_contained(page: str) -> None:
    """No resource outside the page, well-formed, one JSON blob, one script."""
    parser = _Tags()
    parser.feed(page)
    parser.close()
    assert parser.stack == []
    assert not [a for a in parser.attrs if a[1] in ("src", "href", "action", "srcset")]
    urls = set(re.findall(r"(?:https?|ftp)://[^\s\"'<>)]*", page, flags=re.I))
    assert urls <= {"http://www.w3.org/2000/svg"}  # a namespace name, never fetched
    assert "url(" not in page and "@import" not in page
    assert "default-src 'none'" in page
    assert page.count("</script>") == 2 and page.count("<script") == 2


def test_the_page_is_self_contained_and_escapes_the_corpus(
    model: LDA, corpus: Path, texts: Path, tmp_path: Path
) -> None:
    path = model.report(tmp_path / "r.html", corpus, n_docs=36, texts=texts)
    page = Path(path).read_text(encoding="utf-8")
    check_self_contained(page)
    assert "<b>" not in page and "</script><img" not in page  # the names' and texts' markup
    blob = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page, re.S)
    data = json.loads(blob.group(1))
    names = {d[1] for docs in data["docs"] for d in docs}
    assert "doc05<b>&amp;.txt" in names
    assert any("</script><img" in (d[4] or "") for docs in data["docs"] for d in docs)
    with pytest.raises(FileExistsError, match="overwrite"):
        model.report(tmp_path / "r.html", corpus)


def test_embed_json_escapes_what_ends_a_script() -> None:
    text = embed_json({"a": "</script><!-- & \u2028"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"a": "</script><!-- & \u2028"}
    with pytest.raises(ValueError):
        embed_json({"x": float("nan")})


def test_render_page_of_empty_traces_is_valid() -> None:
    data = {"title": "t", "model": "LDA", "K": 1, "V": 1, "n_terms": 1, "corpus": None,
            "freq_source": "model", "scales": {"umass": "", "npmi": ""},
            "topics": {"x": [0], "y": [0], "share": [1], "tokens": [1], "weight": None,
                       "umass": None, "npmi": None},
            "docs": None, "traces": [], "terms": {"word": ["a"], "count": [1], "logp": [0]},
            "cand": [[0]], "logphi": [[0]]}  # fmt: skip
    check_self_contained(render_page(data))


def test_report_command(model: LDA, corpus: Path, texts: Path, tmp_path: Path, capsys) -> None:
    save_model(model, tmp_path / "m")
    (tmp_path / "m" / "heldout_trace.json").write_text(
        json.dumps({"heldout": "x", "laps": [1, 2], "seconds": [1, 2], "scores": [-3.0, -2.9]})
    )
    out = tmp_path / "r.html"
    args = ["report", str(tmp_path / "m"), "--corpus", str(corpus), "--out", str(out), "--sync"]
    assert main([*args, "--terms", "5", "--docs", "2", "--texts", str(texts)]) == 0
    assert f"wrote {out}: 3 topics" in capsys.readouterr().out
    page = out.read_text(encoding="utf-8")
    check_self_contained(page)
    data = json.loads(re.search(r'id="report-data">(.*?)</script>', page, re.S).group(1))
    assert data["n_terms"] == 5 and all(len(d) == 2 for d in data["docs"])
    assert all(d[4] for docs in data["docs"] for d in docs)
    assert [t["name"] for t in data["traces"]] == ["ELBO", "heldout"]
    assert data["traces"][1]["y"] == [-3.0, -2.9]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "exists" in err and "--overwrite" in err and len(err.strip().splitlines()) == 1
    assert main([*args, "--overwrite"]) == 0
    assert main(["report", str(tmp_path / "m"), "--out", str(tmp_path / "no" / "r.html")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_an_hdp_report_has_weights_and_the_k_trace(corpus: Path, tmp_path: Path) -> None:
    hdp = HDP(6, n_laps=4, random_state=0, client="sync", progress=False).fit(corpus)
    data = report_data(hdp, corpus, n_terms=5, n_docs=2)
    np.testing.assert_allclose(data["topics"]["weight"], hdp.topic_weights_, rtol=1e-5)
    assert "K" in [t["name"] for t in data["traces"]]
    assert len(data["topics"]["x"]) == hdp.model_.n_components


def test_a_bad_heldout_trace_is_left_out(tmp_path: Path, caplog) -> None:
    from lsdask.jobs.report import saved_heldout

    assert saved_heldout(tmp_path) is None  # none there
    trace = tmp_path / "heldout_trace.json"
    trace.write_text(json.dumps({"laps": [1, 2], "scores": [-3.0]}))
    assert saved_heldout(tmp_path) is None and "not a heldout trace" in caplog.text
    trace.write_text(json.dumps({"laps": [1, True], "scores": [-3.0, -2.0]}))
    assert saved_heldout(tmp_path) is None
    trace.unlink()
    os.mkfifo(trace)  # a FIFO in its place is not read (it would hang)
    assert saved_heldout(tmp_path) is None
    trace.unlink()
    trace.write_text(json.dumps({"laps": [1, 2], "scores": [-3.0, -2.5], "seconds": [1, 2]}))
    assert saved_heldout(tmp_path) == {"laps": [1, 2], "scores": [-3.0, -2.5]}


def test_lda_report_defaults_to_the_fit_corpus(model: LDA, corpus: Path, tmp_path: Path) -> None:
    page = Path(model.report(tmp_path / "r.html", n_terms=3, n_docs=1)).read_text("utf-8")
    data = json.loads(re.search(r'id="report-data">(.*?)</script>', page, re.S).group(1))
    assert data["corpus"]["path"] == str(Corpus.open(corpus).path)
    assert all(len(d) == 1 for d in data["docs"])
    assert all(d[4] is None for docs in data["docs"] for d in docs)  # no texts: no text
    with pytest.raises(ValueError, match="corpus must be a Parquet corpus"):
        model.report(tmp_path / "s.html", sp.csr_matrix((2, model.components_.shape[1])))
    with pytest.raises(ValueError, match="n_terms"):
        model.report(tmp_path / "s.html", n_terms=0)
