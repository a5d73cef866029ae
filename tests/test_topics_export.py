"""``lsdask topics --format json|csv [--out FILE]``: the topic report as data."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest

from lsdask.cli import main
from lsdask.io.corpus import Corpus
from lsdask.jobs.topics import CSV_COLUMNS, UMASS_SCALE, topic_report
from lsdask.persist import load_model
from lsdask.synthetic import make_bars_corpus

PIXELS = [f"px{i}" for i in range(25)]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The bars corpus, an LDA with a learned alpha and an HDP fitted to it."""
    root = tmp_path_factory.mktemp("bars")
    X, _ = make_bars_corpus(n_docs=200, doc_topic_prior=0.1, random_state=5)
    Corpus.write(root / "train", X, PIXELS, docs_per_row_group=50)
    base = ["fit", str(root / "train"), "--topics", "6", "--sparsity", "3", "--laps", "2",
            "--sync"]  # fmt: skip
    assert main([*base, "--alpha", "auto", "--out", str(root / "lda")]) == 0
    assert main([*base, "--model", "hdp", "--moves", "none", "--out", str(root / "hdp")]) == 0
    return {"corpus": root / "train", "lda": root / "lda", "hdp": root / "hdp"}


def _run(argv: list[str], capsys: pytest.CaptureFixture) -> str:
    capsys.readouterr()
    assert main(argv) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("kind", ["lda", "hdp"])
@pytest.mark.parametrize("with_corpus", [True, False])
def test_json_holds_the_report(models, capsys, kind: str, with_corpus: bool) -> None:
    corpus = models["corpus"] if with_corpus else None
    argv = ["topics", str(models[kind]), "--top", "4", "--format", "json"]
    data = json.loads(_run(argv + (["--corpus", str(corpus)] if corpus else []), capsys))
    report = topic_report(models[kind], n_top=4, corpus=corpus)
    model = load_model(models[kind])
    assert data["model"] == kind.upper() and data["K"] == report.K == 6 and data["n_top"] == 4
    assert data["source"] == str(models[kind])
    assert data["alpha"] == pytest.approx(float(report.alpha.sum()))
    assert data["learned_alpha"] is report.learned_alpha is (kind == "lda")
    assert data["eta"] == report.eta
    assert len(data["topics"]) == 6
    for k, topic in enumerate(data["topics"]):
        assert topic["id"] == k
        assert topic["share"] == pytest.approx(report.share[k])
        assert topic["alpha_k"] == pytest.approx(report.alpha[k])
        assert [w["word"] for w in topic["words"]] == report.top_words[k]
        probs = [w["prob"] for w in topic["words"]]
        ids = [PIXELS.index(w) for w in report.top_words[k]]
        np.testing.assert_allclose(probs, model.topic_word_[k, ids])
        assert probs == sorted(probs, reverse=True)
        if kind == "hdp":
            assert topic["weight"] == pytest.approx(report.weights[k])
        else:
            assert topic["weight"] is None
        if with_corpus:
            assert topic["coherence"] == pytest.approx(report.coherence[k])
            assert topic["coherence_per_pair"] == pytest.approx(report.coherence[k] / 6)
        else:
            assert topic["coherence"] is None and topic["coherence_per_pair"] is None
    if kind == "hdp":
        assert data["hdp"]["weights_total"] == pytest.approx(float(report.weights.sum()))
        assert data["hdp"]["leftover"] == pytest.approx(report.leftover)
    else:
        assert data["hdp"] is None
    if with_corpus:
        coherence = data["coherence"]
        assert coherence["mean"] == pytest.approx(report.mean_coherence)
        assert coherence["pairs_per_topic"] == 6  # 4 words
        assert coherence["mean_per_pair"] == pytest.approx(report.mean_coherence / 6)
        assert coherence["scale"] == UMASS_SCALE and coherence["measure"] == "UMass"
        assert coherence["corpus"] == report.corpus
    else:
        assert data["coherence"] is None


