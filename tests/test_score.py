"""``lsdask score``: a saved model's heldout score equals the one ``fit --heldout``
reported and :meth:`lsdask.LDA.score`'s."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from lsdask.cli import main
from lsdask.evaluate import split_documents
from lsdask.io.corpus import Corpus, read_all
from lsdask.jobs.score import ScoreReport, format_score, score_model
from lsdask.persist import load_model
from lsdask.synthetic import make_bars_corpus

PIXELS = [f"px{i}" for i in range(25)]


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bars")
    X, _ = make_bars_corpus(n_docs=240, doc_topic_prior=0.1, random_state=4)
    Corpus.write(root / "train", X[:200], PIXELS, docs_per_row_group=50)
    Corpus.write(root / "heldout", X[200:], PIXELS, docs_per_row_group=15)
    Corpus.write(root / "other", X[:20], [w.upper() for w in PIXELS])
    Corpus.write(root / "empty", sp.csr_matrix((0, 25)), PIXELS)
    Corpus.write(root / "short", sp.csr_matrix(np.eye(25)[:4]), PIXELS)  # one word type each
    return {name: root / name for name in ("train", "heldout", "other", "empty", "short")}


def _fit(corpora: dict[str, Path], out: Path, capsys: pytest.CaptureFixture, *extra: str) -> float:
    """`lsdask fit --heldout` into ``out``; the heldout score it reported."""
    code = main(
        ["fit", str(corpora["train"]), "--topics", "6", "--sparsity", "3", "--laps", "2",
         "--heldout", str(corpora["heldout"]), "--out", str(out), "--sync", *extra]
    )  # fmt: skip
    text = capsys.readouterr().out
    assert code == 0
    found = re.search(r"heldout document completion: (-?[0-9.]+) nats/token", text)
    assert found is not None, text
    return float(found[1])


def _scored(text: str) -> dict[str, float]:
    nats = re.search(r"^heldout log-likelihood: (-?[0-9.]+) nats/token$", text, re.M)
    perplexity = re.search(r"^perplexity: ([0-9.]+) ", text, re.M)
    scored = re.search(r"^scored: ([0-9,]+) tokens", text, re.M)
    held = re.search(r"^heldout: ([0-9,]+) documents, ([0-9,]+) tokens", text, re.M)
    assert nats and perplexity and scored and held, text
    return {
        "nats": float(nats[1]),
        "perplexity": float(perplexity[1]),
        "scored": float(scored[1].replace(",", "")),
        "docs": float(held[1].replace(",", "")),
        "tokens": float(held[2].replace(",", "")),
    }


@pytest.mark.parametrize(
    ("extra", "prior"),
    [
        ((), "prior used: alpha_k = alpha / K = 0.5 / 6 = 0.08333 per topic"),
        (("--alpha", "auto"), "prior used: the learned alpha_k, from "),
        (("--model", "hdp", "--moves", "none"), "prior used: the HDP's alpha_k = alpha E[beta_k]"),
    ],
)
def test_score_equals_what_fit_reported(
    corpora: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture, extra, prior
) -> None:
    out = tmp_path / "m"
    reported = _fit(corpora, out, capsys, *extra)
    assert main(["score", str(out), str(corpora["heldout"])]) == 0
    text = capsys.readouterr().out
    shown = _scored(text)
    model = load_model(out)
    expected = model.score(str(corpora["heldout"]))
    assert shown["nats"] == pytest.approx(reported, abs=5e-5)
    assert shown["nats"] == pytest.approx(expected, abs=5e-7)
    assert shown["perplexity"] == pytest.approx(math.exp(-expected), abs=5e-5)
    assert prior in text
    assert f"model: {type(model).__name__}, K={model.model_.n_components} ({out})" in text
    # the scored tokens: those of the B halves of the split of the stacked documents
    X = read_all(corpora["heldout"])
    assert shown["docs"] == X.shape[0] == 40 and shown["tokens"] == X.sum()
    assert shown["scored"] == split_documents(X, 0.8, 0)[1].sum()
    report = score_model(out, corpora["heldout"])
    assert isinstance(report, ScoreReport) and report.nats_per_token == expected
    np.testing.assert_array_equal(report.alpha, model.alpha_)
    assert format_score(report) == text.rstrip("\n")


def test_score_seed(corpora: dict[str, Path], tmp_path: Path, capsys) -> None:
    out = tmp_path / "m"
    _fit(corpora, out, capsys)
    assert main(["score", str(out), str(corpora["heldout"]), "--seed", "5"]) == 0
    shown = _scored(capsys.readouterr().out)
    model = load_model(out)
    assert shown["nats"] == pytest.approx(model.score(corpora["heldout"], random_state=5), abs=5e-7)
    assert score_model(out, corpora["heldout"], seed=5).nats_per_token != pytest.approx(
        score_model(out, corpora["heldout"]).nats_per_token, abs=1e-9
    )
    with pytest.raises(SystemExit) as info:
        main(["score", str(out), str(corpora["heldout"]), "--seed", "-1"])
    assert info.value.code == 2 and "--seed" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"seed must be an integer >= 0; got -1"):
        score_model(out, corpora["heldout"], seed=-1)


def test_score_reads_the_heldout_corpus_once(
    corpora: dict[str, Path], tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``score_sums`` gives the score's log-likelihood and scored tokens; the score
    job calls it once (one pass over the corpus) and the tokens it prints are its."""
    from lsdask.estimators.lda import LDA

    out = tmp_path / "m"
    _fit(corpora, out, capsys)
    model = load_model(out)
    X = read_all(corpora["heldout"])
    loglik, tokens = model.score_sums(corpora["heldout"], random_state=3)
    assert tokens == split_documents(X, 0.8, 3)[1].sum() > 0
    assert loglik / tokens == model.score(corpora["heldout"], random_state=3)
    assert model.score_sums(X, random_state=3) == pytest.approx((loglik, tokens), rel=1e-12)
    calls: list[str] = []
    real = LDA.score_sums

    def counted(self, *args, **kwargs):
        calls.append("score_sums")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(LDA, "score_sums", counted)
    monkeypatch.setattr(LDA, "score", lambda *a, **k: pytest.fail("a second pass"))
    report = score_model(out, corpora["heldout"], seed=3)
    assert calls == ["score_sums"]
    assert (report.n_scored_tokens, report.nats_per_token) == (tokens, loglik / tokens)


def test_score_errors(corpora: dict[str, Path], tmp_path: Path, capsys) -> None:
    out = tmp_path / "m"
    _fit(corpora, out, capsys)
    cases = [
        ([str(tmp_path / "none"), str(corpora["heldout"])], "lsdask: error: no LDA model at"),
        ([str(out), str(tmp_path / "none")], "lsdask: error: heldout corpus: no corpus at"),
        ([str(out), str(corpora["other"])], "has a different vocabulary than the model"),
        ([str(out), str(corpora["empty"])], "holds no documents; score a corpus of documents"),
        ([str(out), str(corpora["short"])], "its documents leave no token to score"),
    ]
    for argv, message in cases:
        assert main(["score", *argv]) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err
    with pytest.raises(FileNotFoundError, match="no LDA model at"):
        score_model(tmp_path / "none", corpora["heldout"])
    with pytest.raises(ValueError, match=r"heldout corpus .*other has a different vocabulary"):
        score_model(out, corpora["other"])
    with pytest.raises(ValueError, match=r"heldout corpus .*empty holds no documents"):
        score_model(out, corpora["empty"])
    with pytest.raises(ValueError, match=r"short: its documents leave no token to score"):
        score_model(out, corpora["short"])