@pytest.mark.parametrize("kind", ["lda", "hdp"])
def test_csv_one_row_per_topic(models, capsys, kind: str) -> None:
    argv = ["topics", str(models[kind]), "--top", "3", "--format", "csv",
            "--corpus", str(models["corpus"])]  # fmt: skip
    rows = list(csv.reader(io.StringIO(_run(argv, capsys))))
    report = topic_report(models[kind], n_top=3, corpus=models["corpus"])
    assert tuple(rows[0]) == CSV_COLUMNS
    assert CSV_COLUMNS == (
        "id", "share", "alpha_k", "weight", "coherence", "coherence_per_pair", "words",
    )  # fmt: skip
    assert len(rows) == 7
    for k, row in enumerate(rows[1:]):
        record = dict(zip(CSV_COLUMNS, row, strict=True))
        assert int(record["id"]) == k
        assert float(record["share"]) == report.share[k]
        assert float(record["alpha_k"]) == report.alpha[k]
        assert record["words"].split(" ") == report.top_words[k]
        assert float(record["coherence"]) == report.coherence[k]
        assert float(record["coherence_per_pair"]) == pytest.approx(report.coherence[k] / 3)
        if kind == "hdp":
            assert float(record["weight"]) == report.weights[k]
        else:
            assert record["weight"] == ""


def test_csv_without_corpus_leaves_coherence_empty(models, capsys) -> None:
    text = _run(["topics", str(models["lda"]), "--top", "1", "--format", "csv"], capsys)
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == 6
    assert all(r["coherence"] == "" and r["coherence_per_pair"] == "" for r in rows)


def test_out_writes_the_file_and_text_stays_the_default(models, capsys, tmp_path: Path) -> None:
    shown = _run(["topics", str(models["lda"]), "--top", "3"], capsys)
    assert shown == _run(["topics", str(models["lda"]), "--top", "3", "--format", "text"], capsys)
    assert shown.splitlines()[0].split()[:3] == ["topic", "share", "alpha_k"]
    out = tmp_path / "topics.json"
    out.write_text("old")  # replaced
    argv = ["topics", str(models["lda"]), "--top", "3", "--format", "json", "--out", str(out)]
    assert _run(argv, capsys) == ""
    assert json.loads(out.read_text())["K"] == 6
    assert sorted(p.name for p in tmp_path.iterdir()) == ["topics.json"]
    assert main(["topics", str(models["lda"]), "--out", str(tmp_path / "no" / "t.csv")]) == 2
    err = capsys.readouterr().err
    assert f"--out {tmp_path / 'no' / 't.csv'}: the folder {tmp_path / 'no'} does not exist" in err
    assert main(["topics", str(models["lda"]), "--out", str(tmp_path)]) == 2
    assert "is a folder; name a file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["topics", str(models["lda"]), "--format", "xml"])
    assert info.value.code == 2


def test_out_writes_through_a_link_or_device_the_user_named(models, capfd, tmp_path: Path) -> None:
    """``--out /dev/stdout`` and ``--out LINK`` write where they lead, as a shell's
    ``>`` does; the link stays a link."""
    argv = ["topics", str(models["lda"]), "--top", "2", "--format", "csv"]
    assert main(argv) == 0
    expected = capfd.readouterr().out
    assert main([*argv, "--out", "/dev/stdout"]) == 0
    captured = capfd.readouterr()
    assert captured.out == expected and "Traceback" not in captured.err
    target, link = tmp_path / "real.csv", tmp_path / "link.csv"
    target.write_text("old")
    link.symlink_to(target)
    assert main([*argv, "--out", str(link)]) == 0
    assert link.is_symlink() and target.read_text() == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.csv", "real.csv"]
    dangling = tmp_path / "to-new.csv"
    dangling.symlink_to(tmp_path / "new.csv")
    assert main([*argv, "--out", str(dangling)]) == 0
    assert (tmp_path / "new.csv").read_text() == expected
